"""A small decoder-only transformer LM in plain jax (pre-norm, RMSNorm, tied embeddings).

Tensor names carry their shapes (B batch, L length, D width, H heads, K head width, F MLP width,
V vocabulary), as in nanodo.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np


@dataclass(frozen=True)
class ModelShape:
    vocab_size: int
    seq_len: int
    d_model: int
    n_layers: int
    n_heads: int
    d_ff: int
    dropout: float

    @classmethod
    def from_config(cls, cfg) -> ModelShape:
        return cls(cfg.vocab_size, cfg.seq_len, cfg.d_model, cfg.n_layers, cfg.n_heads, cfg.d_ff, cfg.dropout)

    def param_count(self) -> int:
        d, f = self.d_model, self.d_ff
        block = 4 * d * d + 2 * d * f + 2 * d
        return self.vocab_size * d + self.seq_len * d + self.n_layers * block + d

    def flops_per_example(self) -> float:
        """Model FLOPs of one training example (forward + backward = 3x forward), matmuls only."""
        d, f, length = self.d_model, self.d_ff, self.seq_len
        per_token = 2 * (self.n_layers * (4 * d * d + 2 * d * f) + d * self.vocab_size)
        attention = 2 * self.n_layers * 2 * length * d  # QK^T and AV, counted without the causal half
        return 3.0 * length * (per_token + attention)


def init_params(shape: ModelShape, rng: np.random.Generator) -> dict:
    """Initial parameters as host float32 arrays: numpy, so no device program has to be compiled."""
    d, f = shape.d_model, shape.d_ff

    def normal(dims, scale):
        return (scale * rng.standard_normal(dims)).astype(np.float32)

    out_scale = 0.02 / (2 * shape.n_layers) ** 0.5  # keeps the residual stream's variance flat in depth
    blocks = [
        {
            "ln1": np.ones((d,), np.float32),
            "wqkv_Dx3D": normal((d, 3 * d), 0.02),
            "wo_DxD": normal((d, d), out_scale),
            "ln2": np.ones((d,), np.float32),
            "w1_DxF": normal((d, f), 0.02),
            "w2_FxD": normal((f, d), out_scale),
        }
        for _ in range(shape.n_layers)
    ]
    return {
        "embed_VxD": normal((shape.vocab_size, d), 0.02),
        "pos_LxD": normal((shape.seq_len, d), 0.01),
        "blocks": blocks,
        "ln_f": np.ones((d,), np.float32),
    }


def _rms_norm(x_BxLxD, scale_D):
    return x_BxLxD * jax.lax.rsqrt(jnp.mean(x_BxLxD**2, axis=-1, keepdims=True) + 1e-6) * scale_D


def _dropout(x, rate: float, key):
    if rate == 0.0 or key is None:
        return x
    keep = jax.random.bernoulli(key, 1.0 - rate, x.shape)
    return jnp.where(keep, x / (1.0 - rate), 0.0)


def _attention(x_BxLxD, block, n_heads: int):
    b, length, d = x_BxLxD.shape
    k_width = d // n_heads
    qkv_BxLx3D = x_BxLxD @ block["wqkv_Dx3D"]
    q, k, v = (t.reshape(b, length, n_heads, k_width) for t in jnp.split(qkv_BxLx3D, 3, axis=-1))
    logits_BxHxLxL = jnp.einsum("bqhk,bshk->bhqs", q, k) / jnp.sqrt(float(k_width))
    causal_LxL = jnp.tril(jnp.ones((length, length), bool))
    weights = jax.nn.softmax(jnp.where(causal_LxL, logits_BxHxLxL, -1e30), axis=-1)
    out_BxLxD = jnp.einsum("bhqs,bshk->bqhk", weights, v).reshape(b, length, d)
    return out_BxLxD @ block["wo_DxD"]


def forward(params: dict, tokens_BxL: jax.Array, shape: ModelShape, key: jax.Array | None):
    """Logits [B, L, V]; `key` drives dropout (None: evaluation, no dropout)."""
    length = tokens_BxL.shape[1]
    x_BxLxD = params["embed_VxD"][tokens_BxL] + params["pos_LxD"][:length]
    keys = jax.random.split(key, 2 * shape.n_layers) if key is not None else [None] * (2 * shape.n_layers)
    for i, block in enumerate(params["blocks"]):
        h = _attention(_rms_norm(x_BxLxD, block["ln1"]), block, shape.n_heads)
        x_BxLxD = x_BxLxD + _dropout(h, shape.dropout, keys[2 * i])
        h = jax.nn.gelu(_rms_norm(x_BxLxD, block["ln2"]) @ block["w1_DxF"]) @ block["w2_FxD"]
        x_BxLxD = x_BxLxD + _dropout(h, shape.dropout, keys[2 * i + 1])
    return _rms_norm(x_BxLxD, params["ln_f"]) @ params["embed_VxD"].T


def loss_fn(params: dict, tokens: jax.Array, shape: ModelShape, key: jax.Array | None) -> jax.Array:
    """Mean next-token cross-entropy over every token of the global batch."""
    logits_BxLxV = forward(params, tokens[:, :-1], shape, key)
    targets_BxL = tokens[:, 1:]
    logp = jax.nn.log_softmax(logits_BxLxV.astype(jnp.float32), axis=-1)
    nll_BxL = -jnp.take_along_axis(logp, targets_BxL[..., None], axis=-1)[..., 0]
    return jnp.mean(nll_BxL)
