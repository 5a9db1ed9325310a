"""What the user is shown during a local run, as plain state fed by trainer records (no rich here).

`RunProgress.observe(kind, record)` has the trainer's observer signature. It keeps the step, the loss,
each slice's health and the event lines, e.g. "slice 1 lost at step 120", "restored step 100 in 0.4 s",
"step 121 reached 2.1 s after the failure". Both the Rich live view and the plain-line printer read it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from elxpk.runs.recoveries import lost_slices, restored_step
from elxpk.runs.rundir import loss_value


@dataclass
class _Pending:
    """A failure whose recovery is still in progress."""

    failure_step: int | None
    detected_at: float
    slices_ready: bool = False
    first_step: bool = False
    caught_up: bool = False


@dataclass
class RunProgress:
    total_steps: int
    num_slices: int
    clock: Callable[[], float] = time.time
    step: int | None = None  # last step executed
    loss: float | None = None
    executed: int = 0
    first_step: int | None = None  # first step executed in this session (resume point)
    health: dict[int, str] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)
    recoveries: int = 0
    finished: bool = False
    listeners: list[Callable[[str], None]] = field(default_factory=list)
    _pending: _Pending | None = None
    _restore_started: float | None = None

    def __post_init__(self) -> None:
        self.health = {s: "healthy" for s in range(self.num_slices)}

    def say(self, line: str) -> None:
        self.lines.append(line)
        for listener in self.listeners:
            listener(line)

    def observe(self, kind: str, record: dict) -> None:
        if kind == "metric":
            self._metric(record)
        elif kind == "event":
            self._event(record)

    def _metric(self, record: dict) -> None:
        step = record.get("step")
        if not isinstance(step, int):
            return
        self.step, self.loss, self.executed = step, loss_value(record), self.executed + 1
        if self.first_step is None:
            self.first_step = step
        active = record.get("slices")
        if isinstance(active, list):
            for s in self.health:
                if s in active:
                    self.health[s] = "healthy"
                elif self.health[s] == "healthy":
                    self.health[s] = "idle"  # alive but not in the mesh (resize mode)
        pending = self._pending
        if pending and not pending.caught_up and pending.failure_step is not None and step > pending.failure_step:
            pending.caught_up = True
            self.say(f"step {step} reached {self.clock() - pending.detected_at:.1f} s after the failure")

    def _event(self, e: dict) -> None:
        name, step = e.get("event"), e.get("step")
        t = e.get("time") if isinstance(e.get("time"), (int, float)) else self.clock()
        if name == "run_started":
            for s, state in self.health.items():
                if state == "restarting":
                    self.health[s] = "healthy"
            self.say(f"run started at step {step}")
        elif name == "failure_detected":
            lost = lost_slices(e)
            for s in self.health:
                if s in lost:
                    self.health[s] = "lost"
                elif e.get("source") == "supervisor":
                    self.health[s] = "restarting"  # a group restart takes every process down
            who = "slice " + ",".join(map(str, lost)) if lost else "a slice"
            self._pending = _Pending(step if isinstance(step, int) else None, float(t))
            self.recoveries += 1
            self.say(f"{who} lost at step {step}")
        elif name == "slices_ready":
            active = e.get("active_slices", e.get("slices"))
            for s, state in self.health.items():
                if state in ("lost", "restarting") and (not isinstance(active, list) or s in active):
                    self.health[s] = "healthy"
            if self._pending and not self._pending.slices_ready:
                self._pending.slices_ready = True
                self.say(f"slices ready {float(t) - self._pending.detected_at:.1f} s after the failure")
        elif name == "restore_started":
            self._restore_started = float(t)
        elif name == "restore_done":
            started = self._restore_started
            took = f" in {float(t) - started:.1f} s" if started is not None else ""
            if e.get("from_checkpoint") is False:
                self.say(f"no valid checkpoint: initialised at step {restored_step(e)}{took}")
            else:
                self.say(f"restored step {restored_step(e)}{took}" + _skipped(e))
        elif name == "first_step_after_recovery" and self._pending and not self._pending.first_step:
            self._pending.first_step = True
            self.say(f"step {step} reached {float(t) - self._pending.detected_at:.1f} s after the failure")
        elif name == "scale_up":
            active = e.get("slices") if isinstance(e.get("slices"), list) else []
            back = e.get("returning") if isinstance(e.get("returning"), list) else []
            for s in [*active, *back]:
                self.health[s] = "healthy"
            who = "slice " + ",".join(map(str, back)) + " back: " if back else ""
            self.say(f"{who}scaling up to {len(active) + len(back)} slices at step {step}")
        elif name == "checkpoint_skipped":
            self.say(f"checkpoint {step} skipped: {e.get('reason', 'no reason given')}")
        elif name == "run_finished":
            self.finished = True
            self.say(f"run finished at step {step}")

    def status_line(self) -> str:
        step = "-" if self.step is None else str(self.step + 1)
        loss = "-" if self.loss is None else f"{self.loss:.4f}"
        return f"step {step}/{self.total_steps} loss {loss}"


def _skipped(e: dict) -> str:
    """Why newer checkpoints were passed over, when the restore event says so."""
    skipped = e.get("skipped")
    if isinstance(skipped, list) and skipped:
        parts = []
        for item in skipped:
            if isinstance(item, dict):
                parts.append(f"{item.get('step')} ({item.get('reason', '?')})")
            else:
                parts.append(str(item))
        return "; skipped " + ", ".join(parts)
    return ""
