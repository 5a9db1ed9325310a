"""Recovery from live replicas: after a slice loss, the survivors' copy of the last completed step.

The train state is replicated across slices and FSDP-sharded within each (trainer.sharding), so every
surviving slice holds a complete copy of the state after the last completed step. The step that failed
was never applied (the compiled step does not donate its input state: the output is a new allocation and
the input stays valid until the loop drops it), so nothing has to be rewound:

- `LiveState` is the last completed step as the step loop left it: the number of steps done, the state on
  the mesh it was computed on, the data position of the next step, and the state's fingerprint
  (trainer.fingerprint) taken right after the step, while every slice was alive.
- `rebuild` takes, for every array, the single-device shards that sit on surviving devices, assembles them
  into a global array on the survivors-only mesh (no copy: `jax.make_array_from_single_device_arrays`
  wraps the same buffers), and, when the new mesh has more slices (the end of a pause, a scale-up, a
  revived slice), reshards onto it with `jax.device_put`: the returning slices receive the state device
  to device from a survivor, not from storage. Only addressable shards are used, which is what a single
  controller (the simulated backend, Pathways) sees.
- The rebuilt state's fingerprint must equal the reference before any step runs on it; the fingerprint
  is sharding-invariant, so the two meshes agree on an intact state.

Each case where the live path cannot be trusted is a reason (a string), and the caller falls back to the
newest valid checkpoint and records the reason: `--recovery checkpoint`; a backend whose survivors do not
live on (multi-controller: jax aborts every process on a missed heartbeat); no state kept (a failure
before the attempt's first state existed); every slice lost; an array sharded across slices (no survivor
holds all of it); a fingerprint that disagrees.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from trainer import mesh as meshlib
from trainer.fingerprint import fingerprint, mismatch

if TYPE_CHECKING:
    from elxpk_contract.settings import TrainerConfig
    from trainer.slices import SliceBackend


@dataclass
class LiveState:
    """The state after `step` completed steps, on the mesh of `slices`, and what resumes from it."""

    step: int
    state: Any
    data_state: dict
    slices: tuple[int, ...]
    reference: dict[str, str]  # fingerprint() of `state`, taken while every slice of `slices` was alive

    def leaf_ids(self) -> set[int]:
        import jax

        return {id(leaf) for leaf in jax.tree.leaves(self.state)}


def unavailable(cfg: TrainerConfig, backend: SliceBackend) -> str | None:
    """Why this run cannot recover from live replicas at all, or None when it can."""
    if cfg.recovery != "live":
        return "--recovery checkpoint"
    if not backend.in_process_retry:
        return ("the multi-controller backend cannot reach the survivors' buffers: the jax runtime aborts "
                "every process when a slice misses its heartbeat")
    return None


def keep(step: int, state: Any, data_state: dict, slices: Sequence[int]) -> LiveState:
    """The live state after `step` steps; fingerprints it now, while its slices are all alive."""
    return LiveState(step, state, dict(data_state), tuple(slices), fingerprint(state))


def survivors_of(live: LiveState, lost: Sequence[int], ready: Sequence[int]) -> list[int]:
    """Slices of the live state's mesh that neither failed nor left: they still hold their buffers."""
    return [s for s in live.slices if s not in set(lost) and s in set(ready)]


def _normalised(index: tuple | None, shape: tuple[int, ...]) -> tuple:
    if index is None:
        return ()
    return tuple(sl.indices(n)[:2] for sl, n in zip(index, shape, strict=True))


def survivor_copy(x: Any, survivor_mesh: Any) -> Any | str:
    """`x` as a global array on `survivor_mesh` from the shards its devices already hold, or why not.

    The same PartitionSpec on the survivors-only mesh must give every survivor device the block it holds
    now; it does not when an array is split across the 'slice' axis (then no survivor has all of it)."""
    import jax
    from jax.sharding import NamedSharding

    spec = x.sharding.spec
    target = NamedSharding(survivor_mesh, spec)
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
    problem = mismatch(live.reference, fingerprint(state))
    if problem is not None:
        return None, f"the rebuilt state does not match the survivors' state of step {live.step}: {problem}"
    return state, None
