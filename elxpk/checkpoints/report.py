"""The text report of a checkpoint inspection (`elxpk checkpoint inspect`, `python -m elxpk.checkpoints`):
standard library only, so the trainer image can print it without the launcher's CLI."""

from __future__ import annotations

from datetime import datetime, timezone

from elxpk.units import format_duration


def _when(seconds: float | None, now: float) -> str:
    if seconds is None:
        return "-"

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
    for skipped in result.skipped:
        lines.append(f"skipped: {skipped['name']}: {skipped['note']}")
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
