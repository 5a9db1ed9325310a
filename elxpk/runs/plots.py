"""The PNGs of `elxpk report` and `elxpk compare` (matplotlib, Agg backend, imported on use)."""

from __future__ import annotations

import bisect
from array import array
from pathlib import Path

from elxpk.columns import INDEX
from elxpk.maxtext.metrics import MaxTextMetrics
from elxpk.outfile import save_figure
from elxpk.runs.compare import Comparison
from elxpk.runs.health import checkpoint_blocking_intervals, compile_intervals, lost_intervals
from elxpk.runs.maxtext_report import MaxTextReport
from elxpk.runs.report import RunReport
from elxpk.runs.rundir import Run
from elxpk.runs.words import plural


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _event_times(run: Run) -> list[float]:
    return [e.time for e in run.events]


def write_report_png(run: Run, report: RunReport, path: Path, own: str | None = None) -> Path:
    """Loss curve with failure/recovery markers above a slice-health timeline, saved to exactly `path`
    (the caller checked it: elxpk/cli/report.py); `own`: elxpk named it (elxpk/outfile.py)."""
    plt = _pyplot()
    fig = report_figure(run, report)
    save_figure(fig, path, flag="--png", fmt="png", dpi=110, own=own)
    plt.close(fig)
    return path


# Where the wall time went, in the report's order (elxpk/runs/report.py's Badput), with one colour each.
_TIME_SPLIT = (("steps that count", "productive_s", "tab:green"), ("compile", "compile_s", "0.55"),
               ("restore", "restore_s", "tab:olive"), ("waiting for slices", "waiting_for_slices_s", "tab:red"),
               ("rewound steps", "rewound_steps_s", "tab:orange"),
               ("checkpoint blocking", "checkpoint_blocking_s", "tab:blue"), ("other", "other_s", "0.85"))


def report_figure(run: Run, report: RunReport):
    """The report's figure (matplotlib), before it is saved: the loss curve with its recovery lines, the
    slices' timeline, and one bar of where the wall time went."""
    plt = _pyplot()
    fig, (ax_loss, ax_health, ax_split) = plt.subplots(
        3, 1, figsize=(9, 7.4), gridspec_kw={"height_ratios": [3, 1.5, 0.55]})
    _loss_panel(ax_loss, run, report)
    _health_panel(ax_health, run, report)
    _time_split_panel(ax_split, report)
    fig.tight_layout()
    return fig


def _loss_panel(ax, run: Run, report: RunReport) -> None:
    m = run.metrics
    order, counts = m.last_records()
    ax.plot(array("q", (m.step[i] for i in order)), array("d", (m.loss[i] for i in order)), lw=1.2,
            label="loss (steps that count)")
    void = array(INDEX, (i for i, last in enumerate(counts) if not last))
    if void:
        ax.scatter(array("q", (m.step[i] for i in void)), array("d", (m.loss[i] for i in void)), s=6, c="0.6",
                   label="rewound executions", zorder=3)
    shown: set[str] = set()  # one legend entry per kind of line
    for rec in report.recoveries:
        restored = "state rebuilt from the survivors" if rec.live else "restored checkpoint"
        lines: list[tuple[str, int | None, str, str]]
        if rec.restored_step is not None and rec.restored_step == rec.failure_step:
            # Nothing rewound: two lines on one step would hide each other, so one line says both.
            lines = [(f"slice lost, {restored} there", rec.failure_step, "tab:red", "-.")]
        else:
            lines = [("slice lost", rec.failure_step, "tab:red", "--"),
                     (restored, rec.restored_step, "tab:green" if rec.live else "tab:olive", ":")]
        for label, step, colour, style in lines:
            if step is not None:
                ax.axvline(step, color=colour, ls=style, lw=1.1, label=None if label in shown else label)
                shown.add(label)
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.set_title(f"{Path(run.path).name}: goodput {100 * report.goodput:.1f}%, {plural(len(report.recoveries), 'recovery')}")
    ax.legend(loc="upper right", fontsize=8)


