"""The flags of `elxpk report RUN_DIR` and `elxpk compare RUN_A RUN_B`, declared once as rows
(elxpk/flag_rows.py): elxpk/cli/report.py and elxpk/cli/compare.py get their Typer options from them
(elxpk/cli/options.py `with_flags`) and read them with `flag_rows.read_all`; `path` tells elxpk/cli/arg_checks.py
which name a file read (--incidents) or written (--png), so a plot never overwrites its own input.
Each command reads -o first, then its rows, into its record (`ReportFlags`, `CompareFlags`:
elxpk/flag_records.py). Standard library, elxpk.flag_rows and elxpk.flag_records only."""

from __future__ import annotations

from elxpk.flag_records import Record
from elxpk.flag_rows import BOOL, FLOAT, INPUT, OUTPUT, TEXT, Flag

REPORT: tuple[Flag, ...] = (
    Flag("png", TEXT, "The .png file to write the plot to, in an existing directory.", path=OUTPUT, metavar="PATH",
         default_text="report.png in RUN_DIR (none for a gs:// run), or next to a MaxText metrics file",
         commands=("report",)),
    Flag("no_png", BOOL, "Write no plot (nothing is written at all).", default=False, commands=("report",)),
    Flag("incidents", TEXT, "An incident record (`elxpk workload events --record FILE`, local or gs://) to merge "
         "with the trainer's events into one timeline.", path=INPUT, metavar="FILE", commands=("report",)),
)

COMPARE: tuple[Flag, ...] = (
    Flag("rtol", FLOAT, "Allowed relative loss difference; 0 demands bitwise equality.", default=0.0, low=0,
         fix="e.g. --rtol 1e-6", commands=("compare",)),
    Flag("png", TEXT, "Write an overlay plot of both curves here.", path=OUTPUT, metavar="PATH",
         commands=("compare",)),
)


class ReportFlags(Record):
    """`report`'s -o, then REPORT."""

    output: str
    png: str | None
    no_png: bool
    incidents: str | None


class CompareFlags(Record):
    """`compare`'s -o, then COMPARE."""

    output: str
    rtol: float
    png: str | None
