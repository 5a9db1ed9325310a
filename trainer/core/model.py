"""A decoder-only transformer LM in plain jax (pre-norm, RMSNorm, tied embeddings).

Tensor names carry their shapes (B batch, L length, D width, H heads, K head width, F MLP width,
V vocabulary), as in nanodo.

Mixed precision (`compute_dtype` bfloat16): the float32 master params are cast to bfloat16 inside the
loss, so the matmuls and activations run in bfloat16 while the gradients (through the cast), the optimizer
state and the update stay float32. RMSNorm statistics, the attention softmax, the logits and the loss are
computed in float32. With float32 compute every cast is a no-op.

Memory (trainer/core/memory.py follows each choice): each block runs under the --remat-policy
(trainer.core.remat) over the intermediates named here with checkpoint_name; attention is the --attention
kernel (trainer.core.attention); the float32 logits are made and consumed a few examples at a time
(`mean_nll`, which also makes the loss's gradient in the same pass), so the [B, L, V] logits never exist
whole.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np
from jax.ad_checkpoint import checkpoint_name

from trainer.core import attention, remat
from trainer.core.precision import platform, resolve_compute_dtype

LOSS_CHUNK_TOKENS = 8192  # tokens whose float32 logits exist at once ([8192, 32000] f32 is 1 GiB)


@dataclass(frozen=True)
class ModelShape:
    vocab_size: int
    seq_len: int
    d_model: int
    n_layers: int
    n_heads: int
    d_ff: int
    dropout: float
    compute_dtype: str = "float32"  # resolved: float32 or bfloat16 (see trainer/core/precision.py)
    attention: Literal["xla", "cudnn", "splash"] = "xla"  # resolved (trainer.core.attention)
    remat_policy: str = "none"  # trainer.core.remat's names (auto, not yet resolved, runs as none)
    logits_dtype: str = "float32"  # --logits-dtype: auto (the compute dtype) or float32

    @classmethod
    def from_config(cls, cfg) -> ModelShape:
        dtype = resolve_compute_dtype(cfg.compute_dtype)
        kernel = attention.resolve(cfg.attention, dtype, cfg.seq_len, cfg.d_model // cfg.n_heads, platform())
        return cls(cfg.vocab_size, cfg.seq_len, cfg.d_model, cfg.n_layers, cfg.n_heads, cfg.d_ff, cfg.dropout,
                   dtype, kernel, cfg.remat_policy, cfg.logits_dtype)  # type: ignore[arg-type]

    def param_count(self) -> int:
        d, f = self.d_model, self.d_ff
        block = 4 * d * d + 2 * d * f + 2 * d
        return self.vocab_size * d + self.seq_len * d + self.n_layers * block + d

    def matmul_params(self) -> int:
        """N of the FLOP count: the parameters of matmuls (the tied output projection counts; the position
        table and the norms are not matmuls)."""
        d, f = self.d_model, self.d_ff
        return self.n_layers * (4 * d * d + 2 * d * f) + self.vocab_size * d

    def flops_per_example(self) -> float:
        """Model FLOPs of one training example, matmuls only, forward + backward = 3 x forward:
        seq_len * (6 N + 6 n_layers d_model seq_len). The second term is QK^T and AV (2 * 2 * seq_len *
        d_model per token and layer, forward) with causal attention counted at half, as MFU is usually
        reported (PaLM appendix B; MaxText)."""
        d, length = self.d_model, self.seq_len
        per_token = 2 * self.matmul_params()
        attention = 2 * self.n_layers * length * d  # QK^T and AV, the causal half
        return 3.0 * length * (per_token + attention)


def init_params(shape: ModelShape, rng: np.random.Generator) -> dict:
    """Initial parameters as host float32 arrays: numpy, so no device program has to be compiled."""
    return _param_tree(shape, lambda dims, scale: (scale * rng.standard_normal(dims)).astype(np.float32),
                       lambda dims: np.ones(dims, np.float32))


def param_shapes(shape: ModelShape) -> dict:
    """The parameters' shapes and dtypes (jax.ShapeDtypeStruct), allocating nothing: what the memory check
    reads before any array of a model that may not fit exists."""
    def struct(dims, _scale=None):
        return jax.ShapeDtypeStruct(tuple(dims), jnp.float32)

    return _param_tree(shape, struct, struct)


def _param_tree(shape: ModelShape, normal, ones) -> dict:
    """The parameter layout, declared once: `normal(dims, scale)` and `ones(dims)` make each leaf."""
    d, f = shape.d_model, shape.d_ff
    out_scale = 0.02 / (2 * shape.n_layers) ** 0.5  # keeps the residual stream's variance flat in depth
    blocks = [
        {
            "ln1": ones((d,)),
            "wqkv_Dx3D": normal((d, 3 * d), 0.02),
            "wo_DxD": normal((d, d), out_scale),
            "ln2": ones((d,)),
            "w1_DxF": normal((d, f), 0.02),
            "w2_FxD": normal((f, d), out_scale),
        }
        for _ in range(shape.n_layers)
    ]
    return {
        "embed_VxD": normal((shape.vocab_size, d), 0.02),
        "pos_LxD": normal((shape.seq_len, d), 0.01),
        "blocks": blocks,
        "ln_f": ones((d,)),
    }


def _rms_norm(x_BxLxD, scale_D):
    x32 = x_BxLxD.astype(jnp.float32)  # the statistics in float32 whatever the compute dtype
    return (x32 * jax.lax.rsqrt(jnp.mean(x32**2, axis=-1, keepdims=True) + 1e-6) * scale_D).astype(x_BxLxD.dtype)


def _dropout(x, rate: float, key):
    """`key` is one key for the whole batch, or one per example ([B, 2]: trainer/core/reduction.py's, so that an
    example's mask does not depend on how the batch is split)."""
    if rate == 0.0 or key is None:
        return x
    if key.ndim == 2:
        keep = jax.vmap(lambda k: jax.random.bernoulli(k, 1.0 - rate, x.shape[1:]))(key)
        return jnp.where(keep, x / (1.0 - rate), 0.0)
    keep = jax.random.bernoulli(key, 1.0 - rate, x.shape)
    return jnp.where(keep, x / (1.0 - rate), 0.0)


def _attention(x_BxLxD, block, shape: ModelShape):
    b, length, d = x_BxLxD.shape
    k_width = d // shape.n_heads
    if shape.attention == "splash":
        return _attention_heads_first(x_BxLxD, block, shape)
    qkv_BxLx3D = checkpoint_name(x_BxLxD @ block["wqkv_Dx3D"], "qkv_proj")
    q, k, v = (t.reshape(b, length, shape.n_heads, k_width) for t in jnp.split(qkv_BxLx3D, 3, axis=-1))
    out_BxLxHxK = checkpoint_name(attention.causal(q, k, v, shape.attention), "context")
    return checkpoint_name(out_BxLxHxK.reshape(b, length, d) @ block["wo_DxD"], "out_proj")


def _attention_heads_first(x_BxLxD, block, shape: ModelShape):
    """The same attention for a kernel that takes heads first ([B, H, L, K], splash): the projections contract
    straight into and out of that layout, instead of reshaping and transposing [B, L, H, K] on both sides of
    the kernel (on a v5e at 125m those layout copies were 7% of the step). The weights are the same arrays,
    read as [D, 3, H, K] and [H, K, D]."""
    from trainer.core.kernels.splash import causal_attention_heads_first

    d, heads = x_BxLxD.shape[-1], shape.n_heads
    wqkv_Dx3xHxK = block["wqkv_Dx3D"].reshape(d, 3, heads, d // heads)
    qkv_3xBxHxLxK = checkpoint_name(jnp.einsum("bld,dthk->tbhlk", x_BxLxD, wqkv_Dx3xHxK), "qkv_proj")
    out_BxHxLxK = checkpoint_name(causal_attention_heads_first(*qkv_3xBxHxLxK), "context")
    wo_HxKxD = block["wo_DxD"].reshape(heads, d // heads, d)
    return checkpoint_name(jnp.einsum("bhlk,hkd->bld", out_BxHxLxK, wo_HxKxD), "out_proj")


def _block(x_BxLxD, block, keys, shape: ModelShape):
    """One pre-norm transformer block; `keys` is the (attention, MLP) dropout key pair or (None, None)."""
    h = _attention(_rms_norm(x_BxLxD, block["ln1"]), block, shape)
    x_BxLxD = x_BxLxD + _dropout(h, shape.dropout, keys[0])
    h_BxLxF = checkpoint_name(_rms_norm(x_BxLxD, block["ln2"]) @ block["w1_DxF"], "mlpwi")
    h = checkpoint_name(jax.nn.gelu(h_BxLxF) @ block["w2_FxD"], "mlpwo")
    return x_BxLxD + _dropout(h, shape.dropout, keys[1])


def hidden(params: dict, tokens_BxL: jax.Array, shape: ModelShape, key: jax.Array | None):
    """The final normed hidden states [B, L, D]; `key` drives dropout (None: evaluation, no dropout)."""
    length = tokens_BxL.shape[1]
    x_BxLxD = params["embed_VxD"][tokens_BxL] + params["pos_LxD"][:length]
    keys: list[None] | jax.Array
    if key is None:
        keys = [None] * (2 * shape.n_layers)
    elif key.ndim == 2:  # one key per example: each splits its own, [2 * n_layers, B, 2]
        keys = jnp.swapaxes(jax.vmap(lambda k: jax.random.split(k, 2 * shape.n_layers))(key), 0, 1)
    else:
        keys = jax.random.split(key, 2 * shape.n_layers)
    block_fn = remat.wrap(lambda x, block, pair: _block(x, block, pair, shape), shape.remat_policy)
    for i, block in enumerate(params["blocks"]):
        x_BxLxD = block_fn(x_BxLxD, block, (keys[2 * i], keys[2 * i + 1]))
    return _rms_norm(x_BxLxD, params["ln_f"])


def _nll(x_BxLxD, embed_VxD, targets_BxL, logits_dtype: str):
    # The logits are accumulated in float32 whatever the compute dtype; they leave the matmul in float32, or
    # rounded to the compute dtype (--logits-dtype auto: half the bytes of the largest array of the step, which
    # the softmax and its gradient read and write several times), and the log-softmax is float32 either way.
    out = x_BxLxD.dtype if logits_dtype == "auto" else jnp.float32
    logits_BxLxV = jnp.matmul(x_BxLxD, embed_VxD.T, preferred_element_type=out).astype(jnp.float32)
    logp = jax.nn.log_softmax(logits_BxLxV, axis=-1)
    return -jnp.take_along_axis(logp, targets_BxL[..., None], axis=-1)[..., 0]


def loss_chunk_examples(batch: int, length: int) -> int:
    """Examples whose logits are made at once: the most that divide the batch within LOSS_CHUNK_TOKENS."""
    fits = max(1, LOSS_CHUNK_TOKENS // max(length, 1))
    return max(c for c in range(1, min(batch, fits) + 1) if batch % c == 0)


@functools.partial(jax.custom_vjp, nondiff_argnums=(3,))
def mean_nll(x_BxLxD, embed32_VxD, targets_BxL, logits_dtype: str):
    """The mean next-token cross-entropy of the final hidden states against the tied embedding (float32,
    summed in a fixed order), with its gradient made in the same pass (issue 48).

    Differentiated by jax, the loss made the logits chunk by chunk in the forward pass and again in the backward
    pass (a rematerialised chunk loop): on a v5e at 125m that loop was 22% of the step, one logits matmul of
    four a recompute. Here each chunk's logits are made once: its nll, and the gradient of the mean with respect
    to the chunk's hidden states and to the embedding (softmax - one-hot, times the 1/n that every token's nll
    gets from the mean), go out together; the backward pass only scales them by the loss's cotangent, which is
    exact for the 1.0 of value_and_grad. `embed32_VxD` is the compute-dtype embedding widened to float32, so
    that its gradient is summed over the chunks in float32; each matmul runs in the compute dtype."""
    return _mean_nll_and_grads(x_BxLxD, embed32_VxD, targets_BxL, logits_dtype)[0]


def _mean_nll_and_grads(x_BxLxD, embed32_VxD, targets_BxL, logits_dtype: str):
    b, length, d = x_BxLxD.shape
    dtype = x_BxLxD.dtype
    embed_VxD = embed32_VxD.astype(dtype)
    per_token = jnp.float32(1.0) / (b * length)  # d mean / d nll, as jax's transpose of `sum / n` makes it

    def one_chunk(x_CxLxD, targets_CxL):
        out = dtype if logits_dtype == "auto" else jnp.float32
        logits = jnp.matmul(x_CxLxD, embed_VxD.T, preferred_element_type=out).astype(jnp.float32)
        logp = jax.nn.log_softmax(logits, axis=-1)
        nll = -jnp.take_along_axis(logp, targets_CxL[..., None], axis=-1)[..., 0]
        onehot = jax.nn.one_hot(targets_CxL, logits.shape[-1], dtype=jnp.float32)
        dlogits = ((jnp.exp(logp) - onehot) * per_token).astype(dtype)
        dx = jnp.matmul(dlogits, embed_VxD, preferred_element_type=jnp.float32).astype(dtype)
        dembed = jnp.einsum("clv,cld->vd", dlogits, x_CxLxD, preferred_element_type=jnp.float32)
        return nll, dx, dembed

    chunk = loss_chunk_examples(b, length)
    if chunk == b:
        nll, dx, dembed = one_chunk(x_BxLxD, targets_BxL)
    else:
        def add_chunk(total, xt):
            nll, dx, dembed = one_chunk(*xt)
            return total + dembed, (nll, dx)

        pieces = (x_BxLxD.reshape(b // chunk, chunk, length, d), targets_BxL.reshape(b // chunk, chunk, length))
        dembed, (nll, dx) = jax.lax.scan(add_chunk, jnp.zeros(embed32_VxD.shape, jnp.float32), pieces)
        nll, dx = nll.reshape(b, length), dx.reshape(b, length, d)
    return sum_in_fixed_order(nll) / nll.size, dx, dembed


def _mean_nll_forward(x_BxLxD, embed32_VxD, targets_BxL, logits_dtype):
    loss, dx, dembed = _mean_nll_and_grads(x_BxLxD, embed32_VxD, targets_BxL, logits_dtype)
    return loss, (dx, dembed)


def _mean_nll_backward(logits_dtype, grads, cotangent):
    dx, dembed = grads
    return (cotangent * dx).astype(dx.dtype), cotangent * dembed, None


mean_nll.defvjp(_mean_nll_forward, _mean_nll_backward)


def sum_in_fixed_order(x: jax.Array) -> jax.Array:
    """The sum of every element of `x`, added as one fixed pairwise tree of elementwise adds: the first half
    plus the second, until one element is left (an odd one out is carried to the next level).

    Why not jnp.sum: XLA lowers a reduce to a loop whose vectorisation, and so whose addition order, depends
    on what it is fused with. The deterministic step (trainer.core.reduction) runs the same per-shard program
    at every width, but XLA inlines a one-slot scan (full width) and keeps a two-slot one (a survivor carrying
    two shards), so the loss's reduce can round differently while every gradient, which comes from matmuls
    and from a cotangent of 1/n, keeps its bits (issue 29: 16 of 38 losses one ulp off under AVX2). An
    elementwise add rounds the same however it is vectorised, and XLA does not reassociate float adds."""
    flat = x.reshape(-1)
    while flat.shape[0] > 1:
        half = flat.shape[0] // 2
        pairs = flat[:half] + flat[half:2 * half]
        flat = jnp.concatenate([pairs, flat[2 * half:]]) if flat.shape[0] % 2 else pairs
    return flat[0]


def loss_fn(params: dict, tokens: jax.Array, shape: ModelShape, key: jax.Array | None) -> jax.Array:
    """Mean next-token cross-entropy over every token of `tokens`, in float32, summed in a fixed order
    (sum_in_fixed_order): the loss a run reports is as independent of the slice count as its gradients."""
    dtype = jnp.dtype(shape.compute_dtype)
    if dtype != jnp.float32:  # master params stay float32 outside; their gradients come back through the cast
        params = jax.tree.map(lambda p: p.astype(dtype), params)
    return mean_nll(hidden(params, tokens[:, :-1], shape, key), params["embed_VxD"].astype(jnp.float32),
                    tokens[:, 1:], shape.logits_dtype)
