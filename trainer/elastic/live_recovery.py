"""Recovery from live replicas: after a slice loss, the survivors' copy of the last completed step.

The train state is replicated across slices and FSDP-sharded within each (trainer.core.sharding), so every
surviving slice holds a complete copy of the state after the last completed step. The step that failed
was never applied (with live recovery over several slices the compiled step does not donate its input
state, `step_donates`: the output is a new allocation and the input stays valid until the loop drops it),
so nothing has to be rewound:

- `LiveState` is the last completed step as the step loop left it: the number of steps done, the state on
  the mesh it was computed on and the data position of the next step. Keeping it costs nothing per step
  (a reference, no copy, no fingerprint); its memory is the step's undonated input.
- `rebuild` takes, for every array, the single-device shards that sit on surviving devices, assembles them
  into a global array on the survivors-only mesh (no copy: `jax.make_array_from_single_device_arrays`
  wraps the same buffers), and, when the new mesh has more slices (the end of a pause, a scale-up, a
  revived slice), reshards onto it with `jax.device_put`: the returning slices receive the state device
  to device from a survivor, not from storage. Only addressable shards are used, which is what a single
  controller (the simulated backend, Pathways) sees.
- Before any step runs on it, every replica of the rebuilt state (each slice of the new mesh, survivors
  and returning slices alike) is fingerprinted on its own devices and must equal the fingerprint of the
  survivors' replicas as the failed attempt left them (which must agree with each other). One call of
  trainer.ckpt.fingerprint's reduction on a mesh gives every slice's own result: the arrays are replicated over
  'slice', so each slice's devices reduce their own replica (tests/trainer/test_live_recovery.py checks
  that a difference on one slice shows on that slice only). The fingerprint is sharding-invariant, so the
  old and new meshes agree when intact. Taking the reference at recovery, not after every step, keeps the
  step loop free of it (bench/bench_local.py: a per-step fingerprint of the local model's state costs
  about a fifth of its CPU step); it cannot see a survivor's buffer corrupted in place between its step
  and the failure, which nothing on the step path would see either. `prepare` compiles those checks for
  the full mesh and every mesh one slice short when the session starts, so a recovery compiles nothing.

Each case where the live path cannot be trusted is a reason (a string), and the caller falls back to the
newest valid checkpoint and records the reason: `--recovery checkpoint`; a backend whose survivors do not
live on (multi-controller: jax aborts every process on a missed heartbeat); no state kept (a failure
before the attempt's first state existed); every slice lost; an array sharded across slices (no survivor
holds all of it); a fingerprint that disagrees.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from trainer.ckpt.fingerprint import leaf_names, leaf_sums, mismatch
from trainer.core import mesh as meshlib

if TYPE_CHECKING:
    from elxpk_contract.settings import TrainerConfig
    from trainer.elastic.slices import SliceBackend


@dataclass
class LiveState:
    """The state after `step` completed steps, on the mesh of `slices`, and what resumes from it."""

    step: int
    state: Any
    data_state: dict
    slices: tuple[int, ...]

    def leaf_ids(self) -> set[int]:
        import jax

        return {id(leaf) for leaf in jax.tree.leaves(self.state)}


def unavailable(cfg: TrainerConfig, backend: SliceBackend) -> str | None:
    """Why this run cannot recover from live replicas at all, or None when it can."""
    return unavailable_with(cfg, in_process_retry=backend.in_process_retry)


def unavailable_with(cfg: TrainerConfig, *, in_process_retry: bool) -> str | None:
    """unavailable() for a backend that does (True) or does not retry in its process."""
    if cfg.recovery != "live":
        return "--recovery checkpoint"
    if cfg.num_slices == 1:  # a lost slice is every slice: nothing survives to recover from
        return "one slice: no other slice holds a replica of the state"
    if not in_process_retry:
        return ("the multi-controller backend cannot reach the survivors' buffers: the jax runtime aborts "
                "every process when a slice misses its heartbeat")
    return None


def step_donates(cfg: TrainerConfig, backend: SliceBackend) -> bool:
    """Whether the compiled step may donate its input state to its output (XLA reuses the buffers: one
    state share less per device). Only where recovery never reads the last completed step's buffers:
    --recovery checkpoint, one slice, or the multi-controller backend. With live recovery over several
    slices the input must survive a step that fails midway."""
    return donates_with(cfg, in_process_retry=backend.in_process_retry)


def donates_with(cfg: TrainerConfig, *, in_process_retry: bool) -> bool:
    """step_donates() for a backend that does (True) or does not retry in its process, without one:
    `--compile-only` compiles the step the run's backend would."""
    return unavailable_with(cfg, in_process_retry=in_process_retry) is not None


