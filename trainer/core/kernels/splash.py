"""Causal splash attention: jax's own Pallas TPU kernel (jax.experimental.pallas.ops.tpu.splash_attention).

It never materialises the [L, L] scores: forward and backward walk blocks of queries and keys, skipping
the blocks above the diagonal. Measured on one v5e (docs/trainer.md "On a TPU"): 3-3.4x faster than XLA's
attention at the presets' shapes, with 7-32x less temporary memory. Blocks are 1024 (BLOCK; MaxText's default
is 512, jax's 128), capped at the sequence length; they must be multiples of 128, so the sequence must be too.
Off a TPU the kernel runs in Pallas's interpreter: slow, but the CPU tests check the numbers with it.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
from collections.abc import Iterator

import jax
import jax.numpy as jnp

# Every block size of the kernel. Measured on one v5e (issue 48, bench/results/), 125m at 16 examples: 49.6% MFU
# with MaxText's default of 512, 50.1% with 1024; 2048 needs a larger scoped VMEM limit and was not reached.
BLOCK = 1024
LANE = 128  # the TPU's lane width: every block size is a multiple of it


# Set while a step is lowered for a TPU from another host (`--compile-only` on a CPU machine): the kernel must
# then be Mosaic's, not the interpreter's that the CPU backend would otherwise get.
_FOR_TPU = contextvars.ContextVar("splash_for_tpu", default=False)


@contextlib.contextmanager
def lowering_for_tpu() -> Iterator[None]:
    """Within it, the kernel is lowered for a TPU whatever jax's default backend is."""
    token = _FOR_TPU.set(True)
    try:
        yield
    finally:
        _FOR_TPU.reset(token)


def supported(seq_len: int, head_width: int) -> bool:
    """Whether the kernel takes these shapes (sequence in whole 128-token blocks, head width 64 or 128)."""
    return seq_len % LANE == 0 and head_width in (64, 128)


def _kernel(n_heads: int, seq_len: int, interpret: bool):
    from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel as kernel
    from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as masks

    block = min(BLOCK, seq_len)  # BLOCK read at trace time: bench/bench_chip.py --splash-block measures others
    sizes = kernel.BlockSizes(block_q=block, block_kv=block, block_kv_compute=block, block_q_dkv=block,
                              block_kv_dkv=block, block_kv_dkv_compute=block, block_q_dq=block, block_kv_dq=block)
    mask = masks.MultiHeadMask([masks.CausalMask((seq_len, seq_len)) for _ in range(n_heads)])
    # The residuals (the softmax's log-sum-exp) are named "context" so that a remat policy saving the
    # attention output saves them too (trainer.core.remat).
    # Made anew in every trace, not cached: the kernel holds its mask's block tables as jax arrays, which a
    # later trace would capture as constants of another computation ("compiled for N inputs but called
    # with M" when a second step is compiled in the same process).
    return kernel.make_splash_mha(mask, block_sizes=sizes, head_shards=1, q_seq_shards=1,
                                  residual_checkpoint_name="context", interpret=interpret)


def causal_attention(q_BxLxHxK: jax.Array, k_BxLxHxK: jax.Array, v_BxLxHxK: jax.Array) -> jax.Array:
    """softmax(q k^T / sqrt(K), causal) v, [B, L, H, K] in and out (the kernel's layout is [H, L, K])."""
    heads_first = functools.partial(jnp.swapaxes, axis1=1, axis2=2)
    return heads_first(causal_attention_heads_first(heads_first(q_BxLxHxK), heads_first(k_BxLxHxK),
                                                    heads_first(v_BxLxHxK)))


def causal_attention_heads_first(q_BxHxLxK: jax.Array, k_BxHxLxK: jax.Array, v_BxHxLxK: jax.Array) -> jax.Array:
    """The same, [B, H, L, K] in and out: the kernel's own layout, one example at a time."""
    _, heads, length, width = q_BxHxLxK.shape
    kernel = _kernel(heads, length, interpret=jax.default_backend() != "tpu" and not _FOR_TPU.get())
    q = q_BxHxLxK * jnp.asarray(width ** -0.5, q_BxHxLxK.dtype)  # the kernel does not scale
    return jax.vmap(kernel)(q, k_BxHxLxK, v_BxHxLxK)
