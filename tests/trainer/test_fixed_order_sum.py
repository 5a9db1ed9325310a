"""trainer.core.model.sum_in_fixed_order: the loss's sum has one order, whatever XLA fuses it with (issue 29).

The end-to-end proof (resized runs report the losses of an uninterrupted one) is
tests/process/test_canonical_losses.py; here, the sum itself, in process and fast.
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

# Per-token losses: non-negative float32 of any size a device's shard can have (an odd count included).
LOSSES = hnp.arrays(np.float32, st.integers(1, 300),
                    elements=st.floats(0, 20, width=32, allow_nan=False, allow_infinity=False))


def _pairwise_tree(values: np.ndarray) -> np.float32:
    """The order the docstring promises, in numpy: first half plus second half, the odd one out carried."""
    flat = values.astype(np.float32)
    while flat.size > 1:
        half = flat.size // 2
        flat = np.concatenate([flat[:half] + flat[half:2 * half], flat[2 * half:]])
    return flat[0]


@settings(max_examples=25, deadline=None)
@given(values=LOSSES)
def test_the_sum_has_one_order_in_every_fusion_context(values):
    import jax

    from trainer.core.model import sum_in_fixed_order

    expected = _pairwise_tree(values).tobytes()
    alone = jax.jit(sum_in_fixed_order)(values)

    def in_scan(xs):  # a one-slot scan XLA inlines, and a two-slot one it keeps: the two widths of issue 29
        return jax.lax.scan(lambda c, x: (c, sum_in_fixed_order(x) * 2.0), None, xs)[1]

    # Stacked, indexed and halved (exactly) in numpy: each example's size is new, and an eager jax op on it
    # would be one more compile; only the three programs under test are compiled.
    one_slot = np.asarray(jax.jit(in_scan)(values[None]))[0] / np.float32(2.0)
    two_slots = np.asarray(jax.jit(in_scan)(np.stack([values, values[::-1]])))[0] / np.float32(2.0)
    assert {np.float32(alone).tobytes(), np.float32(one_slot).tobytes(), np.float32(two_slots).tobytes()} == {expected}
    assert math.isclose(float(alone), math.fsum(values.tolist()), rel_tol=1e-5, abs_tol=1e-6)  # it is the sum


def test_the_loss_gradient_is_the_means():
    """Summing in a fixed order changes the reported loss's last bit at most, never the gradient: every token's
    cotangent is exactly 1/n, as jnp.mean's."""
    import jax
    import jax.numpy as jnp

    from trainer.core.model import sum_in_fixed_order

    x = jnp.asarray(np.random.default_rng(0).random((4, 31), np.float32))
    ours = jax.grad(lambda v: sum_in_fixed_order(v) / v.size)(x)
    assert np.asarray(ours).tobytes() == np.asarray(jax.grad(jnp.mean)(x)).tobytes()
