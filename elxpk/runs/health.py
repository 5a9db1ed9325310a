"""Slice-health intervals over wall time, from the typed events (for the report's timeline plot)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from elxpk_contract.event_records import (
    CheckpointSaved,
    Event,
    FailureDetected,
    RestoreDone,
    RunStarted,
    ScaleUp,
    SlicesReady,
)


@dataclass(frozen=True)
class LostInterval:
    slice: int
    start: float  # unix seconds
    end: float | None  # None: still lost when the run ended


def lost_intervals(events: Sequence[Event]) -> list[LostInterval]:
    """When each slice was lost: from its failure until an event shows it active again.

    In pause-resume the run waits for all slices, so `slices_ready` ends the loss; in resize mode
    `slices_ready` lists only the survivors and the loss ends at the `scale_up` that brings the slice back.
    """
    open_: dict[int, float] = {}
    out: list[LostInterval] = []
    for e in events:
        if isinstance(e, FailureDetected):
            for s in e.slices_lost or (-1,):  # -1: the writer could not tell which slice
                open_.setdefault(s, e.time)
            continue
        if isinstance(e, ScaleUp):
            active = {*e.slices, *e.returning}
        elif isinstance(e, (SlicesReady, RunStarted)):
            active = set(e.slices)
        else:
            continue
        for s in list(open_):
            if s in active or (s == -1 and isinstance(e, SlicesReady)):
                out.append(LostInterval(s, open_.pop(s), e.time))
    out.extend(LostInterval(s, start, None) for s, start in open_.items())
    return sorted(out, key=lambda i: (i.slice, i.start))


def compile_intervals(events: Sequence[Event]) -> list[tuple[float, float]]:
    """(start, seconds) of each attempt's compile: the trainer compiles after restore_done, before the
    attempt's first step, and reports the time on that event."""
    return [(e.time, e.compile_s) for e in events if isinstance(e, RestoreDone) and e.compile_s > 0]


def checkpoint_blocking_intervals(events: Sequence[Event]) -> list[tuple[float, float]]:
    """(start, seconds) of each save's blocking part, which ends when checkpoint_saved is written."""
    return [(e.time - e.blocking_s, e.blocking_s) for e in events
            if isinstance(e, CheckpointSaved) and e.blocking_s > 0]