def _health_panel(ax, run: Run, report: RunReport) -> None:
    times = _event_times(run)
    t0 = min(times) if times else 0.0
    t1 = max(times) if times else 1.0
    slices = list(range(run.num_slices or 1))
    m = run.metrics
    # Start-up (imports, the first restore) is "other" until the first step starts.
    first = min((t - d for t, d in zip(m.time, m.step_time, strict=True)), default=t0) if len(m) else t0
    first = min(max(first, t0), t1)
    # One collection per colour and row (a run may save thousands of times): start-up, stepping, then the
    # compiles and checkpoint blocking that hold every slice, drawn on every row under the losses.
    layers = [("0.85", [(0, first - t0)]), ("tab:green", [(first - t0, t1 - first)]),
              ("0.55", [(start - t0, max(width, 1e-3)) for start, width in compile_intervals(run.events)]),
              ("tab:blue", [(start - t0, max(width, 1e-3)) for start, width in checkpoint_blocking_intervals(run.events)])]
    for s in slices:
        for colour, spans in layers:
            if spans:
                ax.broken_barh(spans, (s - 0.35, 0.7), color=colour, alpha=0.6 if colour == "tab:green" else 0.85)
    for iv in lost_intervals(run.events):
        row = iv.slice if iv.slice >= 0 else len(slices) - 1
        end = iv.end if iv.end is not None else t1
        ax.broken_barh([(iv.start - t0, max(end - iv.start, 1e-3))], (row - 0.35, 0.7), color="tab:red")
    labelled: set[str] = set()
    for rec in report.recoveries:
        restored = "state rebuilt" if rec.live else "restored"
        for label, offset, colour in (("failure detected", 0.0, "tab:red"), (restored, rec.restored_s, "tab:blue"),
                                      ("first new step", rec.first_step_s, "tab:green")):
            if offset is not None:
                ax.axvline(rec.detected_at - t0 + offset, color=colour, lw=0.8, ls=":",
                           label=None if label in labelled else label)
                labelled.add(label)
    ax.set_yticks(slices, [f"slice {s}" for s in slices])
    ax.set_xlabel("wall time (s): light grey start-up, dark grey compiling, green stepping, blue checkpoint "
                  "blocking, red slice lost")
    if labelled:  # outside the bars, to the right, so that it never covers a slice
        ax.legend(loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=7, borderaxespad=0.0)
    ax.set_xlim(0, max(t1 - t0, 1e-3))


def _time_split_panel(ax, report: RunReport) -> None:
    """One stacked bar: the wall time split as `report` splits it, each part labelled where it fits."""
    parts = {"productive_s": report.productive_s, **report.badput.to_dict()}
    wall = report.wall_s or sum(parts.values()) or 1.0
    left = 0.0
    for label, key, colour in _TIME_SPLIT:
        share = parts[key] / wall
        if share <= 0:
            continue
        text = f"{label} {100 * share:.0f}%" if share >= 0.01 else f"{label} <1%"
        fits = share >= 0.07  # a narrow part is named in the legend beside the bar instead
        ax.barh(0, share, left=left, color=colour, edgecolor="white", height=0.8, label=None if fits else text)
        if fits:
            ax.text(left + share / 2, 0, text, ha="center", va="center", fontsize=7)
        left += share
    if ax.get_legend_handles_labels()[1]:
        ax.legend(loc="upper left", bbox_to_anchor=(1.005, 1.6), fontsize=6, borderaxespad=0.0)
    ax.set_xlim(0, max(1.0, left))
    ax.set_yticks([])
    ax.set_xticks([0, 0.25, 0.5, 0.75, 1.0], ["0", "25%", "50%", "75%", "100%"], fontsize=7)
    ax.set_title(f"where the {report.wall_s:.1f} s of wall time went (elxpk report lists every part)", fontsize=8)


