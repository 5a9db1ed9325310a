"""`elxpk checkpoint inspect DIR`: each step committed, torn or unreadable; the step a restore takes; the
save cadence achieved. Exit 0 healthy, 1 findings, 2 bad input (elxpk/checkpoints/inspection.py)."""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from typing import Annotated

import typer

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
        result = inspection.inspect_directory(root, period)
        if quarantine:
            moved = inspection.quarantine(result, root, now_ms=int(time.time() * 1000))
            if moved:
                result = inspection.inspect_directory(root, period)
            result.moved = moved
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


def _when(seconds: float | None, now: float) -> str:
    if seconds is None:
        return "-"
    from elxpk.units import format_duration

    stamp = datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"{stamp} ({format_duration(max(0.0, now - seconds))} ago)"


def render_text(result, *, now: float) -> list[str]:
    lines = [f"directory: {result.directory}  (layout: {result.layout})"]
    if not result.steps:
        lines.append("no checkpoint saved yet")
    else:
        lines.append(f"{'step':>10}  {'state':<10}  {'committed at':<32}  reason")
        for s in result.steps:
            name = str(s.step) if s.name == str(s.step) else s.name
            lines.append(f"{name:>10}  {s.state:<10}  {_when(s.committed_at, now):<32}  {s.reason}".rstrip())
    for moved in result.moved:
        lines.append(f"moved: {moved['name']} -> {moved['to']}")
    restore = "none (a restart starts from step 0)" if result.restore_step is None else f"step {result.restore_step}"
    lines.append(f"restore: {restore}")
    committed = result.committed()
    if committed:
        lines.append(f"latest committed: step {committed[-1].step}, {_when(committed[-1].committed_at, now)}")
    if result.period is not None:
        lines.append(f"cadence: period {result.period} ({result.period_source}); "
                     + (f"{len(result.gaps)} gap(s) of two periods or more" if result.gaps else "no gap"))
    if result.trainer_step is not None:
        lines.append(f"trainer: at step {result.trainer_step} (its progress record)")
    lines.extend(f"finding: {f}" for f in result.findings)
    lines.append("healthy" if not result.findings else f"{len(result.findings)} finding(s)")
    return lines
