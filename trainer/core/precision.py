"""The compute dtype as a run resolves it, and the attention kernel (trainer.core.attention) with it.

`--compute-dtype auto` means bfloat16 where the matmul units are built for it (GPU, TPU) and float32 on
CPU, where bfloat16 is emulated (slower) and the tests want bitwise-reproducible float32. The trainer
resolves it once, when the backend is up, and records the result in run.json and in the checkpoint
fingerprint (elxpk_contract/settings.py: float32 adds no key, bfloat16 does).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from elxpk_contract.errors import UsageError

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
    """`cfg` with its compute dtype and attention kernel resolved (call it after the backend has initialised
    jax); UsageError where an explicitly chosen kernel cannot run here."""
    from trainer.core import attention

    on = on or platform()
    dtype = resolve_compute_dtype(cfg.compute_dtype, on)
    head_width = cfg.d_model // cfg.n_heads
    problems = attention.problems(cfg.attention, cfg.seq_len, head_width, on)
    if problems:
        raise UsageError(*problems)
    kernel = attention.resolve(cfg.attention, dtype, cfg.seq_len, head_width, on)
    if (dtype, kernel) == (cfg.compute_dtype, cfg.attention):
        return cfg
    return dataclasses.replace(cfg, compute_dtype=dtype, attention=kernel)
