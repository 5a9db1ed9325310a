"""A run's badput in chip-hours (and money): the report's time split (elxpk/runs/report.py) times its chips.

The chips are the accelerator's (`--accelerator`: chips per slice x the run's slices); without it, the
run's own devices (run.json's devices per slice x slices), named as such: device-hours, never chip-hours,
since a local run's devices are CPU devices standing in for slices.
"""

from __future__ import annotations

from elxpk.accelerators import Accelerator, Price
from elxpk.chip_hours import BILLED, FROM_TRAINER, ChipHours, Holding, split
from elxpk.runs.report import RunReport
from elxpk.runs.rundir import Run
from elxpk.runs.words import plural

_HINT = "these are the run's own devices, not chips: give --accelerator TYPE for chip-hours and money"


def holding(run: Run, accelerator: Accelerator | None) -> Holding:
    slices = run.num_slices or 1
    if accelerator is not None:
        chips, unit = accelerator.chips_per_slice, accelerator.unit
        return Holding(chips * slices, unit, f"{plural(slices, 'slice')} x {plural(chips, unit)} of {accelerator.name}")
    info = run.info
    topology = info.topology if info is not None else {}
    recorded = topology.get("devices_per_slice")
    per = recorded if isinstance(recorded, int) and not isinstance(recorded, bool) else 0
    backend = (info.slice_backend if info is not None else "") or "unknown"
    if per < 1:  # an old run.json: one device per slice is all that is known
        return Holding(slices, "slice", f"{plural(slices, 'slice')} of the {backend} backend", _HINT)
    return Holding(per * slices, "device", f"{plural(slices, 'slice')} x {plural(per, 'device')} of the {backend} "
                   "backend", _HINT)


def run_chip_hours(run: Run, report: RunReport, accelerator: Accelerator | None,
                   price: Price | None) -> ChipHours:
    """The report's wall time (the billed interval, from the trainer's first start to its end) in chip-hours:
    useful = productive step time, lost by cause from its badput."""
    b = report.badput
    lost_s = {"recovery": b.restore_s, "rewind": b.rewound_s, "checkpoint": b.checkpoint_s,
              "waiting": b.waiting_s, "compile": b.compile_s}
    return split(holding(run, accelerator), report.wall_s, report.productive_s, lost_s, price, BILLED + FROM_TRAINER)
