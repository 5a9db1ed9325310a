"""AdamW with linear warm-up and cosine decay; the learning rate is a pure function of the step.

Nothing here keeps state outside the optax state, whose step count is saved in every checkpoint, so a
restored run continues the schedule exactly where it stopped.
"""

from __future__ import annotations

import math


def learning_rate(step: int, peak: float, warmup_steps: int, decay_steps: int) -> float:
    """The learning rate used by step `step` (0-based): the host-side twin of `schedule`."""
    if step < warmup_steps:
        return peak * (step + 1) / warmup_steps
    progress = min(1.0, (step - warmup_steps) / max(1, decay_steps - warmup_steps))
    return peak * (0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * progress)))


def schedule(peak: float, warmup_steps: int, decay_steps: int):
    """The same function in jnp, evaluated inside the jitted step on optax's count."""
    import jax.numpy as jnp

    def lr(count):
        count = jnp.asarray(count, jnp.float32)
        warm = peak * (count + 1.0) / max(warmup_steps, 1)
        progress = jnp.clip((count - warmup_steps) / max(1, decay_steps - warmup_steps), 0.0, 1.0)
        cosine = peak * (0.1 + 0.9 * 0.5 * (1.0 + jnp.cos(jnp.pi * progress)))
        return jnp.where(count < warmup_steps, warm, cosine)

    return lr


def make_optimizer(cfg):
    import optax

    return optax.adamw(
        schedule(cfg.learning_rate, cfg.warmup_steps, cfg.decay_steps),
        b1=0.9,
        b2=0.95,
        weight_decay=cfg.weight_decay,
    )
