"""Slice-health intervals over wall time, from events (for the report's timeline plot and JSON)."""

from __future__ import annotations

from dataclasses import dataclass

from elxpk.runs.recoveries import lost_slices

_ACTIVE_KEYS = ("active_slices", "active", "slices")


@dataclass(frozen=True)
class LostInterval:
    slice: int
    start: float  # unix seconds
    end: float | None  # None: still lost when the run ended


def _active(event: dict) -> set[int] | None:
    for key in _ACTIVE_KEYS:
        value = event.get(key)
        if isinstance(value, (list, tuple)) and all(isinstance(v, int) for v in value):
            return set(value)
    return None


def lost_intervals(events: tuple[dict, ...] | list[dict]) -> list[LostInterval]:
    """When each slice was lost: from its failure until an event shows it active again.

    In pause-resume the run waits for all slices, so `slices_ready` ends the loss; in resize mode
    `slices_ready` lists only the survivors and the loss ends at the `scale_up` that brings the slice back.
    """
    open_: dict[int, float] = {}
    out: list[LostInterval] = []
    for e in events:
        t = e.get("time")
        if not isinstance(t, (int, float)):
            continue
        name = e.get("event")
        if name == "failure_detected":
            for s in lost_slices(e) or (-1,):  # -1: the writer did not say which slice
                open_.setdefault(s, float(t))
        elif name in ("slices_ready", "scale_up", "run_started"):
            active = _active(e)
            for s in list(open_):
                if active is None and name == "slices_ready" or active is not None and s in active:
                    out.append(LostInterval(s, open_.pop(s), float(t)))
    out.extend(LostInterval(s, start, None) for s, start in open_.items())
    return sorted(out, key=lambda i: (i.slice, i.start))