def keep(step: int, state: Any, data_state: dict, slices: Sequence[int]) -> LiveState:
    """The live state after `step` steps (held, not copied)."""
    return LiveState(step, state, dict(data_state), tuple(slices))


def survivors_of(live: LiveState, lost: Sequence[int], ready: Sequence[int]) -> list[int]:
    """Slices of the live state's mesh that neither failed nor left: they still hold their buffers."""
    return [s for s in live.slices if s not in set(lost) and s in set(ready)]


def _normalised(index: tuple | None, shape: tuple[int, ...]) -> tuple:
    if index is None:
        return ()
    return tuple(sl.indices(n)[:2] for sl, n in zip(index, shape, strict=True))


def survivor_copy(x: Any, survivor_mesh: Any) -> Any | str:
    """`x` as a global array on `survivor_mesh` from the shards its devices already hold, or why not."""
    return _on_mesh(x, survivor_mesh)


def _on_mesh(x: Any, sub_mesh: Any) -> Any | str:
    """`x` re-wrapped on `sub_mesh` (some of its slices) without a copy, or why it cannot be.

    The same PartitionSpec on the smaller mesh must give every device the block it holds now; it does not
    when an array is split across the 'slice' axis (then no slice has all of it)."""
    import jax
    from jax.sharding import NamedSharding

    spec = x.sharding.spec
    target = NamedSharding(sub_mesh, spec)
    held = {shard.device: shard for shard in x.addressable_shards}
    wanted = target.addressable_devices_indices_map(x.shape)
    pieces = []
    for device, index in wanted.items():
        shard = held.get(device)
        if shard is None or _normalised(shard.index, x.shape) != _normalised(index, x.shape):
            return (f"no complete replica survives: an array of shape {tuple(x.shape)} is laid out {spec}, "
                    "split across slices")
        pieces.append(shard.data)
    return jax.make_array_from_single_device_arrays(x.shape, target, pieces)


def rebuild(live: LiveState, slice_devices: dict[int, list[Any]], survivors: Sequence[int],
            new_slices: Sequence[int]) -> tuple[Any, str | None]:
    """(the state on the mesh of `new_slices`, None) or (None, why the live state cannot be used)."""
    import jax

    if not survivors:
        return None, "no complete replica survives: every slice of the mesh was lost"
    survivor_mesh = meshlib.build_mesh(slice_devices, survivors)
    leaves, treedef = jax.tree.flatten(live.state)
    copies = []
    for leaf in leaves:
        copy = survivor_copy(leaf, survivor_mesh)
        if isinstance(copy, str):
            return None, copy
        copies.append(copy)
    if sorted(new_slices) != sorted(survivors):
        # The returning slices get their replica from a survivor's devices (a device-to-device transfer).
        new_mesh = meshlib.build_mesh(slice_devices, new_slices)
        from jax.sharding import NamedSharding

        copies = [jax.device_put(c, NamedSharding(new_mesh, c.sharding.spec)) for c in copies]
    state = jax.tree.unflatten(treedef, copies)
    # The reference: the survivors' replicas as the failed attempt left them (re-wrapped, not copied); they
    # must agree with each other, and every replica of the rebuilt state with them.
    reference_tree = jax.tree.unflatten(treedef, [_on_mesh(leaf, survivor_mesh) for leaf in leaves])
    references = replica_fingerprints(reference_tree, survivor_mesh)
    for s, found in zip(survivors[1:], references[1:], strict=True):
        problem = mismatch(references[0], found)
        if problem is not None:
            return None, f"the surviving slices disagree on step {live.step}: slice {s}'s replica: {problem}"
    rebuilt = replica_fingerprints(state, meshlib.build_mesh(slice_devices, new_slices))
    for s, found in zip(sorted(new_slices), rebuilt, strict=True):
        problem = mismatch(references[0], found)
        if problem is not None:
            return None, (f"the rebuilt state does not match the survivors' state of step {live.step}: slice "
                          f"{s}'s replica: {problem}")
    return state, None


