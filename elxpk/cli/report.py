"""`elxpk report RUN_DIR`: goodput, badput breakdown, one timeline per recovery, and a PNG.

On a MaxText metrics_file (or a directory holding one): the loss curve and the step times, which is what
that file supports (elxpk/runs/maxtext_report.py).
"""

from __future__ import annotations

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
    from elxpk.accelerators import read_flags
    from elxpk.runs.report_command import report_lines

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
    for line in report_lines(run_dir, fmt=fmt, png=png, no_png=no_png, incidents=incidents,
                             accelerator=accelerator, price=price):
        typer.echo(line)
