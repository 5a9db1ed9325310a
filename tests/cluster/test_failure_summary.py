"""`workload events`' closing lines: failures grouped by cause, and "no progress since step S" from the
trainer's progress record (issue 23: a retry budget that knows causes), through the CLI."""

from __future__ import annotations

import pytest

from elxpk.cluster.failure_summary import summary_lines
from elxpk.cluster.incidents import Incident
from tests.cluster.conftest import START, run_cli, running
from tests.cluster.test_incidents import _pod, _with_checkpoint_dir, _write_progress


@pytest.fixture(autouse=True)
def wide_terminal(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")


def test_exits_after_the_last_step_are_failures_with_no_progress(fake, clock, capsys, k, tmp_path):
    ctl = running(fake, clock, _with_checkpoint_dir(str(tmp_path), slices=3, vms=1))
    _write_progress(tmp_path)  # step 130 done at START - 30: every exit below comes after it
    for slice_index in (0, 1):
        clock.now += 60
        ctl.crash_pod(_pod(ctl, slice_index), exit_code=75)
    clock.now += 60
    ctl.crash_pod(_pod(ctl, 2), exit_code=137, reason="OOMKilled")
    code, out, err = run_cli(capsys, "workload", "events", "train", *k)
    assert code == 0, err
    assert len(out.splitlines()) == 3  # stdout: one line per incident; the summary is a note on stderr
    lines = err.splitlines()
    assert "# failures by cause: slice_lost 2, exit 137 1" in lines
    assert ("# no progress since step 130: 2 slice_lost failures since the trainer's last completed step"
            in lines)
    code, out, err = run_cli(capsys, "workload", "events", "train", "-o", "json", *k)
    assert "failures by cause" not in out + err  # JSON: the incidents alone


def _exit(code: int, time: str) -> Incident:
    return Incident(id=time, time=time, kind="exit", cause="infra", reason="Error", exit_code=code)


def test_exits_before_the_last_step_made_progress():
    progress = {"steps_done": 40, "step_time": START}
    before, after = "2000-01-01T00:00:00Z", "2100-01-01T00:00:00Z"
    assert summary_lines([_exit(75, before), _exit(75, before), _exit(76, after)], progress) == [
        "failures by cause: slice_lost 2, stalled 1"]
    assert summary_lines([_exit(76, after), _exit(76, after)], {"steps_done": 0, "step_time": None})[1] == (
        "no progress since step 0: 2 stalled failures since the trainer's last completed step")
    assert summary_lines([_exit(76, after), _exit(76, after)], None) == ["failures by cause: stalled 2"]
    assert summary_lines([], progress) == []
