"""`report` counts what really happened: a recovery interrupted by another failure is not "not recovered",
and a session killed without a record (SIGKILL, no failure_detected) is a recovery whose rewind the report
counts. The rewinds of the recoveries add up to the report's own count of rewound executions."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from tests.support.runs import tiny_config

TINY = ["--checkpoint-period", "25", "--d-model", "32", "--n-layers", "1", "--n-heads", "2", "--d-ff", "64",
        "--seq-len", "8", "--vocab-size", "64", "--global-batch", "4", "--run-dir", "r"]


def _report(run_dir):
    from elxpk.runs.report import build_report
    from elxpk.runs.rundir import load_run

    return build_report(load_run(run_dir))


@pytest.mark.slow
def test_sigkill_and_cold_restart_is_a_recovery_with_its_rewind(tmp_path):
    argv = [sys.executable, "-m", "trainer", "--steps", "400", *TINY]
    first = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    metrics = tmp_path / "r" / "metrics.jsonl"
    try:
        deadline = time.monotonic() + 300
        while not (metrics.exists() and len(metrics.read_text().splitlines()) >= 60):
            assert first.poll() is None and time.monotonic() < deadline, "the first session ended on its own"
            time.sleep(0.05)
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    assert subprocess.run(argv, cwd=tmp_path, capture_output=True, timeout=300).returncode == 0
    report = _report(tmp_path / "r")
    (rec,) = report.recoveries
    assert rec.undetected and rec.cold_restart and rec.complete
    assert rec.rewound_steps == report.executed - report.steps > 0
    assert "session ended unannounced (killed)" in rec.describe() and "not recovered" not in rec.describe()


def test_a_recovery_interrupted_by_a_restore_fault_is_not_called_unrecovered(tmp_path):
    from trainer.elastic.loop import train

    cfg = tiny_config(tmp_path, steps=12, checkpoint_period=4, fault=("1@6", "0@restore"), revive_after=0.0)
    train(cfg)
    report = _report(tmp_path)
    first, second = report.recoveries
    assert first.interrupted and not first.complete and second.complete
    assert "not recovered" not in first.describe() and "interrupted by another failure" in first.describe()
    assert sum(r.rewound_steps or 0 for r in report.recoveries) <= report.executed - report.steps
