"""A decoder-only transformer LM in plain jax (pre-norm, RMSNorm, tied embeddings).

Tensor names carry their shapes (B batch, L length, D width, H heads, K head width, F MLP width,
V vocabulary), as in nanodo.

Mixed precision (`compute_dtype` bfloat16): the float32 master params are cast to bfloat16 inside the
loss, so the matmuls and activations run in bfloat16 while the gradients (through the cast), the optimizer
state and the update stay float32. RMSNorm statistics, the attention softmax, the logits and the loss are
computed in float32. With float32 compute every cast is a no-op.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np

from trainer.core.precision import attention_implementation, resolve_compute_dtype


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
    attention: Literal["cudnn"] | None = None  # jax.nn.dot_product_attention's implementation; None: XLA

    @classmethod
    def from_config(cls, cfg) -> ModelShape:
        dtype = resolve_compute_dtype(cfg.compute_dtype)
        return cls(cfg.vocab_size, cfg.seq_len, cfg.d_model, cfg.n_layers, cfg.n_heads, cfg.d_ff, cfg.dropout,
                   dtype, attention_implementation(dtype, cfg.d_model // cfg.n_heads))

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
    qkv_BxLx3D = x_BxLxD @ block["wqkv_Dx3D"]
    q, k, v = (t.reshape(b, length, shape.n_heads, k_width) for t in jnp.split(qkv_BxLx3D, 3, axis=-1))
    # Causal attention through jax's fused entry point: XLA computes the logits and softmax in float32;
    # on GPU with bfloat16 compute the cuDNN flash kernel is picked (precision.attention_implementation).
    out_BxLxHxK = jax.nn.dot_product_attention(q, k, v, is_causal=True, implementation=shape.attention)
    return out_BxLxHxK.reshape(b, length, d) @ block["wo_DxD"]


def forward(params: dict, tokens_BxL: jax.Array, shape: ModelShape, key: jax.Array | None):
    """Logits [B, L, V]; `key` drives dropout (None: evaluation, no dropout)."""
    length = tokens_BxL.shape[1]
    x_BxLxD = params["embed_VxD"][tokens_BxL] + params["pos_LxD"][:length]
    keys: list[None] | jax.Array
    if key is None:
        keys = [None] * (2 * shape.n_layers)
    elif key.ndim == 2:  # one key per example: each splits its own, [2 * n_layers, B, 2]
        keys = jnp.swapaxes(jax.vmap(lambda k: jax.random.split(k, 2 * shape.n_layers))(key), 0, 1)
    else:
        keys = jax.random.split(key, 2 * shape.n_layers)
    for i, block in enumerate(params["blocks"]):
        h = _attention(_rms_norm(x_BxLxD, block["ln1"]), block, shape)
        x_BxLxD = x_BxLxD + _dropout(h, shape.dropout, keys[2 * i])
        h = jax.nn.gelu(_rms_norm(x_BxLxD, block["ln2"]) @ block["w1_DxF"]) @ block["w2_FxD"]
        x_BxLxD = x_BxLxD + _dropout(h, shape.dropout, keys[2 * i + 1])
    # The logits leave the matmul in float32 (accumulated in float32 whatever the compute dtype).
    return jnp.matmul(_rms_norm(x_BxLxD, params["ln_f"]), params["embed_VxD"].T, preferred_element_type=jnp.float32)


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
    logits_BxLxV = forward(params, tokens[:, :-1], shape, key)
    targets_BxL = tokens[:, 1:]
    logp = jax.nn.log_softmax(logits_BxLxV.astype(jnp.float32), axis=-1)
    nll_BxL = -jnp.take_along_axis(logp, targets_BxL[..., None], axis=-1)[..., 0]
    return sum_in_fixed_order(nll_BxL) / nll_BxL.size
