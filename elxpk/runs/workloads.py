"""One run directory, several workloads: the sessions of each run id kept apart.

A workload created again under the same name (the README's try-it block run twice) writes its records
beside the first one's: the run directory is derived from the checkpoint directory, not from the JobSet.
Each session's `run_started` carries the run's identity (`run_id`: the JobSet's UID, the same in every
group restart of one JobSet), so the records split by it: a session runs from its `run_started` to the
next one, and every event and step record belongs to the session it falls in by time (the records of one
run are written in time order, and two workloads of one name never run at once). Records from before the
first `run_started` belong to the first session. A trainer that wrote no run id ("", a local run, an
older trainer) makes one workload of all its sessions, as before.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, replace

from elxpk.runs.rundir import Run
from elxpk.runs.step_columns import MetricColumns
from elxpk.runs.words import plural
from elxpk_contract.event_records import RunStarted


@dataclass(frozen=True)
class Workload:
    run_id: str
    sessions: int
    first_time: float  # its first run_started
    steps: int  # distinct steps it recorded

    def to_dict(self) -> dict:
        return {"run_id": self.run_id, "sessions": self.sessions, "started_at": self.first_time, "steps": self.steps}


def split_workloads(run: Run) -> list[tuple[Workload, Run]]:
    """The run's workloads, oldest first, each with the records of its sessions only. A run with one run
    id (or none) comes back whole."""
    starts = sorted((e for e in run.events if isinstance(e, RunStarted)), key=lambda e: e.time)
    if len({e.run_id for e in starts}) <= 1:
        return [(_summary(starts[0].run_id if starts else "", starts, run), run)]
    times = [e.time for e in starts]

    def owner(at: float) -> str:  # the run id of the session that `at` falls in
        return starts[max(0, bisect.bisect_right(times, at) - 1)].run_id

    order: list[str] = list(dict.fromkeys(e.run_id for e in starts))  # by first appearance
    found = []
    for run_id in order:
        events = tuple(e for e in run.events if owner(e.time) == run_id)
        metrics = MetricColumns()
        for i in range(len(run.metrics)):
            if owner(run.metrics.time[i]) == run_id:
                metrics.append(run.metrics.record(i))
        part = replace(run, metrics=metrics, events=events)
        mine = [e for e in starts if e.run_id == run_id]
        found.append((_summary(run_id, mine, part), part))
    return found


def _summary(run_id: str, starts: list[RunStarted], run: Run) -> Workload:
    return Workload(run_id=run_id, sessions=len(starts), first_time=starts[0].time if starts else 0.0,
                    steps=len(run.final_indices()))


def others_line(others: list[Workload], reported: Workload) -> str:
    """The line that says which workload a report is of, when the directory holds more than one."""
    names = "; ".join(f"run id {w.run_id or '(none)'}: {plural(w.sessions, 'session')}, {plural(w.steps, 'step')}"
                      for w in others)
    return (f"this report is of run id {reported.run_id or '(none)'} (the newest workload: its JobSet's UID); "
            f"the run directory also holds the records of {plural(len(others), 'earlier workload')} ({names}), "
            "left out")
