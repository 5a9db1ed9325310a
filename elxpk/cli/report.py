"""`elxpk report RUN_DIR`: goodput, badput breakdown, one timeline per recovery, and a PNG.

On a MaxText metrics_file (or a directory holding one): the loss curve and the step times, which is what
that file supports (elxpk/runs/maxtext_report.py).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from elxpk.accelerators import FLAGS as BILLING_FLAGS
from elxpk.cli.options import NO_FLAGS, RunOutput, with_flags
from elxpk.errors import UsageError
from elxpk.flag_records import read_record
from elxpk.output_formats import OUTPUT_ROWS
from elxpk.runs.flags import REPORT, ReportFlags
from elxpk.shown import shown


def check_png_path(png: Path) -> Path:
    """`--png PATH` writes exactly PATH: a .png file whose directory exists (elxpk/outfile.py); an
    existing file is replaced."""
    from elxpk.outfile import check_output

    check_output(png, "--png", suffixes=(".png",), example="report.png")
    return png


@with_flags("report", REPORT + BILLING_FLAGS)
def report(
    run_dir: Annotated[str, typer.Argument(help="A run directory (the --run-dir of `elxpk local run` or the "
                                           "trainer's, local or gs://), or a MaxText metrics_file (or a "
                                           "directory holding one).")],
    output: RunOutput = "text",
    flags: Mapping[str, Any] = NO_FLAGS,
) -> None:
    """Goodput and where the rest of the wall time went; a timeline per recovery. For a MaxText metrics
    file: the loss curve and the step times."""
    from elxpk.accelerators import price_of, read_flags
    from elxpk.chip_hours import render as render_chip_hours
    from elxpk.maxtext.metrics import MaxTextMetrics
    from elxpk.runs.report import build_report, render_text
    from elxpk.runs.run_chip_hours import run_chip_hours
    from elxpk.runs.sources import load_source

    # -o read with the other flags (its row, elxpk/output_formats.py): every problem at once
    values, problems = read_record(ReportFlags, (OUTPUT_ROWS["run"], *REPORT), {**flags, "output": output})
    fmt = values.output
    accelerator, price, billing_problems = read_flags(flags)
    problems += billing_problems
    png = None if values.png is None else Path(values.png)
    no_png, incidents = values.no_png, values.incidents
    if png is not None and no_png:
        problems.append("--png: conflicts with --no-png; give one of them")
    if problems:
        raise UsageError(*problems)
    if png is not None:
        check_png_path(png)
    run = load_source(run_dir)
    recorded = None
    if incidents is not None:  # read (and refused) before anything is written
        from elxpk.cluster.records.incident_log import read_recorded

        recorded = read_recorded(incidents)
    if isinstance(run, MaxTextMetrics):
        if recorded is not None:
            raise UsageError("--incidents: merges with the bundled trainer's events.jsonl, which a MaxText "
                             "metrics file does not have; drop --incidents")
        if accelerator is not None or price is not None:
            raise UsageError("--accelerator/--chip-hour-price: chip-hours come from the bundled trainer's "
                             "events.jsonl, which a MaxText metrics file does not have; drop them")
        _maxtext_report(run, fmt, None if no_png else png or Path(run.path).parent / "report.png",
                        own=None if png else "replace")
        return
    from elxpk.runs.workloads import others_line, split_workloads

    # A workload created again on the same checkpoint directory writes beside the first one's records: the
    # report is of the newest (by the JobSet UID its sessions carry), and names the others.
    *earlier, (workload, run) = split_workloads(run)
    result = build_report(run, recorded or ())
    chip_hours = run_chip_hours(run, result, accelerator, price_of(accelerator, price))
    written = None
    # A run on gs:// is read, never written to: it is plotted only where --png says.
    plot_to = png or (run.path / "report.png" if isinstance(run.path, Path) else None)
    if not no_png and run.metrics and plot_to is not None:
        from elxpk.runs.plots import write_report_png

        # report.png is elxpk's name: rewritten at each report, never through a link (elxpk/outfile.py)
        written = write_report_png(run, result, plot_to, own=None if png else "replace")
    timeline = None
    if recorded is not None:
        from elxpk.runs.incident_timeline import merge

        timeline = merge(recorded, run.events)
    if fmt == "json":
        data = result.to_dict()
        data["png"] = str(written) if written else None
        data["chip_hours"] = chip_hours.to_dict()
        data["run_id"] = workload.run_id
        data["earlier_workloads"] = [w.to_dict() for w, _ in earlier]
        if timeline is not None:
            from elxpk.runs.incident_timeline import to_json

            data["incidents"] = to_json(timeline, result.recoveries)
        typer.echo(json.dumps(data, indent=2))
        return
    if earlier:
        typer.echo(shown(others_line([w for w, _ in earlier], workload)))
    for line in render_text(result) + render_chip_hours(chip_hours):
        typer.echo(shown(line))  # a run record (gs://, others write it): controls shown
    if timeline is not None:
        from elxpk.runs.incident_timeline import render

        for line in render(timeline, result.recoveries):
            typer.echo(shown(line))  # a run record (gs://, others write it): controls shown
    if written:
        typer.echo(f"plot: {written}")



def _maxtext_report(metrics, fmt: str, png: Path | None, own: str | None = None) -> None:
    from elxpk.runs.maxtext_report import build_maxtext_report, render_maxtext_text

    result = build_maxtext_report(metrics)
    written = None
    if png is not None:
        from elxpk.runs.plots import write_maxtext_report_png

        written = write_maxtext_report_png(metrics, result, png, own=own)
    if fmt == "json":
        typer.echo(json.dumps({**result.to_dict(), "png": str(written) if written else None}, indent=2))
        return
    for line in render_maxtext_text(result):
        typer.echo(shown(line))  # a run record (gs://, others write it): controls shown
    if written:
        typer.echo(f"plot: {written}")
