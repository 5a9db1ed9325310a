"""`elxpk checkpoint inspect DIR`: each step committed, torn or unreadable; the step a restore takes; the
save cadence achieved. Exit 0 healthy, 1 findings, 2 bad input (elxpk/checkpoints/inspection.py)."""

from __future__ import annotations

import json
import time
from typing import Annotated

import typer

from elxpk.checkpoints.report import render_text
from elxpk.cli.options import RunOutput
from elxpk.errors import CheckFailed, ElxpkError, UsageError
from elxpk.output_formats import output_format


def inspect(
    directory: Annotated[str, typer.Argument(metavar="DIR", help="A checkpoint directory, local or gs://: the "
                                             "trainer's --checkpoint-dir (or its RUN_DIR), or MaxText's "
                                             "base_output_directory/run_name/checkpoints.")],
    checkpoint_period: Annotated[str | None, typer.Option(
        "--checkpoint-period", metavar="STEPS", help="The save period the run was given; a gap of two periods "
        "or more with no committed save is a finding [default: the smallest gap between the saves found].")] = None,
    quarantine: Annotated[bool, typer.Option(
        "--quarantine", help="Move torn steps to DIR/elxpk-quarantine/<step>-<ms>/ (never deleted), as the trainer "
        "does, so a MaxText restart restores the newest whole step. Only while nothing writes to DIR.")] = False,
    output: RunOutput = "text",
) -> None:
    """List a checkpoint directory's steps (committed, torn, unreadable), the step a restart restores and the
    save cadence. Exit 0 healthy, 1 findings, 2 bad input."""
    from elxpk.checkpoints import inspection

    problems = []
    try:
        fmt = output_format("run", output)
    except UsageError as exc:
        problems.extend(exc.messages)
    try:
        period = inspection.checkpoint_period(checkpoint_period)
    except UsageError as exc:
        problems.extend(exc.messages)
    if problems:
        raise UsageError(*problems)
    root = inspection.resolve(directory)
    if quarantine:
        inspection.refuse_cwd(root)
    try:
        if quarantine:
            result = inspection.inspect_and_quarantine(root, period, now_ms=int(time.time() * 1000))
        else:
            result = inspection.inspect_directory(root, period)
    except OSError as exc:  # the listing or a move failed: storage, not the input
        raise ElxpkError(f"DIR {directory}: {exc}") from None
    if fmt == "json":
        typer.echo(json.dumps(result.to_dict(), indent=2))
    else:
        for line in render_text(result, now=time.time()):
            typer.echo(line)
    if result.findings:
        more = f" (and {len(result.findings) - 1} more)" if len(result.findings) > 1 else ""
        raise CheckFailed(f"checkpoint findings: {result.findings[0]}{more}")
