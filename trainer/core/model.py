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
(`_token_nll`), so the [B, L, V] logits never exist whole.
"""

from __future__ import annotations

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
    qkv_BxLx3D = checkpoint_name(x_BxLxD @ block["wqkv_Dx3D"], "qkv_proj")
    q, k, v = (t.reshape(b, length, shape.n_heads, k_width) for t in jnp.split(qkv_BxLx3D, 3, axis=-1))
    out_BxLxHxK = checkpoint_name(attention.causal(q, k, v, shape.attention), "context")
    return checkpoint_name(out_BxLxHxK.reshape(b, length, d) @ block["wo_DxD"], "out_proj")


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


def _token_nll(x_BxLxD, embed_VxD, targets_BxL, logits_dtype: str = "float32"):
    """Each token's negative log-likelihood [B, L] in float32. Past LOSS_CHUNK_TOKENS the batch goes through
    in chunks of examples, each rematerialised in the backward pass: the float32 logits (4 V bytes a token,
    125 KiB at V = 32000) exist for one chunk at a time instead of for the whole batch."""
    b, length, d = x_BxLxD.shape
    chunk = loss_chunk_examples(b, length)
    if chunk == b:
        return _nll(x_BxLxD, embed_VxD, targets_BxL, logits_dtype)
    # The embedding enters in float32 so that its gradient is summed over the chunks in float32.
    embed32 = embed_VxD.astype(jnp.float32)
    body = jax.checkpoint(lambda xt: _nll(xt[0], embed32.astype(embed_VxD.dtype), xt[1], logits_dtype),
                          policy=jax.checkpoint_policies.nothing_saveable)
    nll = jax.lax.map(body, (x_BxLxD.reshape(b // chunk, chunk, length, d),
                             targets_BxL.reshape(b // chunk, chunk, length)))
    return nll.reshape(b, length)


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
    nll_BxL = _token_nll(hidden(params, tokens[:, :-1], shape, key), params["embed_VxD"], tokens[:, 1:],
                         shape.logits_dtype)
    return sum_in_fixed_order(nll_BxL) / nll_BxL.size
