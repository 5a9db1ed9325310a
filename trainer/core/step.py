"""The jitted train step, compiled ahead of time once per mesh and reused across attempts.

The per-step RNG is fold_in(seed, step), so no RNG state needs saving. MaxText re-lowers and recompiles
on every elastic attempt; here an attempt on a mesh that was seen before (pause-and-resume, or the
return to full width after a resize) reuses the executable. The cache is per process, keyed by the
model/optimizer fingerprint and the mesh (its shape and devices), so it also serves repeated train() calls.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp

from trainer.core import mesh as meshlib
from trainer.core import microbatch
from trainer.core.compile_events import cache_hits
from trainer.core.executable_store import StoredStep
from trainer.core.memory import compiled_bytes
from trainer.core.model import ModelShape, loss_fn
from trainer.core.optim import apply_update, make_optimizer
from trainer.core.state import host_init_state, place, state_target, step_key

if TYPE_CHECKING:
    from elxpk_contract.settings import TrainerConfig
    from trainer.clock import Clock
    from trainer.core.executable_store import ExecutableStore

_CACHE_SIZE = 8  # executables kept per process (each mesh of each model shape is one)
_EXECUTABLES: OrderedDict[tuple, Compiled] = OrderedDict()


def make_step_fn(cfg):
    shape, optimizer = ModelShape.from_config(cfg), make_optimizer(cfg)
    count = cfg.gradient_accumulation_steps

    def train_step(state, tokens, step):
        key = step_key(cfg.seed, step)
        if count == 1:
            loss, grads = jax.value_and_grad(loss_fn)(state["params"], tokens, shape, key)
            return apply_update(optimizer, state, grads), loss

        def one(rows, g):  # microbatch g draws its dropout from fold_in(step key, g)
            return jax.value_and_grad(loss_fn)(state["params"], rows, shape, jax.random.fold_in(key, g))

        loss, grads = microbatch.summed(one, tokens, count)  # each microbatch's mean: the batch's is the sum / count
        return apply_update(optimizer, state, jax.tree.map(lambda g: g / count, grads)), loss / count

    return train_step


def step_fn(cfg, mesh):
    """The step for `mesh`: with --deterministic-reduction on, the gradient is combined in an order fixed by
    the job's nominal slices (trainer.core.reduction), so a resize does not change the result; off, XLA's plain
    all-reduce over the active slices."""
    if cfg.deterministic_reduction == "on":
        from trainer.core.reduction import make_deterministic_step_fn

        return make_deterministic_step_fn(cfg, mesh)
    return make_step_fn(cfg)


def compiler_options(cfg, mesh) -> dict[str, str | bool] | None:
    """XLA options of the step's executable on `mesh` (trainer.core.reduction.CSE_OFF says why)."""
    if cfg.deterministic_reduction == "on":
        from trainer.core.reduction import compiler_options as deterministic_options

        return deterministic_options(cfg, mesh)
    return None


@dataclass
class Compiled:
    executable: Any  # a jax Compiled: (state, tokens, step) -> (state, loss)
    compile_s: float
    bytes_per_device: int | None = None  # XLA's memory analysis (trainer.core.memory.compiled_bytes); None: none
    # How it was made: "compiled" (XLA, from scratch), "cache_hit" (jax's persistent cache served the compile)
    # or "deserialized" (trainer.core.executable_store: no trace, no lowering); `store`: why the store was not
    # used ("" when it was, or when there is none)
    how: str = "compiled"
    store: str = ""
    saved: str = ""  # why it was not written to the store ("" when it was, or was not to be)


class StepCache:
    """Hands out the compiled step for a mesh; counts the compiles one train() call caused."""

    def __init__(self, cfg: TrainerConfig, clock: Clock, *, donate: bool = False,
                 store: ExecutableStore | None = None) -> None:
        """`donate`: the step gives its input state's buffers to its output (trainer.elastic.live_recovery.
        step_donates says when that is allowed); the caller must not touch a state after passing it in.
        `store`: serialized steps a new process loads instead of compiling (trainer.core.executable_store)."""
        self._cfg = cfg
        self._store = store
        self._clock = clock
        self._donate = donate
        # The reduction mode, the remat policy, the attention kernel, the microbatch count and donation change
        # the executable (the reduction and the microbatches also the last bits of the result), not the
        # checkpoint.
        self._fingerprint = (cfg.fingerprint(), cfg.deterministic_reduction, cfg.remat_policy, cfg.attention,
                             cfg.gradient_accumulation_steps, donate)
        self.compiles = 0

    def has(self, mesh) -> bool:
        return (self._fingerprint, meshlib.mesh_key(mesh)) in _EXECUTABLES

    def get(self, mesh) -> tuple[Compiled, bool]:
        """The compiled step for `mesh`, and whether it had to be compiled now. The state goes in and comes
        out in the FSDP layout (trainer.core.sharding); the batch is split over every device."""
        key = (self._fingerprint, meshlib.mesh_key(mesh))
        if key in _EXECUTABLES:
            _EXECUTABLES.move_to_end(key)
            return _EXECUTABLES[key], False
        cfg, rep = self._cfg, meshlib.replicated(mesh)
        state = state_target(cfg, mesh)
        state_shardings = jax.tree.map(lambda a: a.sharding, state)
        tokens = jax.ShapeDtypeStruct((cfg.global_batch, cfg.seq_len + 1), jnp.int32,
                                      sharding=meshlib.batch_sharded(mesh))
        step = jax.ShapeDtypeStruct((), jnp.int32, sharding=rep)
        started = self._clock.monotonic()
        options = compiler_options(cfg, mesh)
        stored = StoredStep(self._store, self._fingerprint, mesh, (state, tokens, step), options)
        executable, how = stored.load(), "deserialized"
        if executable is None:
            hits = cache_hits()
            jitted = jax.jit(step_fn(cfg, mesh), in_shardings=(state_shardings, meshlib.batch_sharded(mesh), rep),
                             out_shardings=(state_shardings, rep), donate_argnums=(0,) if self._donate else ())
            executable = jitted.lower(state, tokens, step).compile(compiler_options=options)
            how = "cache_hit" if cache_hits() > hits else "compiled"
            if how == "compiled":  # one jax's cache loaded serializes without its code (executable_store says)
                stored.save(executable)
            self.compiles += 1
        compiled = Compiled(executable, self._clock.monotonic() - started, compiled_bytes(executable), how,
                            stored.why_not, stored.saved)
        _EXECUTABLES[key] = compiled
        while len(_EXECUTABLES) > _CACHE_SIZE:
            _EXECUTABLES.popitem(last=False)
        return compiled, True

    def init_state(self, mesh):
        """A freshly initialised train state on `mesh`."""
        return place(host_init_state(self._cfg), mesh)