_SUMS: dict[tuple, Any] = {}  # layout -> trainer.ckpt.fingerprint's reduction compiled for it
_SUMS_KEPT = 16


def _sums(leaves: list[Any], mesh: Any) -> Any:
    """The compiled per-array sums for this layout (arrays or ShapeDtypeStructs with shardings)."""
    import jax

    key = tuple((tuple(x.shape), str(x.dtype), x.sharding) for x in leaves)
    compiled = _SUMS.get(key)
    if compiled is None:
        # Replicated result: each slice's devices reduce their own replica (the 'slice' axis is not summed
        # over), so reading the result on a slice's device gives that slice's fingerprint.
        compiled = jax.jit(leaf_sums, out_shardings=meshlib.replicated(mesh)).lower(leaves).compile()
        _SUMS[key] = compiled
        while len(_SUMS) > _SUMS_KEPT:
            _SUMS.pop(next(iter(_SUMS)))
    return compiled


def replica_fingerprints(tree: Any, mesh: Any) -> list[dict[str, str]]:
    """The fingerprint of each slice's replica of `tree` (mesh rows in order), each read from the
    devices of its own slice."""
    import jax
    import numpy as np

    leaves = jax.tree.leaves(tree)
    out = _sums(leaves, mesh)(leaves)
    by_device = {shard.device: shard for shard in out.addressable_shards}
    names = leaf_names(tree)
    found = []
    for row in mesh.devices:
        sums = np.asarray(by_device[row[0]].data)
        found.append({name: f"{int(a):08x}{int(b):08x}" for name, (a, b) in zip(names, sums, strict=True)})
    return found


class Preparation:
    """`prepare` in a background thread, started with the session: the compiles overlap training instead of
    delaying its start, and a recovery waits for them (`wait`) rather than compiling the same again.

    The session must `close()` it before it returns. A thread still inside XLA's compiler while the
    interpreter finalizes aborts the process (exit 134, "terminate called after throwing an instance of"):
    a completed run would then read as a failed Job on a cluster, and be retried."""

    def __init__(self, target_for: Any, slice_devices: dict[int, list[Any]], slices: Sequence[int],
                 clock: Any) -> None:

        self.seconds: float | None = None
        self.error = ""
        self._clock = clock
        self._cancel = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(target_for, slice_devices, list(slices)),
                                        name="elxpk-live-prepare", daemon=True)
        self._thread.start()

    def _run(self, target_for: Any, slice_devices: dict[int, list[Any]], slices: list[int]) -> None:
        began = self._clock.monotonic()
        try:
            prepare(target_for, slice_devices, slices, cancelled=self._cancel.is_set)
        except Exception as exc:  # noqa: BLE001 - a recovery then compiles what it needs itself
            self.error = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        self.seconds = self._clock.monotonic() - began

    def wait(self) -> float:
        """Block until the compiles are done; their seconds."""
        self._thread.join()
        return self.seconds or 0.0

    def close(self) -> None:
        """Stop after the compile under way (the rest are no longer needed) and join the thread."""
        self._cancel.set()
        self._thread.join()


def prepare(target_for: Any, slice_devices: dict[int, list[Any]], slices: Sequence[int],
            cancelled: Callable[[], bool] = lambda: False) -> None:
    """Compile the checks of the likely recoveries before any failure, so a recovery compiles nothing of
    its own: the full mesh and every mesh one slice short. `target_for(mesh)` is the state's layout;
    `cancelled()` is asked before each compile."""
    import jax

    meshes = [list(slices)] + ([[s for s in slices if s != lost] for lost in slices] if len(slices) > 1 else [])
    for chosen in meshes:
        if cancelled():
            return
        mesh = meshlib.build_mesh(slice_devices, chosen)
        _sums(jax.tree.leaves(target_for(mesh)), mesh)
