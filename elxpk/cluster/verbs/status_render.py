"""How statuses look: Rich tables for people, JSON/YAML for machines (same fields as WorkloadStatus.to_dict)."""

from __future__ import annotations

import json
from typing import Any

from elxpk.cluster.records.status import WorkloadStatus
from elxpk.shown import shown
from elxpk.units import format_duration

FORMATS = ("table", "json", "yaml")
_STATE_STYLE = {"Running": "green", "Succeeded": "green", "Degraded": "yellow", "Restarting": "yellow",
                "Admitted": "cyan", "Queued": "cyan", "Failed": "red"}
_SLICE_STYLE = {"Running": "green", "Succeeded": "green", "Starting": "cyan", "Pending": "cyan",
                "Restarting": "yellow", "Missing": "yellow", "Failed": "red"}


def dump(data: Any, output: str) -> str:
    if output == "json":
        return json.dumps(data, indent=2, sort_keys=False)
    import yaml

    return yaml.safe_dump(data, sort_keys=False).rstrip()


def _cell(text: object) -> str:
    """Cluster text in one table cell: one line, controls visible (elxpk/shown.py), Rich markup escaped (a
    message's `[link=...]` is text, not a hyperlink)."""
    from rich.markup import escape

    return escape(shown(text))


def _styled(text: str, styles: dict[str, str]) -> str:
    style = styles.get(text)
    return f"[{style}]{text}[/{style}]" if style else _cell(text)  # a state it does not know: the cluster's text


def _budget(used: int, limit: int | None) -> str:
    if limit is None:
        return "-"
    if limit == 0:  # a --no-pathways slice: no pod retries of its own; the JobSet's restarts are its budget
        return "none: a failed pod fails the slice (JobSet restart)"
    return f"{used}/{limit} used, {max(limit - used, 0)} left"


# JobSet's start-up bookkeeping: a condition not in effect (Suspended False: "jobset is resumed") or the
# startup policy's progress says nothing about why a workload runs, waits or failed.
_NOISE_TYPES = ("StartupPolicyInProgress", "StartupPolicyCompleted")


def telling_conditions(conditions: tuple) -> list:
    """The conditions worth a person's eye, newest first: those in effect, the start-up noise left out."""
    return [c for c in conditions if c.status == "True" and c.type not in _NOISE_TYPES]


def status_renderables(status: WorkloadStatus) -> list[Any]:
    from rich.markup import escape
    from rich.table import Table

    summary = Table.grid(padding=(0, 2))
    summary.add_column(style="bold")
    summary.add_column()
    summary.add_row("Workload", f"{_cell(status.name)}  (namespace {_cell(status.namespace)})"
                    + (f"  [dim]created by {_cell(status.created_by)}[/dim]" if status.created_by else ""))
    summary.add_row("State", f"{_styled(status.state, _STATE_STYLE)}  {_cell(status.message)}")
    if status.reason:
        summary.add_row("Why", f"[yellow]{_cell(status.reason)}[/yellow]  [dim](--why: the fix)[/dim]")
    summary.add_row("Slices healthy", f"{status.slices_healthy}/{status.slices_total}")
    if status.head is not None:
        summary.add_row("Pathways head", _styled(status.head, _SLICE_STYLE))
    ignored = status.restarts - status.restarts_counted
    summary.add_row("JobSet restarts", f"{status.restarts} (maxRestarts {status.max_restarts}: "
                    f"{status.restarts_counted} counted, {status.restarts_left} left)"
                    + (f"; {ignored} not counted (a failurePolicy rule: RestartJobSetAndIgnoreMaxRestarts, "
                       "infra)" if ignored > 0 else ""))
    causes = status.restart_causes
    if any(causes.values()):
        summary.add_row("Restart causes", ", ".join(f"{n} {cause}" for cause, n in causes.items() if n)
                        + "  [dim](infra: disruption, eviction, retryable exit code; user: user-error code)[/dim]")
    if status.progress is not None:
        summary.add_row("Trainer", progress_text(status.progress, status.state))
    elif status.progress_problem:
        summary.add_row("Trainer", f"[dim]{_cell(status.progress_problem)}[/dim]")
    if status.chip_hours_lines:
        summary.add_row("Chip-hours", escape("\n".join(status.chip_hours_lines)))
    kueue = _cell(status.admission) if status.admission else "no Kueue Workload"
    if status.admission_message and status.admission != "Admitted":
        kueue += f": {_cell(status.admission_message)}"
    summary.add_row("Kueue", f"{kueue}" + (f"  (queue {_cell(status.queue)})" if status.queue else ""))
    if status.age_s is not None:
        summary.add_row("Age", format_duration(status.age_s))

    slices = Table(title=f"Slices ({_cell(status.worker_job or 'none')})", title_justify="left")
    for column in ("slice", "state", "ready", "active", "failed", "pod restarts", "restart budget (backoffLimit)"):
        slices.add_column(column, justify="right" if column not in ("state", "restart budget (backoffLimit)")
                          else "left")
    for s in status.slices:
        slices.add_row(str(s.index), _styled(s.state, _SLICE_STYLE), f"{s.ready}/{s.expected}", str(s.active),
                       str(s.failed), str(s.pod_restarts), _budget(s.budget_used, s.backoff_limit))
    out: list[Any] = [summary, slices]
    telling = telling_conditions(status.conditions)
    if telling:
        conditions = Table(title="Latest conditions", title_justify="left")
        for column in ("time", "type", "status", "reason", "message"):
            conditions.add_column(column)
        for c in telling[:5]:
            conditions.add_row(*(_cell(v) for v in (c.time or "", c.type, c.status, c.reason, c.message)))
        out.append(conditions)
    return out


