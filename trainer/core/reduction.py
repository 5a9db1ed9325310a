"""Deterministic reduction: the gradient does not depend on how many slices computed it (issue 12).

The plain step (trainer.core.step.make_step_fn) lets XLA reduce the gradient over every device of every
active slice; when a slice is lost the survivors reduce more examples each, the float additions happen in
another order and the trajectory drifts (last bits first, then, amplified by training, visibly). Here the
reduction order is a constant of the job:

- Fixed virtual shards. The global batch is cut into `num_slices` (the NOMINAL count) shards of
  global_batch / num_slices consecutive examples. Shard n is always computed by the same per-shard program
  (`one_shard`): the same shapes, the same split over the devices of one slice, the same dropout keys
  (example i of the global batch: fold_in(step key, i)), the same within-slice reduction over 'data'.
  Which slice runs it does not enter the computation.
- Slots. With A active slices each carries S = ceil(num_slices / A) slots; slot (a, s) holds shard
  a * S + s (`slot_layout`). Slots past the last shard are padding: computed (every slice runs the same
  loop) and never read. A slice runs its slots in a `lax.scan`, i.e. gradient accumulation over the
  shards it carries, but keeps one partial sum per shard instead of adding them up. Within a shard, each
  device's rows may be cut into --gradient-accumulation-steps microbatches (trainer.core.microbatch), summed
  in the shard's own program: the same at every width.
- Canonical combination. The partial sums are all-gathered across slices into [A * S, ...], and the
  `num_slices` real ones are added in shard order, one after another (`_in_shard_order`): an unrolled
  chain of adds, which XLA does not reassociate, never a tree reduction whose shape would follow A.

The per-shard program runs inside `shard_map`, so it is per-device code that GSPMD cannot re-partition
differently at another width; tests/trainer/test_bitwise_resize.py checks that the per-shard partial
gradients are bitwise equal at every width, and that whole runs through resize and scale-up are too.

Cross-slice traffic per device (P parameters sharded over D devices of a slice, b bytes each): the
all-gather receives (num_slices - S) partial sums of P/D values, against 2 (A - 1)/A * P/D for a ring
all-reduce. At full width that is (N - 1) P b / D against 2 (N - 1)/N P b / D: N/2 times the all-reduce
(equal for 2 slices). Inside a slice the reduction is a reduce-scatter (FSDP) or an all-reduce, as before.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from trainer.core import microbatch, sharding
from trainer.core.model import ModelShape, loss_fn
from trainer.core.optim import apply_update, make_optimizer
from trainer.core.state import abstract_state, step_key

MODES = ("on", "off")
SLOTS_SPEC = PartitionSpec("slice", None, "data", None)  # [active slice, slot, example, token]
# XLA compiles a one-device mesh (one survivor with one device) without the SPMD partitioner, whose pipeline
# runs CSE before the first algebraic simplification. Where CSE has merged the forward's and the backward's
# broadcast of the softmax sum, algsimp keeps `g / broadcast(sum)`; where it has not, it rewrites it to
# `g * broadcast(1 / sum)`, which rounds differently. Without the CSE pass both pipelines simplify the
# per-shard program the same way (found by diffing --xla_dump_hlo_pass_re dumps; tested for 1..4 devices).
# Only a job with one device per slice and more than one slice can reach a one-device mesh after a resize, so
# only such a job pays for it (compiler_options): CSE stays on for real slices of several chips.
CSE_OFF: dict[str, str | bool] = {"xla_disable_hlo_passes": "cse"}


def compiler_options(cfg, mesh: Mesh) -> dict[str, str | bool] | None:
    """XLA options for the deterministic step on `mesh`. A property of the job, not of the width: every mesh
    of the job has the same devices per slice, so full width and every survivor get the same options."""
    one_device_survivor = cfg.num_slices > 1 and mesh.shape["data"] == 1
    return dict(CSE_OFF) if one_device_survivor else None


def slot_layout(num_shards: int, num_active: int) -> np.ndarray:
    """[num_active, slots per slice] int32: the shard each slot computes, -1 for padding. Slice a (its
    position among the active slices) carries shards a*S .. a*S + S - 1, S = ceil(num_shards / num_active)."""
    per_slice = math.ceil(num_shards / num_active)
    flat = np.arange(num_active * per_slice, dtype=np.int32)
    return np.where(flat < num_shards, flat, -1).reshape(num_active, per_slice)


def _leaf_dim(spec: PartitionSpec) -> int | None:
    """The dimension an FSDP spec splits over 'data', or None (replicated)."""
    return len(spec) - 1 if len(spec) and spec[-1] == "data" else None


def _in_shard_order(partials: jax.Array, order: list[int]) -> jax.Array:
    """partials[order[0]] + partials[order[1]] + ... left to right: the one canonical summation."""
    total = partials[order[0]]
    for index in order[1:]:
        total = total + partials[index]
    return total


def shard_gradients_fn(cfg, mesh: Mesh):
    """(params, slots [A, S, B/N, L+1], shard ids [A, S], key) -> (per-slot losses [A*S], per-slot
    gradient partial sums [A*S, ...]), all of them on every slice. The building block of the step, and what
    the width-invariance test compares across meshes."""
    shape = ModelShape.from_config(cfg)
    per_shard = cfg.global_batch // cfg.num_slices
    count = cfg.gradient_accumulation_steps  # microbatches of each device's rows (trainer.core.microbatch)
    param_specs = jax.tree.map(lambda a: sharding.fsdp_spec(tuple(a.shape), mesh.shape["data"]),
                               _abstract_params(cfg))

    def per_device(params, slots, shard_ids, key):
        dims = jax.tree.map(_leaf_dim, param_specs, is_leaf=lambda s: isinstance(s, PartitionSpec))
        full = jax.tree.map(lambda p, d: p if d is None else jax.lax.all_gather(p, "data", axis=d, tiled=True),
                            params, dims)

        def one_shard(carry, slot):
            tokens, shard_id = slot
            local = tokens.shape[0]
            first = shard_id * per_shard + jax.lax.axis_index("data") * local

            def one_microbatch(rows, g):
                # Example i of the global batch draws its dropout from fold_in(step key, i): the masks depend
                # on neither the width nor the nominal topology (a 1 x 4 run sees the same masks as a 2 x 2 one).
                index = first + microbatch.example_index(g, count, rows.shape[0])
                keys = jax.vmap(lambda i: jax.random.fold_in(key, i))(index)
                loss, grads = jax.value_and_grad(loss_fn)(full, rows, shape, keys)  # keys: one per example
                grads = jax.tree.map(  # the reduction inside the slice, as the plain step has it
                    lambda grad, d: jax.lax.psum(grad, "data") if d is None
                    else jax.lax.psum_scatter(grad, "data", scatter_dimension=d, tiled=True), grads, dims)
                return jax.lax.psum(loss, "data"), grads

            return carry, microbatch.summed(one_microbatch, tokens, count)

        _, (losses, grads) = jax.lax.scan(one_shard, None, (slots[0], shard_ids[0]))
        gather = lambda x: jax.lax.all_gather(x, "slice", axis=0, tiled=True)  # noqa: E731
        return gather(losses), jax.tree.map(gather, grads)

    slot_specs = jax.tree.map(lambda s: PartitionSpec(None, *s), param_specs,
                              is_leaf=lambda s: isinstance(s, PartitionSpec))
    return jax.shard_map(per_device, mesh=mesh,
                         in_specs=(param_specs, SLOTS_SPEC, PartitionSpec("slice", None), PartitionSpec()),
                         out_specs=(PartitionSpec(), slot_specs), check_vma=False)


def make_deterministic_step_fn(cfg, mesh: Mesh):
    """The train step with the same signature and shardings as trainer.core.step.make_step_fn's, whose loss and
    gradient are bitwise the same whichever of the job's slices are active."""

    optimizer = make_optimizer(cfg)
    shards, active = cfg.num_slices, mesh.shape["slice"]
    layout = slot_layout(shards, active)
    per_slice = layout.shape[1]
    order = [int(np.flatnonzero(layout.reshape(-1) == n)[0]) for n in range(shards)]
    per_shard = cfg.global_batch // shards
    # Each adds the mean of its examples: the global mean is the sum / pieces.
    pieces = shards * mesh.shape["data"] * cfg.gradient_accumulation_steps
    shard_gradients = shard_gradients_fn(cfg, mesh)
    slots_sharding = NamedSharding(mesh, SLOTS_SPEC)

    def train_step(state, tokens, step):
        key = step_key(cfg.seed, step)
        by_shard = tokens.reshape(shards, per_shard, tokens.shape[-1])
        padding = active * per_slice - shards
        if padding:
            by_shard = jnp.concatenate([by_shard, jnp.zeros((padding, *by_shard.shape[1:]), by_shard.dtype)])
        slots = jax.lax.with_sharding_constraint(by_shard.reshape(active, per_slice, *by_shard.shape[1:]),
                                                 slots_sharding)
        ids = jnp.asarray(np.maximum(layout, 0))  # a padding slot's key is never used: its result is dropped
        losses, partials = shard_gradients(state["params"], slots, ids, key)
        loss = _in_shard_order(losses, order) / pieces
        grads = jax.tree.map(lambda g: _in_shard_order(g, order) / pieces, partials)
        return apply_update(optimizer, state, grads), loss

    return train_step


def _abstract_params(cfg) -> Any:

    return abstract_state(cfg)["params"]
