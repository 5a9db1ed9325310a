"""A fingerprint of every array of the train state, computed on the devices that hold it.

For each array: the sum, modulo 2^32, of mix(bits(x_i), i) over its elements, and the sum of a second
bijective scramble of each mixed term: two lanes, 64 bits per array. `bits` is the element's own bit
pattern widened to uint32 and `i` its flat index in the global array. Integer addition is associative and commutative, so the sum is the
same whatever the reduction order, hence on any mesh and any sharding: a state saved from one mesh and
restored onto another fingerprints the same, and the per-device partial sums need no gather of data.

mix is a bijection of the element's bits for a fixed index (multiply by an odd constant, xor, then the
murmur3 finaliser, all invertible mod 2^32), so a change to one element always changes the sum: a single
flipped byte or a zeroed element is caught with certainty, not with high probability. Several changed
elements escape only if their changes cancel in both lanes at once.

The index wraps at 2^32 elements per array (16 GiB of float32 in one array), which only weakens the
position binding beyond that size, never the bits' own.
"""

from __future__ import annotations

import threading
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

_BITS_MUL, _INDEX_MUL, _INDEX_ADD, _LANE2_MUL = 0x9E3779B1, 0x85EBCA77, 0x165667B1, 0x2C1B3C6D
_FUNCTIONS: dict[Any, Any] = {}
# A restore prepares the reduction in a thread beside orbax's read (trainer/elastic/attempt.py): whoever comes
# second waits for the first's compile instead of compiling the same program again.
_COMPILING = threading.Lock()


def _bits(x: jax.Array) -> jax.Array:
    """The element's bits as uint32: floats and ints bit-cast to the unsigned type of their width."""
    if x.dtype == jnp.bool_:
        return x.astype(jnp.uint32)
    width = x.dtype.itemsize
    if width > 4:
        raise TypeError(f"fingerprint: {x.dtype} arrays (64-bit) are not supported")
    unsigned = {1: jnp.uint8, 2: jnp.uint16, 4: jnp.uint32}[width]
    return jax.lax.bitcast_convert_type(x, unsigned).astype(jnp.uint32)


def _finalise(h: jax.Array) -> jax.Array:
    h = h ^ (h >> 16)
    h = h * jnp.uint32(0x85EBCA6B)
    h = h ^ (h >> 13)
    h = h * jnp.uint32(0xC2B2AE35)
    return h ^ (h >> 16)


def _leaf(x: jax.Array) -> jax.Array:
    bits = _bits(x)
    # The flat index as a sum of per-dimension iotas: each device builds only its own shard's indices.
    index = jnp.zeros(x.shape, jnp.uint32)
    stride = 1
    for dim in reversed(range(x.ndim)):
        index = index + jax.lax.broadcasted_iota(jnp.uint32, x.shape, dim) * jnp.uint32(stride % 2**32)
        stride *= x.shape[dim]
    mixed = _finalise(bits * jnp.uint32(_BITS_MUL) ^ (index * jnp.uint32(_INDEX_MUL) + jnp.uint32(_INDEX_ADD)))
    # The second lane: a further bijective xorshift-multiply of the first, so a change whose lane-1 terms
    # cancel (the sum is linear) almost never cancels here too; cheaper than a second full mix.
    second = (mixed ^ (mixed >> 15)) * jnp.uint32(_LANE2_MUL)
    return jnp.stack([jnp.sum(mixed, dtype=jnp.uint32), jnp.sum(second, dtype=jnp.uint32)])


# Jitted on its own so that, inside `leaf_sums`, jax traces and lowers it once per leaf shape and dtype and calls
# that one function for every leaf of the shape (the optimizer's moments repeat every parameter's shape):
# traced leaf by leaf, tracing, lowering and loading the reduction of a micro model's state from the XLA cache
# took 0.30 s per layout, against 0.15 s this way (a trainer process builds two or three layouts). The same
# operations, so the same sums.
_leaf_function = jax.jit(_leaf)


def leaf_sums(leaves: list[jax.Array]) -> jax.Array:
    """Each leaf's two sums, stacked (leaves x 2, uint32): what the fingerprint compares, jitted by its callers."""
    return jnp.stack([_leaf_function(x) for x in leaves]) if leaves else jnp.zeros((0, 2), jnp.uint32)


def _function(leaves: list[jax.Array]):
    """One jitted reduction per (shapes, dtypes, shardings) of the state: compiled once per mesh."""
    key = tuple((x.shape, str(x.dtype), getattr(x, "sharding", None)) for x in leaves)
    with _COMPILING:
        return _FUNCTIONS.get(key) or _compiled(key, leaves)


def _compiled(key: Any, leaves: list[Any]) -> Any:
    sharding = getattr(leaves[0], "sharding", None) if leaves else None
    mesh = getattr(sharding, "mesh", None)
    # Replicated result: every process reads its own copy (multi-controller has no global fetch).
    out = NamedSharding(mesh, PartitionSpec()) if mesh is not None else None
    fn: Any = jax.jit(leaf_sums, out_shardings=out)
    if mesh is not None:  # compiled here, not at its first call: `prepare` runs this before a step loop
        fn = fn.lower(leaves).compile()
    _FUNCTIONS.clear()  # one state layout at a time; an old mesh's executable is not kept alive
    _FUNCTIONS[key] = fn
    return fn


def _key(entry: Any) -> str:
    for attr in ("key", "idx", "name"):  # DictKey, SequenceKey, GetAttrKey
        if hasattr(entry, attr):
            return str(getattr(entry, attr))
    return str(entry)


def leaf_names(tree: Any) -> list[str]:
    """Each leaf's path as 'params/blocks/0/ln1', in jax's flattening order."""
    return ["/".join(_key(e) for e in path) for path, _ in jax.tree_util.tree_flatten_with_path(tree)[0]]


def prepare(tree: Any) -> None:
    """Compile the reduction for `tree`'s layout (arrays, or ShapeDtypeStructs with shardings) without
    running it: the attempt calls this before arming the stall watchdog, so the first save inside the step
    loop compiles nothing (the watchdog must never count a compile)."""
    _function(jax.tree.leaves(tree))


class Pending:
    """A fingerprint dispatched to the devices and not yet fetched: dispatch returns at once, so the train
    loop does not wait for it; `result()` blocks until the devices are done."""

    def __init__(self, tree: Any) -> None:
        leaves = jax.tree.leaves(tree)
        self._names = leaf_names(tree)
        self._sums = _function(leaves)(leaves)

    def result(self) -> dict[str, str]:
        """{leaf path: 16 hex digits}. Only two uint32 per array come to the host."""
        sums = np.asarray(self._sums.addressable_data(0))
        return {name: f"{int(a):08x}{int(b):08x}" for name, (a, b) in zip(self._names, sums, strict=True)}


def fingerprint(tree: Any) -> dict[str, str]:
    """{leaf path: 16 hex digits} for every array in `tree` (jax arrays on any mesh, or host arrays)."""
    return Pending(tree).result()


def mismatch(expected: dict[str, str], found: dict[str, str]) -> str | None:
    """Why `found` is not `expected`, naming the first array that differs; None when they agree."""
    if sorted(expected) != sorted(found):
        missing = sorted(set(expected) ^ set(found))
        return f"fingerprint mismatch: the arrays differ ({missing[0]} in one and not the other)"
    for name in sorted(expected):
        if expected[name] != found[name]:
            return f"fingerprint mismatch: {name} (saved {expected[name]}, restored {found[name]})"
    return None
