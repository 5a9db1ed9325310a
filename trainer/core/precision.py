"""The compute dtype as a run resolves it, and the attention kernel that goes with it.

`--compute-dtype auto` means bfloat16 where the matmul units are built for it (GPU, TPU) and float32 on
CPU, where bfloat16 is emulated (slower) and the tests want bitwise-reproducible float32. The trainer
resolves it once, when the backend is up, and records the result in run.json and in the checkpoint
fingerprint (elxpk_contract/settings.py: float32 adds no key, bfloat16 does).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from elxpk_contract.settings import TrainerConfig

_BF16_PLATFORMS = ("gpu", "cuda", "rocm", "tpu")


def platform() -> str:
    import jax

    return jax.default_backend()


def resolve_compute_dtype(requested: str, on: str | None = None) -> str:
    """float32 or bfloat16 for `requested` (auto, float32 or bfloat16) on platform `on` (default: jax's)."""
    if requested != "auto":
        return requested
    return "bfloat16" if (on or platform()) in _BF16_PLATFORMS else "float32"


def resolved(cfg: TrainerConfig, on: str | None = None) -> TrainerConfig:
    """`cfg` with its compute dtype resolved (call it after the backend has initialised jax)."""
    dtype = resolve_compute_dtype(cfg.compute_dtype, on)
    return cfg if dtype == cfg.compute_dtype else dataclasses.replace(cfg, compute_dtype=dtype)


def attention_implementation(compute_dtype: str, head_width: int, on: str | None = None) -> Literal["cudnn"] | None:
    """cuDNN's fused attention on a GPU in bfloat16 with a head width it supports; otherwise None, which is
    XLA's implementation (jax's own default, and the only one on CPU)."""
    if compute_dtype != "bfloat16" or head_width % 8 or head_width > 128:
        return None
    return "cudnn" if (on or platform()) in ("gpu", "cuda") else None
