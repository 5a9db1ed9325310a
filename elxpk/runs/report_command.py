"""What `elxpk report` prints, from its flags once they are read (elxpk/cli/report.py reads them and prints).

A run directory: goodput, badput, a timeline per recovery, chip-hours, and a PNG beside the run (a local one;
a run on gs:// is read, never written to). A MaxText metrics file: the loss curve and step times
(elxpk/runs/maxtext_report.py). Every line is computed, and the PNG written, before the first is printed.
"""

from __future__ import annotations

import json
from pathlib import Path

from elxpk.accelerators import Accelerator, price_of
from elxpk.chip_hours import render as render_chip_hours
from elxpk.cluster.records.incident_log import read_recorded
from elxpk.errors import UsageError
from elxpk.maxtext.metrics import MaxTextMetrics
from elxpk.runs import incident_timeline
from elxpk.runs.maxtext_report import build_maxtext_report, render_maxtext_text
from elxpk.runs.plots import write_maxtext_report_png, write_report_png
from elxpk.runs.report import build_report, render_text
from elxpk.runs.run_chip_hours import run_chip_hours
from elxpk.runs.rundir import Run
from elxpk.runs.sources import load_source
from elxpk.runs.workloads import others_line, split_workloads
from elxpk.shown import shown


def report_lines(run_dir: str, *, fmt: str, png: Path | None, no_png: bool, incidents: str | None,
                 accelerator: Accelerator | None, price: float | None) -> list[str]:
    """The lines `elxpk report RUN_DIR` prints (text, or one JSON document), its PNG written first.
    `png`: --png, already checked; `incidents`: --incidents, a record to merge (read, and refused, before
    anything is written)."""
    run = load_source(run_dir)
    recorded = None if incidents is None else read_recorded(incidents)
    if isinstance(run, MaxTextMetrics):
        if recorded is not None:
            raise UsageError("--incidents: merges with the bundled trainer's events.jsonl, which a MaxText "
                             "metrics file does not have; drop --incidents")
        if accelerator is not None or price is not None:
            raise UsageError("--accelerator/--chip-hour-price: chip-hours come from the bundled trainer's "
                             "events.jsonl, which a MaxText metrics file does not have; drop them")
        return _maxtext_lines(run, fmt, None if no_png else png or Path(run.path).parent / "report.png",
                              own=None if png else "replace")
    return _run_lines(run, fmt, png, no_png, recorded, accelerator, price)


def _run_lines(run: Run, fmt: str, png: Path | None, no_png: bool, recorded: list[dict] | None,
               accelerator: Accelerator | None, price: float | None) -> list[str]:
    # A workload created again on the same checkpoint directory writes beside the first one's records: the
    # report is of the newest (by the JobSet UID its sessions carry), and names the others.
    *earlier, (workload, run) = split_workloads(run)
    result = build_report(run, recorded or ())
    chip_hours = run_chip_hours(run, result, accelerator, price_of(accelerator, price))
    written = None
    # A run on gs:// is read, never written to: it is plotted only where --png says.
    plot_to = png or (run.path / "report.png" if isinstance(run.path, Path) else None)
    if not no_png and run.metrics and plot_to is not None:
        # report.png is elxpk's name: rewritten at each report, never through a link (elxpk/outfile.py)
        written = write_report_png(run, result, plot_to, own=None if png else "replace")
    timeline = None if recorded is None else incident_timeline.merge(recorded, run.events)
    if fmt == "json":
        data = result.to_dict()
        data["png"] = str(written) if written else None
        data["chip_hours"] = chip_hours.to_dict()
        data["run_id"] = workload.run_id
        data["earlier_workloads"] = [w.to_dict() for w, _ in earlier]
        if timeline is not None:
            data["incidents"] = incident_timeline.to_json(timeline, result.recoveries)
        return [json.dumps(data, indent=2)]
    lines = [shown(others_line([w for w, _ in earlier], workload))] if earlier else []
    # a run record (gs://, others write it): controls shown
    lines += [shown(line) for line in render_text(result) + render_chip_hours(chip_hours)]
    if timeline is not None:
        lines += [shown(line) for line in incident_timeline.render(timeline, result.recoveries)]
    if written:
        lines.append(f"plot: {written}")
    return lines


def _maxtext_lines(metrics: MaxTextMetrics, fmt: str, png: Path | None, own: str | None = None) -> list[str]:
    result = build_maxtext_report(metrics)
    written = None
    if png is not None:
        written = write_maxtext_report_png(metrics, result, png, own=own)
    if fmt == "json":
        return [json.dumps({**result.to_dict(), "png": str(written) if written else None}, indent=2)]
    lines = [shown(line) for line in render_maxtext_text(result)]  # a run record: controls shown
    if written:
        lines.append(f"plot: {written}")
    return lines