def write_compare_png(c: Comparison, path: Path) -> Path:
    """Both loss curves overlaid, and their difference B - A below."""
    plt = _pyplot()
    fig, (ax, ax_diff) = plt.subplots(2, 1, figsize=(9, 6), sharex=True, gridspec_kw={"height_ratios": [3, 1.5]})
    ax.plot(c.steps.values, c.loss_a.values, lw=1.6, label=f"A {Path(c.run_a).name}")
    ax.plot(c.steps.values, c.loss_b.values, lw=1.0, ls="--", label=f"B {Path(c.run_b).name}")
    if c.first_divergent_step is not None:
        ax.axvline(c.first_divergent_step, color="tab:red", ls=":", lw=1, label="first divergent step")
    ax.set_ylabel("loss")
    verdict = "bitwise equal" if len(c.steps) and c.bitwise_equal == len(c.steps) else "diverged"
    ax.set_title(f"loss A vs B: {verdict}")
    ax.legend(fontsize=8)
    ax_diff.plot(c.steps.values, array("d", (b - a for a, b in zip(c.loss_a.values, c.loss_b.values, strict=True))),
                 lw=1, color="tab:purple")
    ax_diff.axhline(0.0, color="0.5", lw=0.6)
    ax_diff.set_xlabel("step")
    ax_diff.set_ylabel("B - A")
    fig.tight_layout()
    save_figure(fig, path, flag="--png", fmt="png", dpi=110)
    plt.close(fig)
    return path


def maxtext_report_figure(m: MaxTextMetrics, report: MaxTextReport):
    """A MaxText metrics file's figure: the loss curve above the step times (what the file holds)."""
    plt = _pyplot()
    fig, (ax_loss, ax_time) = plt.subplots(2, 1, figsize=(9, 6), sharex=True,
                                           gridspec_kw={"height_ratios": [3, 1.6]})
    ax_loss.plot(m.steps.values, m.loss.values, lw=1.2, label="loss (last line of each step)")
    redone = m.repeated_steps.values
    if redone:
        loss = array("d", (m.loss[bisect.bisect_left(m.steps.values, s)] for s in redone))
        ax_loss.scatter(redone, loss, s=6, c="0.5", zorder=3, label="steps redone after a restore")
    if report.first_nonfinite_step is not None:
        ax_loss.axvline(report.first_nonfinite_step, color="tab:red", ls="--", lw=1, label="loss not finite")
    ax_loss.set_ylabel("loss")
    ax_loss.set_title(f"{Path(m.path).name}: MaxText, {plural(report.steps, 'step')}")
    ax_loss.legend(loc="upper right", fontsize=8)
    has = m.step_time_s.has
    if any(has):
        ax_time.plot(array("q", (s for s, h in zip(m.steps.values, has, strict=True) if h)), m.step_times.values, lw=0.8,
                     color="tab:orange", label="perf/step_time_seconds")
        if report.step_time_median_s is not None:
            ax_time.axhline(report.step_time_median_s, color="0.4", ls=":", lw=1, label="median after the first")
            # The first step compiles: keep it from flattening the rest of the curve.
            ax_time.set_ylim(0, max(report.step_time_p95_s or 0.0, report.step_time_median_s) * 2 or 1.0)
        ax_time.legend(loc="upper right", fontsize=7)
    ax_time.set_xlabel("step")
    ax_time.set_ylabel("step time (s)")
    fig.tight_layout()
    return fig


def write_maxtext_report_png(m: MaxTextMetrics, report: MaxTextReport, path: Path, own: str | None = None) -> Path:
    """The MaxText figure, saved to exactly `path` (checked by the caller: elxpk/cli/report.py)."""
    plt = _pyplot()
    fig = maxtext_report_figure(m, report)
    save_figure(fig, path, flag="--png", fmt="png", dpi=110, own=own)
    plt.close(fig)
    return path
