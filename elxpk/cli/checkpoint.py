"""`elxpk checkpoint inspect DIR`: each step committed, torn or unreadable; the step a restore takes; the
save cadence achieved. Exit 0 healthy, 1 findings, 2 bad input (elxpk/checkpoints/inspection.py)."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Annotated, Any

import typer

from elxpk.checkpoints.flags import COMMAND, INSPECT, InspectFlags
from elxpk.checkpoints.report import render_text
from elxpk.cli.options import NO_FLAGS, RunOutput, with_flags
from elxpk.errors import CheckFailed, UsageError
from elxpk.flag_records import read_record
from elxpk.output_formats import OUTPUT_ROWS
from elxpk.shown import shown


@with_flags(COMMAND, INSPECT)
def inspect(
    directory: Annotated[str, typer.Argument(metavar="DIR", help="A checkpoint directory, local or gs://: the "
                                             "trainer's --checkpoint-dir (or its RUN_DIR), or MaxText's "
                                             "base_output_directory/run_name/checkpoints.")],
    flags: Mapping[str, Any] = NO_FLAGS,
    output: RunOutput = "text",
) -> None:
    """List a checkpoint directory's steps (committed, torn, unreadable), the step a restart restores and the
    save cadence. Exit 0 healthy, 1 findings, 2 bad input."""
    from elxpk.checkpoints import inspection

    values, problems = read_record(InspectFlags, (*INSPECT, OUTPUT_ROWS["run"]),  # -o with the rest
                                   {**flags, "output": output})
    fmt = values.output
    if problems:
        raise UsageError(*problems)
    period, quarantine = values.checkpoint_period, values.quarantine
    root = inspection.resolve(directory)
    if quarantine:
        inspection.refuse_cwd(root)
    with inspection.transient_is_retryable(directory):  # the storage failed, not the input: exit 1
        if quarantine:
            result = inspection.inspect_and_quarantine(root, period, now_ms=int(time.time() * 1000))
        else:
            result = inspection.inspect_directory(root, period)
    if fmt == "json":
        typer.echo(json.dumps(result.to_dict(), indent=2))
    else:
        for line in render_text(result, now=time.time()):
            typer.echo(shown(line))  # names and metadata from storage (a gs:// bucket): controls shown
    if result.findings:
        more = f" (and {len(result.findings) - 1} more)" if len(result.findings) > 1 else ""
        raise CheckFailed(f"checkpoint findings: {result.findings[0]}{more}")
