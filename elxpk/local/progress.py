"""What the user is shown during a local run, as plain state fed by trainer records (no rich here).

`RunProgress.observe(kind, record)` has the trainer's observer signature. It keeps the step, the loss,
each slice's health and the event lines, e.g. "slice 1 lost at step 120", "restored step 100 in 0.4 s",
"step 121 reached 2.1 s after the failure". Both the Rich live view and the plain-line printer read it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from elxpk_contract.event_records import (
    CheckpointSkipped,
    Event,
    FailureDetected,
    FirstStepAfterRecovery,
    RejoinRefused,
    ResizeRefused,
    RestoreDone,
    RestoreStarted,
    RunFinished,
    RunStarted,
    ScaleUp,
    SlicesReady,
    parse_event,
)
from elxpk_contract.record_fields import RecordError
from elxpk_contract.records import Metric, parse_metric
from elxpk_contract.speed import Speed, SpeedSum

SPEED_WINDOW = 10  # steps: the speed shown is of the latest this many (a first step's slow start washes out)


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
    # What the trainer is doing when no step runs: from restore_started to restore_done it restores the state
    # and compiles the step for the mesh (restore_done is written once the compile is done), the largest part
    # of a short run's wall time; None while steps run.
    phase: str | None = None
    speed: Speed | None = None  # of the latest steps (SPEED_WINDOW), from the basis in the trainer's run_started
    _window: SpeedSum | None = None

    def __post_init__(self) -> None:
        self.health = {s: "healthy" for s in range(self.num_slices)}

    def say(self, line: str) -> None:
        self.lines.append(line)
        for listener in self.listeners:
            listener(line)

    def observe(self, kind: str, record: dict) -> None:
        """The observer seam: `record` is the dict written; a malformed one is left to `elxpk report`."""
        try:
            if kind == "metric":
                self._metric(parse_metric(record))
            elif kind == "event":
                self._event(parse_event(record))
        except RecordError:
            return

    def _metric(self, record: Metric) -> None:
        step = record.step
        self.phase = None
        self.step, self.loss, self.executed = step, record.loss_value, self.executed + 1
        if self._window is not None:
            window = self._window
            window.add(record.examples[1] - record.examples[0], len(record.slices), record.step_time_s)
            self.speed = window.speed() or self.speed
            if window.steps >= SPEED_WINDOW:  # the next steps make a new window; the speed shown stays till then
                self._window = SpeedSum(window.basis)
        if self.first_step is None:
            self.first_step = step
        for s in self.health:
            if s in record.slices:
                self.health[s] = "healthy"
            elif self.health[s] == "healthy":
                self.health[s] = "idle"  # alive but not in the mesh (resize mode)
        pending = self._pending
        if pending and not pending.caught_up and pending.failure_step is not None and step > pending.failure_step:
            pending.caught_up = True
            self.say(f"step {step} reached {self.clock() - pending.detected_at:.1f} s after the failure")

    def _event(self, e: Event) -> None:
        step, t = e.step, e.time
        if isinstance(e, RunStarted):
            for s, state in self.health.items():
                if state == "restarting":
                    self.health[s] = "healthy"
            self.say(f"run started at step {step}")
            basis = e.speed_basis()
            if basis is not None:
                self._window = SpeedSum(basis)
        elif isinstance(e, FailureDetected):
            for s in self.health:
                if s in e.slices_lost:
                    self.health[s] = "lost"
                elif e.source == "supervisor":
                    self.health[s] = "restarting"  # a group restart takes every process down
            who = "slice " + ",".join(map(str, e.slices_lost)) if e.slices_lost else "a slice"
            self._pending = _Pending(step, t)
            self.recoveries += 1
            self.say(f"{who} lost at step {step}")
        elif isinstance(e, SlicesReady):
            for s, state in self.health.items():
                if state in ("lost", "restarting") and s in e.slices:
                    self.health[s] = "healthy"
            if self._pending and not self._pending.slices_ready:
                self._pending.slices_ready = True
                self.say(f"slices ready {t - self._pending.detected_at:.1f} s after the failure")
        elif isinstance(e, RestoreStarted):
            self._restore_started = t
            self.phase = "restoring the state and compiling the step"
        elif isinstance(e, RestoreDone):
            self.phase = None
            started = self._restore_started
            took = f" in {t - started:.1f} s" if started is not None else ""
            if e.state_source == "live":
                self.say(f"state of step {step} rebuilt from the surviving slices{took}, 0 steps rewound")
            elif e.from_checkpoint:
                self.say(f"restored step {step}{took}")
            else:
                self.say(f"no valid checkpoint: initialised at step {step}{took}")
            if e.live_fallback:
                self.say(f"live recovery not used: {e.live_fallback}")
        elif isinstance(e, FirstStepAfterRecovery) and self._pending and not self._pending.first_step:
            self._pending.first_step = True
            self.say(f"step {step} reached {t - self._pending.detected_at:.1f} s after the failure")
        elif isinstance(e, ScaleUp):
            for s in [*e.slices, *e.returning]:
                self.health[s] = "healthy"
            who = "slice " + ",".join(map(str, e.returning)) + " back: " if e.returning else ""
            self.say(f"{who}scaling up to {len(e.slices) + len(e.returning)} slices at step {step}")
        elif isinstance(e, ResizeRefused):
            self.say(f"resize to {len(e.slices)} slices refused: the step needs {e.needed_bytes / 2**20:.1f} MiB "
                     f"per device, a device has {e.limit_bytes / 2**20:.1f} MiB; waiting for {e.min_slices} slices")
        elif isinstance(e, RejoinRefused):
            for s in e.slices:
                self.health[s] = "sick"
            who = "slice " + ",".join(map(str, e.slices))
            self.say(f"{who} back but failed its health check at step {step}, still lost: {e.reason}")
        elif isinstance(e, CheckpointSkipped):
            self.say(f"checkpoint {step} skipped: {e.reason or 'no reason given'}")
        elif isinstance(e, RunFinished):
            self.finished = True
            self.say(f"run finished: {step} steps done")

    def status_line(self) -> str:
        step = "-" if self.step is None else str(self.step + 1)
        loss = "-" if self.loss is None else f"{self.loss:.4f}"
        speed = "" if self.speed is None else f" {self.speed_text()}"
        return f"step {step}/{self.total_steps} loss {loss}{speed}" + (f" ({self.phase})" if self.phase else "")

    def speed_text(self) -> str:
        """`1,234 tokens/s, MFU 12.3%`; `no MFU` where the device's peak is unknown (a CPU); "" before a step."""
        s = self.speed
        if s is None:
            return ""
        return f"{s.tokens_per_s:,.0f} tokens/s, " + ("no MFU" if s.mfu is None else f"MFU {100.0 * s.mfu:.1f}%")
