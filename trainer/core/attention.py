"""Which attention kernel a run uses (--attention), and the call that dispatches to it.

`auto` picks as MaxText's `autoselected` does on a TPU: splash (trainer.core.kernels.splash) when the
sequence is at least 128 tokens and the kernel takes the shapes; cuDNN's fused flash kernel on a GPU in
bfloat16 with a head width it supports; XLA's own attention everywhere else (the CPU, the tests). The
choice is resolved once with the backend up (trainer.core.precision.resolved) and named in the checkpoint
fingerprint where it is not XLA's (the kernels round differently: a resume must not switch silently).
"""

from __future__ import annotations

import jax

from elxpk_contract.setting_rules import said


def resolve(requested: str, compute_dtype: str, seq_len: int, head_width: int, on: str) -> str:
    """xla, cudnn or splash for `requested` on platform `on` (tpu, gpu, cuda, cpu...)."""
    from trainer.core.kernels import splash

    if requested != "auto":
        return requested
    if on == "tpu" and seq_len >= splash.LANE and splash.supported(seq_len, head_width):
        return "splash"
    cudnn_shapes = compute_dtype == "bfloat16" and head_width % 8 == 0 and head_width <= 128
    return "cudnn" if cudnn_shapes and on in ("gpu", "cuda") else "xla"


def problems(requested: str, seq_len: int, head_width: int, on: str) -> list[str]:
    """Why an explicitly chosen kernel cannot run here (one line each, naming the flag and the fix)."""
    from trainer.core.kernels import splash

    if requested == "cudnn" and on not in ("gpu", "cuda"):
        return [f"{said('attention')} cudnn: cuDNN runs only on a GPU and this backend is {on}; use {said('attention')} auto"]
    if requested == "splash" and not splash.supported(seq_len, head_width):
        return [f"{said('attention')} splash: the kernel needs {said('seq_len')} a multiple of {splash.LANE} (got {seq_len}) and "
                f"a head width ({said('d_model')} / {said('n_heads')}) of 64 or 128 (got {head_width}); use {said('attention')} auto"]
    return []


def causal(q_BxLxHxK: jax.Array, k_BxLxHxK: jax.Array, v_BxLxHxK: jax.Array, kernel: str) -> jax.Array:
    """Causal softmax attention with the resolved `kernel`; [B, L, H, K] in and out."""
    if kernel == "splash":
        from trainer.core.kernels.splash import causal_attention

        return causal_attention(q_BxLxHxK, k_BxLxHxK, v_BxLxHxK)
    # jax's fused entry point: XLA computes the logits and softmax in float32; cuDNN's flash kernel on a GPU.
    return jax.nn.dot_product_attention(q_BxLxHxK, k_BxLxHxK, v_BxLxHxK, is_causal=True,
                                        implementation="cudnn" if kernel == "cudnn" else None)
