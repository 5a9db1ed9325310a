"""The one-line checkpoint_period hint `elxpk workload create` prints when --slice-mtbf is given.

Only the model's math is imported (no numpy, no rich): this runs on every `workload create`.
"""

from __future__ import annotations

from elxpk.plan.fmt import duration as format_duration
from elxpk.plan.model import PAUSE_RESUME, Costs, best_period_steps
from elxpk_contract.settings import default

# Assumed when the spec carries no measured cost: the example save, restore and replacement.
DEFAULT_SAVE_SECONDS = 20.0
DEFAULT_RESTORE_SECONDS = 90.0
DEFAULT_REPLACEMENT_SECONDS = 100.0
# What the bundled trainer uses when --checkpoint-period is not given (the contract's settings table).
TRAINER_DEFAULT_PERIOD: int = default("checkpoint_period")
# More than this factor away from the optimum (either side) earns a hint.
TOLERANCE = 2.0


def checkpoint_period_hint(spec) -> str | None:
    """One line when `spec.checkpoint_period` is more than 2x away from the planned optimum, else None.

    A `checkpoint_period` of None means the trainer's default (TRAINER_DEFAULT_PERIOD), checked too.

    Reads `checkpoint_period`, `num_slices`, `slice_mtbf_seconds`, `step_time_seconds` and, when present,
    `checkpoint_save_seconds`, `restore_seconds`, `replacement_seconds`. Returns None whenever the inputs
    are missing or make no plan (the launcher validates them; a hint never blocks a submit).
    """
    period = getattr(spec, "checkpoint_period", None)
    defaulted = period is None
    period = TRAINER_DEFAULT_PERIOD if defaulted else period
    slices = getattr(spec, "num_slices", None)
    mtbf = getattr(spec, "slice_mtbf_seconds", None)
    step = getattr(spec, "step_time_seconds", None)
    save = getattr(spec, "checkpoint_save_seconds", None)
    assumed = save is None
    save = DEFAULT_SAVE_SECONDS if save is None else save
    if not period or not slices or not mtbf or not step:
        return None
    if period <= 0 or slices <= 0 or mtbf <= 0 or step <= 0 or save <= 0 or save >= mtbf / slices:
        return None
    costs = Costs(
        num_slices=int(slices),
        slice_mtbf_s=float(mtbf),
        step_time_s=float(step),
        save_s=float(save),
        restore_s=float(getattr(spec, "restore_seconds", None) or DEFAULT_RESTORE_SECONDS),
        replacement_s=float(getattr(spec, "replacement_seconds", None) or DEFAULT_REPLACEMENT_SECONDS),
    )
    best = best_period_steps(costs, PAUSE_RESUME)
    ratio = max(period / best, best / period)
    if ratio <= TOLERANCE:
        return None
    side = "shorter" if period < best else "longer"
    setting = f"the default checkpoint_period {period}" if defaulted else f"--checkpoint-period {period}"
    save_note = f"an assumed {format_duration(save)} save" if assumed else f"{format_duration(save)} saves"
    return (
        f"hint: {setting} is {ratio:.1f}x {side} than the planned {best} steps "
        f"for {slices} slices with a {format_duration(mtbf)} slice MTBF, {format_duration(step)} steps and "
        f"{save_note}; see `elxpk plan`"
    )
