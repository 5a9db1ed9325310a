"""Pause-resume and resize: the trainer's elastic loop in this very process (the Pathways-style path)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from elxpk.local.options import LocalRunOptions

# The wait for slices probes this often: a short poll keeps the local recovery snappy.
POLL_SECONDS = 0.2


def run_in_process(
    opts: LocalRunOptions,
    faults: tuple[str, ...],
    observer: Callable[[str, dict], None],
    *,
    dataset=None,
):
    """Run trainer.elastic.train here; returns its TrainResult."""
    from trainer.cpu import ensure_devices

    if "jax" not in sys.modules:
        # Simulated slices are CPU devices, even on a laptop whose jax would pick a GPU by default.
        os.environ["JAX_PLATFORMS"] = "cpu"
    # Before jax is imported anywhere in this process: XLA reads the device count once.
    ensure_devices(opts.num_slices * opts.devices_per_slice)
    from trainer.config import TrainerConfig
    from trainer.elastic import train
    from trainer.faults import FaultSchedule

    argv = [
        *opts.trainer_flags(),
        "--num-slices", str(opts.num_slices),
        "--slice-backend", "simulated",
        "--elastic-enabled",
        "--elastic-min-slice-count", str(opts.min_slice_count),
        "--elastic-poll-seconds", str(POLL_SECONDS),
    ]
    cfg = TrainerConfig.from_args(argv, environ={})
    schedule = FaultSchedule.parse(faults, revive_after=opts.revive_after)
    return train(cfg, faults=schedule, observer=observer, dataset=dataset)
