"""`elxpk report` on a MaxText metrics_file: what the file supports, the loss curve and the step times.

A MaxText metrics file (elxpk/maxtext/metrics.py) has a loss and a step time per step and nothing else
elxpk's own report uses: no events.jsonl (so no goodput breakdown or recovery timeline) and no example ids
(so no exactly-once check). The report says so instead of printing zeros. MaxText's first step time
includes the compilation, so the typical step time is the median of the later ones.
"""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass

from elxpk.columns import sorted_values
from elxpk.maxtext.metrics import MaxTextMetrics
from elxpk.runs.words import plural

NOT_AVAILABLE = (
    "goodput, badput and recovery timelines: MaxText writes no elxpk events.jsonl",
    "exactly-once data: MaxText writes no example ids",
)


@dataclass(frozen=True)
class MaxTextReport:
    path: str
    run_names: tuple[str, ...]
    steps: int  # distinct train steps
    first_step: int
    last_step: int
    redone_steps: int  # steps written more than once (redone after a restore); the last line counts
    first_loss: float
    final_loss: float
    lowest_loss: float | None  # over the finite losses; None when none is finite
    lowest_loss_step: int | None
    first_nonfinite_step: int | None  # first step whose loss is NaN or infinite
    timed_steps: int  # steps with perf/step_time_seconds
    step_time_total_s: float
    first_step_time_s: float | None  # includes MaxText's compilation
    step_time_median_s: float | None  # of the steps after the first timed one
    step_time_p95_s: float | None
    step_time_max_s: float | None
    eval_lines: int

    def to_dict(self) -> dict:
        return {
            "kind": "MaxText metrics file",
            "path": self.path,
            "run_names": list(self.run_names),
            "steps": self.steps,
            "first_step": self.first_step,
            "last_step": self.last_step,
            "redone_steps": self.redone_steps,
            "first_loss": _json_float(self.first_loss),
            "final_loss": _json_float(self.final_loss),
            "lowest_loss": self.lowest_loss,
            "lowest_loss_step": self.lowest_loss_step,
            "first_nonfinite_step": self.first_nonfinite_step,
            "step_time": {"timed_steps": self.timed_steps, "total_s": self.step_time_total_s,
                          "first_s": self.first_step_time_s, "median_s": self.step_time_median_s,
                          "p95_s": self.step_time_p95_s, "max_s": self.step_time_max_s},
            "eval_lines": self.eval_lines,
            "not_available": list(NOT_AVAILABLE),
        }


def _json_float(value: float) -> float | str:
    """JSON has no NaN or infinity: those are written as text ("nan", "inf")."""
    return value if math.isfinite(value) else str(value)


def _median(ordered: array) -> float:
    """statistics.median of values already sorted."""
    n = len(ordered)
    return ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2


def _p95(ordered: array) -> float:
    return ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)]


def build_maxtext_report(m: MaxTextMetrics) -> MaxTextReport:
    lowest = min(((loss, step) for step, loss in zip(m.steps, m.loss, strict=True) if math.isfinite(loss)),
                 default=None)
    times = m.step_times.values
    later = times[1:]
    ordered = sorted_values(later)  # one sorted copy for the median and the p95, a chunk at a time
    return MaxTextReport(
        path=m.path,
        run_names=m.run_names,
        steps=len(m.steps),
        first_step=m.steps[0],
        last_step=m.steps[-1],
        redone_steps=len(m.repeated_steps),
        first_loss=m.loss[0],
        final_loss=m.loss[-1],
        lowest_loss=lowest[0] if lowest else None,
        lowest_loss_step=lowest[1] if lowest else None,
        first_nonfinite_step=m.first_non_finite_step,
        timed_steps=len(times),
        step_time_total_s=math.fsum(times),
        first_step_time_s=times[0] if times else None,
        step_time_median_s=_median(ordered) if later else None,
        step_time_p95_s=_p95(ordered) if later else None,
        step_time_max_s=max(later) if later else None,
        eval_lines=m.eval_lines,
    )


def render_maxtext_text(r: MaxTextReport) -> list[str]:
    """The human form, one line per item."""
    names = f" (run_name {', '.join(r.run_names)})" if r.run_names else ""
    span = f"{r.first_step}..{r.last_step}"
    contiguous = r.last_step - r.first_step + 1 == r.steps
    lines = [f"MaxText metrics file {r.path}{names}: {plural(r.steps, 'step')} "
             f"({'steps' if contiguous else 'between steps'} {span})"
             + (f", {r.redone_steps} redone after a restore (the last line of each counts)" if r.redone_steps else "")]
    loss = f"loss: {r.first_loss:.6g} at step {r.first_step}, final {r.final_loss:.6g} at step {r.last_step}"
    if r.lowest_loss is not None:
        loss += f", lowest {r.lowest_loss:.6g} at step {r.lowest_loss_step}"
    lines.append(loss)
    if r.first_nonfinite_step is not None:
        lines.append(f"diverged: the loss is not finite (NaN or infinite) from step {r.first_nonfinite_step}")
    if r.timed_steps:
        times = f"step time: {r.step_time_total_s:.2f} s over {plural(r.timed_steps, 'step')}; first step " \
                f"{r.first_step_time_s:.3g} s (includes compilation)"
        if r.step_time_median_s is not None:
            times += f"; then median {r.step_time_median_s:.3g} s, p95 {r.step_time_p95_s:.3g} s, " \
                     f"max {r.step_time_max_s:.3g} s"
        lines.append(times)
    else:
        lines.append("step time: not in the file (no perf/step_time_seconds)")
    if r.eval_lines:
        lines.append(f"eval: {plural(r.eval_lines, 'line')} of eval metrics (not part of the curve)")
    lines.extend(f"not available from a MaxText metrics file: {item}" for item in NOT_AVAILABLE)
    return lines