def why_renderables(status: WorkloadStatus) -> list[Any]:
    """`status --why`: every reason, what is wrong and then the fix."""
    from rich.text import Text

    if not status.why:
        return [Text(shown(f"Why: nothing is holding it back ({status.state}: {status.message})"))]
    out: list[Any] = [Text("Why", style="bold")]
    for reason in status.why:
        out.append(Text(shown(f"- [{reason.cause}] {reason.text}")))
        if reason.detail:
            out.append(Text(shown(f"  {reason.detail}"), style="dim"))
        if reason.fix:
            out.append(Text(shown(f"  fix: {reason.fix}"), style="green"))
    return out


def trainer_state(progress: dict, workload_state: str) -> str:
    """The trainer's state as a person reads it: a stop that the JobSet's restart retries (a lost slice, a
    stall, a preemption) is no failure of the workload while it still runs."""
    state = _cell(progress.get("state", "running"))
    code = progress.get("exit_code")
    exited = f", exit {code}" if isinstance(code, int) else ""
    if state == "running":
        return ""
    if progress.get("gave_up"):
        return f"; trainer gave up for good ({state}{exited})"
    if state != "done" and workload_state not in ("Succeeded", "Failed"):
        return f"; trainer stopped ({state}{exited}), the JobSet restarts it"
    return f"; trainer {state}"


def progress_text(progress: dict, workload_state: str) -> str:
    """The trainer's progress record (a file in the checkpoint dir, written by whoever can write there): each
    value in one cell's form (`_cell`), so a record holding markup or controls draws nothing of its own."""
    def age(seconds: float | None) -> str:
        return "-" if seconds is None else format_duration(seconds) + " ago"

    step = f"step {_cell(progress['steps_done'])} done {age(progress.get('step_age_s'))}"
    if progress.get("checkpoint_step") is None:
        ckpt = "no checkpoint committed yet"
    else:
        ckpt = f"checkpoint {_cell(progress['checkpoint_step'])} committed {age(progress.get('checkpoint_age_s'))}"
    stopped = ""
    if progress.get("saves_stopped"):
        last = progress.get("checkpoint_step") or 0
        stopped = (f"; [yellow]saves stopped: no checkpoint for {_cell(progress['steps_done'] - last)} steps (period "
                   f"{_cell(progress.get('checkpoint_period'))}): elxpk checkpoint inspect "
                   f"{_cell(progress.get('directory'))}[/yellow]")
    return f"{step}{speed_text(progress)}; {ckpt}" + trainer_state(progress, workload_state) + stopped


def speed_text(progress: dict) -> str:
    """`; 12,345 tokens/s, MFU 23.1%` from the progress record (its recent steps), or "" where it has none; a
    record without an MFU (a CPU, a chip of unknown peak) says `no MFU`."""
    tokens, mfu = progress.get("tokens_per_s"), progress.get("mfu")
    # The record is a file anyone with the bucket can write: a figure no run reaches is not shown.
    if not isinstance(tokens, (int, float)) or not 0 <= tokens < 1e12:
        return ""
    if isinstance(mfu, (int, float)) and 0 <= mfu <= 1.5:
        return f"; {tokens:,.0f} tokens/s, MFU {100.0 * mfu:.1f}%"
    return f"; {tokens:,.0f} tokens/s, no MFU"


def list_table(statuses: list[WorkloadStatus]) -> Any:
    from rich.table import Table

    table = Table()
    for column in ("name", "state", "healthy slices", "restarts", "age", "queue"):
        table.add_column(column, justify="right" if column in ("healthy slices", "restarts", "age") else "left")
    for s in statuses:
        name = _cell(s.name) + (" [dim](xpk)[/dim]" if s.created_by == "xpk" else "")
        table.add_row(name, _styled(s.state, _STATE_STYLE), f"{s.slices_healthy}/{s.slices_total}",
                      f"{s.restarts}/{s.max_restarts}", format_duration(s.age_s) if s.age_s is not None else "-",
                      _cell(s.queue or "-"))
    return table


def list_record(status: WorkloadStatus) -> dict:
    return {"name": status.name, "namespace": status.namespace, "state": status.state,
            "slices_healthy": status.slices_healthy, "slices_total": status.slices_total,
            "restarts": status.restarts, "max_restarts": status.max_restarts, "age_s": status.age_s,
            "queue": status.queue, "created_by": status.created_by or None, "message": status.message}
