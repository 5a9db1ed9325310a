"""What `workload status NAME --watch` shows: a Rich live view (local run's look), or with `-o json` one JSON
object per change. Exit: 0 when the workload succeeds, 1 when it fails (as `workload wait`), 130 on Ctrl-C
(elxpk/cli/main.py). Imports no jax, kubernetes or google."""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any, TextIO

from elxpk.cluster.diagnosis.failure_summary import faults
from elxpk.cluster.records.incidents import CAUSES
from elxpk.cluster.records.trainer_phase import phase_of, unread
from elxpk.cluster.verbs.status_render import speed_text
from elxpk.cluster.verbs.status_watch import ReadStatus, WatchState, watch_status
from elxpk.errors import CheckFailed
from elxpk.units import format_duration

_PHASE_STYLE = {"stepping": "green", "restoring": "cyan", "compiling": "cyan", "pods starting": "cyan"}
_STATE_STYLE = {"Running": "green", "Succeeded": "green", "Degraded": "yellow", "Restarting": "yellow",
                "Admitted": "cyan", "Queued": "cyan", "Failed": "bold red"}


def facts(state: WatchState, now: float, now_monotonic: float) -> dict[str, Any]:
    """The view's figures, as one flat record (what the JSON stream writes beside the full status)."""
    status = state.status
    connection = state.connection(now_monotonic)
    out: dict[str, Any] = {"workload": state.name, "connection": connection or "ok"}
    if status is None:
        return out
    later = max(now - state.read_at, 0.0)  # the trainer's ages keep growing between refreshes
    progress = status.progress or {}
    step_age = progress.get("step_age_s")
    step_age = None if step_age is None else step_age + later
    ckpt_age = progress.get("checkpoint_age_s")
    phase = phase_of(status, status.progress, state.started_at, step_age, state.rate, now)
    if connection:  # an API or storage pause: the last read's phase, aged, never live stepping
        phase = unread(phase, later)
    # a slice's own pod retries (backoffLimit > 0); a --no-pathways slice has none (limit 0: the JobSet's
    # restarts are its budget), so its "0 left" would read as spent from the first second
    own = [s for s in status.slices if s.backoff_limit]
    # one kill once: a slice's fault counted once whatever its pods and JobSet restarts report, the slices that
    # stopped with its group apart (failure_summary.faults, as `events` closes)
    lost, stopped = faults(list(state.losses.values()))
    failures = dict.fromkeys(CAUSES, 0)
    for incident in lost:
        failures[incident.cause] = failures.get(incident.cause, 0) + 1
    out.update({
        "state": status.state, "message": status.message, "why": status.reason,
        "phase": phase.name, "phase_detail": phase.detail,
        "slices_healthy": status.slices_healthy, "slices_total": status.slices_total,
        "step": progress.get("steps_done"), "steps_per_s": state.rate if phase.step_fresh else None,
        # the trainer's speed over its recent steps (the progress record's), only while it steps
        "tokens_per_s": progress.get("tokens_per_s") if phase.step_fresh else None,
        "mfu": progress.get("mfu") if phase.step_fresh else None,
        "step_age_s": step_age,
        "checkpoint_step": progress.get("checkpoint_step"),
        "checkpoint_age_s": None if ckpt_age is None else ckpt_age + later,
        "restart_causes": dict(status.restart_causes), "failures": failures,
        "stopped_with_group": len(stopped),
        "jobset_restarts": status.restarts,
        "jobset_restarts_left": status.restarts_left, "max_restarts": status.max_restarts,
        "slice_budget_left_min": min(s.budget_left or 0 for s in own) if own else None,
        "slice_budget_min": min(s.backoff_limit or 0 for s in own) if own else None,
        "incidents": state.incident_count,
    })
    return out


def _change_key(record: dict) -> tuple:
    """What counts as a change: everything but the ages, which grow every second."""
    return tuple(sorted((k, json.dumps(v, sort_keys=True)) for k, v in record.items()
                        if k not in _AGING))


_AGING = ("step_age_s", "checkpoint_age_s", "phase_detail")  # grow every second: no change of their own


def _age(seconds: float | None) -> str:
    return "-" if seconds is None else f"{format_duration(seconds)} ago"


