"""Each process start's timeline, from the trainer's `startup` events (trainer/startup.py): where a restart's
seconds went before its first step, phase by phase, and how its step was made (compiled, from jax's cache,
or deserialized from the run's executable store).

A process writes each phase at most once, `imports_done` first, so a new `imports_done` (or a phase seen
again) of a process begins its next start. Every process of a group writes its own, interleaved in the
file (on an object store, in its own chunks); they are told apart by `process`. Records from before the
events existed give no start-ups.
"""

from __future__ import annotations

from dataclasses import dataclass

from elxpk_contract.event_records import STARTUP_PHASES, Event, Startup, describe_startup


@dataclass(frozen=True)
class StartupTimeline:
    time: float  # unix seconds of its first phase's end
    step: int | None  # the step it resumed at (restore_done's), None before it restored
    process: int
    phases: dict[str, float]  # phase -> seconds from the process's start, in STARTUP_PHASES order
    executable: str  # executable_ready's how ("" when it did not get that far)

    @property
    def first_step_s(self) -> float | None:
        return self.phases.get("first_step_done")

    @property
    def after_restore_s(self) -> float | None:
        """restore_done to the first step's end (issue 49's goal: 3 s or less)."""
        done, first = self.phases.get("restore_done"), self.phases.get("first_step_done")
        return None if done is None or first is None else round(first - done, 6)

    def to_dict(self) -> dict:
        return {"time": self.time, "step": self.step, "process": self.process, "phases": dict(self.phases),
                "executable": self.executable, "first_step_s": self.first_step_s,
                "restore_done_to_first_step_s": self.after_restore_s}

    def describe(self) -> str:
        """One line: each phase's end from the process's start, in order."""
        where = "a fresh start" if self.step in (None, 0) else f"resumed at step {self.step}"
        return f"process {self.process}, {where}: {describe_startup(self.phases, self.executable)}"


def startups(events: tuple[Event, ...]) -> list[StartupTimeline]:
    """The run's process starts in the order written."""
    grouped: list[list[Startup]] = []
    open_group: dict[int, list[Startup]] = {}  # each process's start being read
    for event in events:
        if not isinstance(event, Startup):
            continue
        current = open_group.get(event.process)
        if current is None or event.phase == STARTUP_PHASES[0] or any(e.phase == event.phase for e in current):
            current = open_group[event.process] = []
            grouped.append(current)
        current.append(event)
    return [_timeline(group) for group in grouped]


def _timeline(group: list[Startup]) -> StartupTimeline:
    phases = {e.phase: e.since_start_s for e in sorted(group, key=lambda e: STARTUP_PHASES.index(e.phase))}
    restored = [e.step for e in group if e.phase == "restore_done"]
    how = [e.how for e in group if e.phase == "executable_ready"]
    return StartupTimeline(group[0].time, restored[0] if restored else None, group[0].process, phases,
                           how[0] if how else "")
