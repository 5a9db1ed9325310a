"""Failures grouped by cause, and the runs of them that made no progress (issue 23: a retry budget that
knows causes).

A failure's cause is its class: the name of the exit code it ends the run with when it is not retried
(`failure_detected`'s `cause`: slice_lost, stalled). Records written before the field existed, and the
local supervisor's, are classed from their `kind`. A no-progress run is what `--elastic-stop-on-repeat`
counts: failures in a row of one cause where none reached a step past the highest of those before it
(the same step failing again and again), read with the trainer's own rule.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from elxpk_contract.event_records import Event, FailureDetected

# `kind` -> cause, for records without a `cause`: every retried kind is a slice loss to the trainer.
_BY_KIND = {"slice_down": "slice_lost", "maybe_slice_down": "slice_lost", "process_killed": "slice_lost",
            # the writer heard SIGTERM itself (elxpk/runs/recoveries.py's failure for a `preempted`): its code's name
            "preempted": "preempted"}
UNKNOWN = "unknown"


def cause_of(failure: FailureDetected) -> str:
    return failure.cause or _BY_KIND.get(failure.kind, UNKNOWN)


@dataclass(frozen=True)
class CauseCount:
    cause: str
    steps: tuple[int | None, ...]  # the step each failure of this cause reached, in time order

    def to_dict(self) -> dict:
        return {"cause": self.cause, "count": len(self.steps), "steps": list(self.steps)}


@dataclass(frozen=True)
class NoProgress:
    """Failures in a row of one cause with no step past `since_step`."""

    cause: str
    since_step: int
    failures: int
    stopped: str  # why the trainer stopped retrying at the last of them ("" when it went on)

    def to_dict(self) -> dict:
        return {"cause": self.cause, "since_step": self.since_step, "failures": self.failures,
                "stopped": self.stopped}

    def describe(self) -> str:
        line = f"no progress since step {self.since_step}: {self.failures} {self.cause} failures in a row"
        return line + ("; retries stopped" if self.stopped else "")


def _failures(events: Sequence[Event]) -> list[FailureDetected]:
    return sorted((e for e in events if isinstance(e, FailureDetected)), key=lambda e: e.time)


def by_cause(events: Sequence[Event]) -> list[CauseCount]:
    """Each cause with the steps its failures reached, the most frequent first."""
    return count_causes([(cause_of(f), f.step) for f in _failures(events)])


def count_causes(failures: Sequence[tuple[str, int | None]]) -> list[CauseCount]:
    """(cause, step) pairs in time order -> each cause with its steps, the most frequent first. The report
    counts its recoveries so (every one, those the trainer wrote no failure_detected for included)."""
    steps: dict[str, list[int | None]] = {}
    for cause, step in failures:
        steps.setdefault(cause or UNKNOWN, []).append(step)
    return sorted((CauseCount(c, tuple(s)) for c, s in steps.items()), key=lambda g: (-len(g.steps), g.cause))


def no_progress_runs(events: Sequence[Event]) -> list[NoProgress]:
    """Every run of two or more failures of one cause in which no failure passed the highest step of the
    failures before it; a new cause or a new step starts a new run (the trainer's rule)."""
    found: list[NoProgress] = []
    run: list[FailureDetected] = []

    def close() -> None:
        if len(run) >= 2:
            found.append(NoProgress(cause_of(run[0]), max(f.step or 0 for f in run), len(run), run[-1].stopped))

    for failure in _failures(events):
        if run and (cause_of(failure) != cause_of(run[0]) or (failure.step or 0) > max(f.step or 0 for f in run)):
            close()
            run = []
        run.append(failure)
    close()
    return found
