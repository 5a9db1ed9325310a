"""Gradient accumulation (--gradient-accumulation-steps, MaxText's name): a step's batch cut into microbatches
that run one after the other, their losses and gradients summed in one fixed order.

Why: the activations kept for the backward pass are those of one microbatch, so a large --global-batch needs
no more recompute (--remat-policy) than a small one, and the step's speed does not fall as the batch grows.
The cost is one gradient-sized accumulator.

The split is fixed: microbatch g holds examples g, g + G, g + 2G, ... of the rows it is given. Given a
batch split over devices (each device a contiguous block whose size G divides), every device then holds its
own share of every microbatch, so cutting needs no communication, and the deterministic step
(trainer.core.reduction), which cuts each device's rows in its per-device program, gets the same examples in
each microbatch on every mesh of the job.

The sums run in a `lax.scan` from zeros, microbatch 0 first: an unrolled chain of adds in a fixed order,
which XLA does not reassociate. So the count is part of what fixes a step's bits, as --global-batch is: a
resize or resume at the same count is bitwise (tests/trainer/test_microbatch.py), and counts 1, 2 and 4 are
compared there too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp


def split(rows: jax.Array, count: int) -> jax.Array:
    """[B, ...] -> [count, B / count, ...]: microbatch g is rows g, g + count, g + 2 count, ..."""
    b = rows.shape[0]
    return jnp.swapaxes(rows.reshape(b // count, count, *rows.shape[1:]), 0, 1)


def example_index(g: jax.Array, count: int, size: int) -> jax.Array:
    """The positions, among the rows given to `split`, of microbatch g's `size` examples."""
    return g + count * jnp.arange(size)


def summed(loss_and_grads: Callable[[jax.Array, jax.Array], tuple[jax.Array, Any]], rows: jax.Array,
           count: int) -> tuple[jax.Array, Any]:
    """(sum of the losses, sum of the gradients) of `loss_and_grads(microbatch rows, g)` over the `count`
    microbatches of `rows`, added in order g = 0, 1, ... With one microbatch it is the call itself."""
    if count == 1:
        return loss_and_grads(rows, jnp.int32(0))
    pieces = split(rows, count)
    loss_shape, grads_shape = jax.eval_shape(loss_and_grads, pieces[0], jnp.int32(0))

    def add_one(totals, piece_and_index):
        loss, grads = loss_and_grads(*piece_and_index)
        return (totals[0] + loss, jax.tree.map(jnp.add, totals[1], grads)), None

    zeros = (jnp.zeros(loss_shape.shape, loss_shape.dtype),
             jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), grads_shape))
    totals, _ = jax.lax.scan(add_one, zeros, (pieces, jnp.arange(count, dtype=jnp.int32)))
    return totals
