"""Issue 52 L7: `workload status` (chip-hours split by the progress record's totals, trainer/elastic/badput_meter.py)
and `elxpk report` (the run directory, elxpk/runs/report.py) split one run's lost time alike. The run's own
records are replayed through the trainer's ProgressWriter and BadputMeter, a new process for each session as a
group restart makes one, each carrying the previous process's record, and the published totals are compared
with the report's badput, key by key."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from elxpk.runs.report import build_report
from elxpk.runs.rundir import load_run
from elxpk_contract.progress_record import PROGRESS_FILE, read_progress
from tests.support.clock import ManualClock
from tests.support.run_writer import FakeRun, write_run
from trainer.elastic.badput_meter import BadputMeter
from trainer.elastic.progress import ProgressWriter


def _published_totals(run_dir, checkpoints) -> dict[str, float]:
    """The progress record's totals after the run's records went through the trainer's writer and meter,
    one process per session (run_started), each killed at the end of its records (exit 75, retryable)."""
    records = [("event", json.loads(line)) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    records += [("metric", json.loads(line)) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    records.sort(key=lambda r: (r[1]["time"], r[0] == "metric"))  # the order the trainer wrote them
    clock = ManualClock()
    writer = meter = None
    for kind, record in records:
        clock.now = record["time"]
        if kind == "event" and record["event"] == "run_started":
            if writer is not None:
                writer.finish("failed", "slice lost", exit_code=75)
            meter = BadputMeter()
            writer = ProgressWriter(str(checkpoints), clock, meter=meter, period_s=0.0)
        assert writer is not None and meter is not None
        meter.observe(kind, record)
        if kind == "metric":
            writer.step_done(record["step"] + 1, record["time"], 1)
    assert writer is not None
    writer.finish("done", exit_code=0)
    return read_progress((checkpoints / PROGRESS_FILE).read_text()).badput


@pytest.mark.parametrize("cold_restart", [False, True], ids=["in-process recovery", "group restart"])
def test_status_and_report_split_a_recovery_alike(tmp_path, cold_restart):
    """A group restart (each failure ends the process; a new one restores): report counted the gap from the
    failure to the new process's slices_ready as `waiting for a slice`, while the new process's meter, which
    never saw the failure, left it in `other`. Both now count waiting within a process only."""
    spec = replace(FakeRun(steps=40, failures=((23, 20), (33, 30))), cold_restart=cold_restart)
    run_dir = write_run(tmp_path / "run", spec)
    totals = _published_totals(run_dir, tmp_path / "checkpoints")
    report = build_report(load_run(run_dir))
    b = report.badput
    expected = {"productive": report.productive_s, "rewound": b.rewound_s, "restore": b.restore_s,
                "waiting": b.waiting_s, "compile": b.compile_s, "checkpoint": b.checkpoint_s}
    assert totals == pytest.approx(expected, abs=1e-6)
    assert b.waiting_s == pytest.approx(0.0 if cold_restart else 2 * spec.wait_s)
