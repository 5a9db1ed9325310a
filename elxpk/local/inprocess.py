"""Pause-resume and resize: the trainer's elastic loop in this very process (the Pathways-style path)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from elxpk_contract.settings import TrainerConfig
from trainer.cpu import ensure_devices


def run_in_process(cfg: TrainerConfig, observer: Callable[[str, dict], None], *, dataset=None):
    """Run trainer.elastic.loop.train on `cfg` (its faults included) here; returns its TrainResult."""

    if "jax" not in sys.modules:
        # Simulated slices are CPU devices, even on a laptop whose jax would pick a GPU by default.
        os.environ["JAX_PLATFORMS"] = "cpu"
    # Before jax is imported anywhere in this process: XLA reads the device count once.
    ensure_devices(cfg.num_slices * cfg.devices_per_slice)
    from trainer import compile_cache  # lazy: as jax, after the device count is set
    from trainer.elastic.loop import train

    # jax's persistent cache, as `python -m trainer` (and so the multi-controller mode) turns it on: a resume
    # or a second run loads the step instead of compiling it again (RUN_DIR/xla-cache by default).
    compile_cache.configure(cfg, os.environ)
    return train(cfg, observer=observer, dataset=dataset)
