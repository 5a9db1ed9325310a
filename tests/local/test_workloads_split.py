"""One run directory holding several workloads' sessions (elxpk/runs/workloads.py): any sequence of sessions,
each under a run id, splits into the workloads whose records are exactly their own sessions' records."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from elxpk.runs.rundir import Run
from elxpk.runs.step_columns import MetricColumns
from elxpk.runs.workloads import split_workloads
from elxpk_contract.records import Metric, make_event

sessions = st.lists(st.tuples(st.sampled_from(["", "uid-a", "uid-b", "uid-c"]), st.integers(0, 5)),
                    min_size=1, max_size=8)


@settings(max_examples=100, deadline=None)
@given(sessions)
def test_any_sessions_split_by_run_id_keep_each_record_with_its_own_session(plan):
    events, metrics, owner_of_step_record = [], MetricColumns(), []
    t = 1_000.0
    for n, (run_id, steps) in enumerate(plan):
        events.append(make_event("run_started", t, 0, run_id=run_id))
        for step in range(steps):
            t += 1.0
            metrics.append(Metric(step=step, loss=(1.0 + n).hex(), lr=0.1, step_time_s=0.5, examples=(step, step + 1),
                                  slices=(0,), time=t))
            owner_of_step_record.append(run_id)
        events.append(make_event("checkpoint_committed", t + 0.5, steps))
        t += 10.0
    run = Run(path=Path("."), metrics=metrics, events=tuple(events), info=None, damaged_lines=0)
    parts = split_workloads(run)
    ids = list(dict.fromkeys(run_id for run_id, _ in plan))
    if len(ids) == 1:
        assert len(parts) == 1 and parts[0][1] is run
        return
    assert [w.run_id for w, _ in parts] == ids  # oldest first, by first appearance
    for workload, part in parts:
        mine = [i for i, (run_id, _) in enumerate(plan) if run_id == workload.run_id]
        assert workload.sessions == len(mine)
        assert len(part.events) == 2 * len(mine)  # each session's run_started and its commit, nothing else
        assert len(part.metrics) == sum(plan[i][1] for i in mine)
        assert owner_of_step_record.count(workload.run_id) == len(part.metrics)
    assert sum(len(p.metrics) for _, p in parts) == len(metrics)
    assert sum(len(p.events) for _, p in parts) == len(events)