class WatchView:
    """The live view: a summary grid like local run's, then the latest incident lines."""

    def __init__(self, state: WatchState) -> None:
        self.state = state

    def __rich__(self) -> Any:
        from rich.console import Group
        from rich.markup import escape
        from rich.table import Table
        from rich.text import Text

        from elxpk.shown import shown

        with self.state.lock:
            f = facts(self.state, time.time(), time.monotonic())
            lines = [i.line() for i in self.state.incidents]
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="bold")
        grid.add_column()
        grid.add_row("Workload", f"{escape(shown(f['workload']))}  [dim](Ctrl-C to stop watching; the workload runs on)[/dim]")
        if f["connection"] != "ok":  # a storage pause is told as storage, not as the Kubernetes API
            label = "Storage" if f["connection"].startswith("storage") else "API"
            grid.add_row(label, f"[bold yellow]{escape(shown(f['connection']))}[/bold yellow]")
        if "state" not in f:
            grid.add_row("State", "reading ...")
            return grid
        style = _STATE_STYLE.get(f["state"], "")
        grid.add_row("State", f"[{style}]{f['state']}[/{style}]  {escape(shown(f['message']))}" if style
                     else f"{f['state']}  {escape(shown(f['message']))}")
        if f["why"]:
            grid.add_row("Why", f"[yellow]{escape(shown(f['why']))}[/yellow]")
        healthy_style = "green" if f["slices_healthy"] == f["slices_total"] else "yellow"
        grid.add_row("Slices healthy", f"[{healthy_style}]{f['slices_healthy']}/{f['slices_total']}[/{healthy_style}]")
        if f["phase"] is not None:
            detail = f["phase_detail"]
            grid.add_row("Phase", f"[{_PHASE_STYLE.get(f['phase'], 'yellow')}]{f['phase']}[/]"
                         + (f"  {escape(shown(detail))}" if detail else ""))
        if f["step"] is not None:
            # the progress record is a file in the checkpoint dir: its values drawn as text, never as markup
            if f["phase"] in ("stepping", None):
                rate = "" if f["steps_per_s"] is None else f", {f['steps_per_s']:.2f} steps/s"
                speed = speed_text({"tokens_per_s": f["tokens_per_s"], "mfu": f["mfu"]}).replace(";", ",", 1)
                trainer = f"step {escape(shown(f['step']))} done {_age(f['step_age_s'])}{rate}{speed}"
            else:  # not stepping now: the last step and its age, never its old rate as the pace now
                trainer = f"last step {escape(shown(f['step']))}, {_age(f['step_age_s'])}"
            grid.add_row("Trainer", trainer)
            ckpt = ("none committed yet" if f["checkpoint_step"] is None
                    else f"step {escape(shown(f['checkpoint_step']))} committed {_age(f['checkpoint_age_s'])}")
            grid.add_row("Checkpoint", ckpt)
        grid.add_row("Restarts", f"JobSet restarts {f['jobset_restarts']} "
                     f"({f['jobset_restarts_left']} of maxRestarts {f['max_restarts']} left)"
                     + ("" if f["slice_budget_left_min"] is None
                        else f"; slice budget left {f['slice_budget_left_min']} of {f['slice_budget_min']} (lowest)"))
        causes = ", ".join(f"{n} {cause}" for cause, n in f["failures"].items() if n) or "none"
        n = f["stopped_with_group"]
        grid.add_row("Failures", f"by cause: {causes}"
                     + (f"; {n} slice{'s' if n > 1 else ''} stopped with {'their' if n > 1 else 'its'} group" if n else ""))
        title = Text(f"Last incidents ({f['incidents']} seen)", style="bold")
        # one incident, one screen line: a wrapped line would push the older ones off a small terminal
        drawn = [Text(line, no_wrap=True, overflow="ellipsis") for line in lines] or [Text("none yet", style="dim")]
        return Group(grid, title, *drawn)


class JsonStream:
    """One JSON object per change: the view's figures, the full status, and the incidents new since."""

    def __init__(self, state: WatchState, out: TextIO) -> None:
        self.state, self.out = state, out
        self._last: tuple | None = None
        self._write = threading.Lock()

    def changed(self) -> None:
        with self._write:
            with self.state.lock:
                record = facts(self.state, time.time(), time.monotonic())
                new = [i.to_dict() for i in self.state.new_incidents]
                self.state.new_incidents.clear()
                status = self.state.status.to_dict() if self.state.status is not None else None
            key = _change_key(record)
            if key == self._last and not new:
                return
            self._last = key
            self.out.write(json.dumps({**record, "new_incidents": new, "status": status}, sort_keys=True) + "\n")
            self.out.flush()


def run_watch(kube: Any, namespace: str, name: str, read_status: ReadStatus, *, json_out: bool,
              refresh_s: float = 5.0) -> None:
    """Follow until the workload ends: return when it succeeded, CheckFailed when it failed."""
    state = WatchState(name)
    stop = threading.Event()
    if json_out:
        stream = JsonStream(state, sys.stdout)

        def tick() -> None:  # a stalled API answers nothing: the "reconnecting" record comes from here
            while not stop.wait(1.0):
                stream.changed()

        ticker = threading.Thread(target=tick, name="status-watch-tick", daemon=True)
        ticker.start()
        try:
            final = watch_status(kube, namespace, name, read_status, state, on_change=stream.changed,
                                 refresh_s=refresh_s)
        finally:
            stop.set()
        stream.changed()
    else:
        from rich.live import Live

        from elxpk.shown import console as shown_console

        console: Any = shown_console(highlight=False)
        with Live(WatchView(state), console=console, refresh_per_second=4, transient=False):
            final = watch_status(kube, namespace, name, read_status, state, on_change=lambda: None,
                                 refresh_s=refresh_s)
    if final.state == "Failed":
        raise CheckFailed(f"workload {name} failed: {final.message}")
