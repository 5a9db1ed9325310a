"""`elxpk report RUN_DIR --incidents FILE`: the cluster's incident record merged with the trainer's events.

The record is what `elxpk workload events --record FILE` kept (one incident per JSONL line: time, kind,
cause, exit code, slice, pod, node); the trainer's events are RUN_DIR/events.jsonl. One timeline,
oldest first, answers "which slice, which exit code, and what did the trainer do about it": each
incident is followed by the trainer's events up to the next incident, and each incident is matched to
the recovery that follows it (elxpk/runs/recoveries.py: one per fault, a group restart's new session
included, which writes no first_step_after_recovery) so its cost in time is known: from the incident to
that recovery's first new step, by the trainer's own records.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from elxpk.runs.recoveries import RecoveryTimeline
from elxpk_contract.event_records import Event

# A recovery's detection may be dated before the incident that caused it: a killed session is dated at its
# last record, and records on gs:// reach the store every --record-flush-seconds (30 by default).
DETECTION_LAG_S = 35.0


def unix_time(text: str | None) -> float | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


@dataclass(frozen=True)
class Entry:
    time: float | None
    source: str  # "cluster" or "trainer"
    what: str
    detail: dict

    def to_dict(self) -> dict:
        return {"time": self.time, "source": self.source, "what": self.what, **self.detail}


def merge(incidents: list[dict], events: tuple[Event, ...]) -> list[Entry]:
    """Cluster incidents and trainer events in one list, oldest first (undated incidents last)."""
    entries = [Entry(unix_time(i.get("time")), "cluster", i.get("kind", ""), dict(i)) for i in incidents]
    entries += [Entry(e.time, "trainer", e.NAME, e.to_json()) for e in events]
    return sorted(entries, key=lambda e: (e.time is None, e.time or 0.0, e.source != "cluster"))


def recovery_after(entries: list[Entry], index: int, recoveries: Sequence[RecoveryTimeline]) -> tuple[int, float] | None:
    """(the recovery's number from 1, seconds from incident `index` to its first new step) for the first
    recovery that stepped again after the incident and was detected no earlier than DETECTION_LAG_S before
    it; None when none did (an incident no recovery followed, or an undated one)."""
    start = entries[index].time
    if start is None:
        return None
    for number, rec in enumerate(recoveries, 1):
        if rec.first_step_s is None or rec.detected_at < start - DETECTION_LAG_S:
            continue
        stepped = rec.detected_at + rec.first_step_s
        if stepped > start:
            return number, stepped - start
    return None


def _describe(entry: Entry) -> str:
    d = entry.detail
    if entry.source == "trainer":
        step = f" at step {d['step']}" if d.get("step") is not None else ""
        return f"trainer  {entry.what}{step}"
    code = f" exit {d['exit_code']}/{d.get('reason', '')}" if d.get("exit_code") is not None else f" {d.get('reason', '')}"
    where = "".join(f" {k} {d[k]}" for k in ("slice", "pod", "node") if d.get(k) is not None)
    return f"cluster  {entry.what} ({d.get('cause', 'unknown')}){code}{where}"


def render(entries: list[Entry], recoveries: Sequence[RecoveryTimeline]) -> list[str]:
    cluster = [e for e in entries if e.source == "cluster"]
    causes: dict[str, int] = {}
    for e in cluster:
        causes[e.detail.get("cause", "unknown")] = causes.get(e.detail.get("cause", "unknown"), 0) + 1
    summary = ", ".join(f"{n} {c}" for c, n in sorted(causes.items())) or "none"
    lines = [f"incidents: {len(cluster)} ({summary}), merged with {len(entries) - len(cluster)} trainer events"]
    origin = next((e.time for e in entries if e.time is not None), None)
    for i, entry in enumerate(entries):
        at = "       ?" if entry.time is None or origin is None else f"{entry.time - origin:+8.1f}s"
        line = f"  {at}  {_describe(entry)}"
        if entry.source == "cluster":
            after = recovery_after(entries, i, recoveries)
            if after is not None:
                line += f"  -> trainer stepping again {after[1]:.1f} s later (recovery {after[0]})"
        lines.append(line)
    return lines


def to_json(entries: list[Entry], recoveries: Sequence[RecoveryTimeline]) -> list[dict]:
    out = []
    for i, entry in enumerate(entries):
        data = entry.to_dict()
        if entry.source == "cluster":
            after = recovery_after(entries, i, recoveries)
            data["recovered_after_s"] = None if after is None else after[1]
            data["recovery"] = None if after is None else after[0]  # its number in the report's recoveries
        out.append(data)
    return out
