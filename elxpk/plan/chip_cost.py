"""What a checkpoint period costs in chip-hours and money, per week of the job.

A week holds chips x 168 chip-hours (every slice's chips for the whole week, as elxpk/chip_hours.py
assumes); the model's goodput says how many are useful. The lost ones are split by cause with the
first-order terms of the planned mode (Young's linearisation, elxpk/plan/model.py): checkpoint blocking
C/(tau+C), rewind lam (tau+C)/2, waiting for a slice lam x replacement, recovery lam x restore (or
reshard), compile per restart (each attempt's, before its first step); `other` is what the exact model differs by (failures during a
recovery, and the like), so the figures add up.
"""

from __future__ import annotations

from elxpk.accelerators import Accelerator, Price
from elxpk.chip_hours import ChipHours, Holding, split
from elxpk.plan import model
from elxpk.plan.model import Costs

WEEK_S = 7 * 86400.0


def holding(accelerator: Accelerator, num_slices: int) -> Holding:
    per, unit = accelerator.chips_per_slice, accelerator.unit
    return Holding(per * num_slices, unit, f"{num_slices} slices x {per} {unit}s of {accelerator.name}")


def _first_order_seconds(costs: Costs, mode: str, tau_s: float) -> dict[str, float]:
    """Seconds lost per week by cause, to first order, in `mode` (the planned one: pause-resume or live)."""
    save = costs.save_s
    lost = {"checkpoint": WEEK_S * save / (tau_s + save)}
    if mode == model.LIVE:
        slice_failures = costs.failure_rate * WEEK_S  # no rewind: the survivors hold the step
        job_failures = costs.job_failure_rate * WEEK_S  # a whole-job failure restarts and rewinds
        lost["waiting"] = (slice_failures + job_failures) * costs.replacement_s
        lost["recovery"] = slice_failures * costs.reshard_s + job_failures * costs.restore_s
        lost["rewind"] = job_failures * (tau_s + save) / 2
        lost["compile"] = job_failures * (costs.compile_s + costs.image_pull_s)
        return lost
    failures = costs.failure_rate * WEEK_S
    lost["waiting"] = failures * costs.replacement_s
    lost["recovery"] = failures * costs.restore_s
    lost["rewind"] = failures * (tau_s + save) / 2
    lost["compile"] = failures * costs.compile_s  # each attempt compiles (or loads) its step before stepping
    return lost


def week_cost(costs: Costs, mode: str, tau_s: float, accelerator: Accelerator,
              price: Price | None) -> ChipHours:
    """One week at period `tau_s` in `mode`: spent = useful + lost by cause, in chip-hours (and money)."""
    useful = model.goodput(costs, mode, tau_s) * WEEK_S
    return split(holding(accelerator, costs.num_slices), WEEK_S, useful, _first_order_seconds(costs, mode, tau_s),
                 price)


def lost_per_week(costs: Costs, goodput: float, accelerator: Accelerator | None,
                  price: Price | None) -> tuple[float | None, float | None]:
    """(chip-hours, USD) lost per week at `goodput`; None where the chips or the price are not known."""
    if accelerator is None:
        return None, None
    chip_hours = accelerator.chips_per_slice * costs.num_slices * WEEK_S / 3600.0 * (1.0 - goodput)
    return chip_hours, (chip_hours * price.usd_per_chip_hour if price is not None else None)
