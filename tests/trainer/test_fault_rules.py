"""One rule for every fault kind, an explicit revive step that wins, `K@restore` under live recovery, and
one rule for non-finite numbers: `python -m trainer` and `elxpk local run` as the user runs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.support.clock import ManualClock
from tests.support.runs import tiny_config

LOCAL_TINY = [f"--trainer-arg={a}" for a in ("--d-model=32", "--n-layers=1", "--n-heads=2", "--d-ff=64",
                                              "--seq-len=8", "--vocab-size=64", "--global-batch=4")]


def _run(argv: list[str], cwd, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ELXPK_")}
    return subprocess.run([sys.executable, *argv], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


def _one_line(proc: subprocess.CompletedProcess, start: str) -> str:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"error: {start}"), lines[0]
    return lines[0]


BEYOND = ["1@10", "1@mid:10", "1@data:10", "1@hang:10", "1@save:11", "1@2+10"]
WITHIN = ["1@9", "1@mid:9", "1@data:9", "1@hang:9", "1@save:10", "1@2+9"]


@pytest.mark.parametrize("spec", BEYOND)
def test_every_fault_kind_beyond_the_steps_is_refused_by_the_trainer(tmp_path, spec):
    proc = _run(["-m", "trainer", "--steps", "10", "--fault", spec, "--print-config"], tmp_path)
    line = _one_line(proc, f"--fault '{spec}':")
    assert "never reached with --steps 10" in line or "no checkpoint is saved at or after step 11" in line


@pytest.mark.parametrize("spec", WITHIN)
def test_the_last_reachable_step_of_every_fault_kind_is_accepted(tmp_path, spec):
    proc = _run(["-m", "trainer", "--steps", "10", "--fault", spec, "--print-config"], tmp_path)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("spec", BEYOND)
def test_every_fault_kind_beyond_the_steps_is_refused_by_local_run(tmp_path, spec):
    proc = _run(["-m", "elxpk.cli.main", "local", "run", "--run-dir", "r", "--steps", "10", "--mode", "resize",
                 "--kill-slice", spec, "--plain"], tmp_path)
    _one_line(proc, f"--kill-slice '{spec}':")
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "1e400", "-1e400"])
def test_non_finite_numbers_are_refused_alike(tmp_path, value):
    for flag in ("--revive-after", "--learning-rate", "--stall-timeout-seconds", "--dropout"):
        assert "not a finite number" in _one_line(
            _run(["-m", "trainer", f"{flag}={value}", "--print-config"], tmp_path), f"{flag} ")
    proc = _run(["-m", "elxpk.cli.main", "local", "run", "--run-dir", "r", f"--revive-after={value}", "--plain"],
                tmp_path)
    line = _one_line(proc, f"--revive-after '{value}'")
    assert "not a finite number" in line or value.startswith("-")  # durations take no sign at all
    assert not (tmp_path / "r").exists()


def test_an_explicit_revive_step_wins_over_revive_after():
    from elxpk_contract.faults import FaultSchedule
    from trainer.elastic.slices import SimulatedSlices

    clock = ManualClock()
    backend = SimulatedSlices(2, 2, FaultSchedule.parse(["1@3+6"], revive_after=1.0), clock)
    with pytest.raises(Exception, match="simulated loss of slice 1"):
        backend.fault_point("step", 3, [0, 1])
    clock.sleep(3600)  # far past --revive-after
    assert backend.healthy_slices() == [0]
    backend.fault_point("step", 5, [0])
    assert backend.revived([0]) == []
    backend.fault_point("step", 6, [0])
    assert backend.revived([0]) == [1]  # back at its revive step, not before


@pytest.mark.slow
def test_local_resize_trains_on_the_survivor_until_the_revive_step(tmp_path):
    """With the default --revive-after (1 s), `1@5+12` trains steps 5..11 on slice 0 alone."""
    proc = _run(["-m", "elxpk.cli.main", "local", "run", "--run-dir", "r", "--steps", "16", "--checkpoint-period",
                 "4", "--mode", "resize", "--kill-slice", "1@5+12", "--plain", *LOCAL_TINY], tmp_path)
    assert proc.returncode == 0, proc.stderr
    metrics = [json.loads(line) for line in (tmp_path / "r" / "metrics.jsonl").read_text().splitlines()]
    final = {m["step"]: m["slices"] for m in metrics}
    assert all(final[s] == [0] for s in range(5, 12)), final
    assert final[15] == [0, 1]


def test_restore_fault_fires_at_a_live_recovery(tmp_path):
    """`0@restore` under live recovery strikes the next restore of the state: the rebuild from the survivors
    after slice 1's loss. The run then rebuilds again from slice 1 and finishes."""
    from elxpk.runs.rundir import load_run
    from elxpk_contract.event_records import FailureDetected, RestoreDone
    from trainer.elastic.loop import train

    cfg = tiny_config(tmp_path, steps=8, checkpoint_period=4, recovery="live", fault=("1@5", "0@restore"),
                      revive_after=0.0)
    result = train(cfg)
    assert result.final_step == 8
    run = load_run(tmp_path)
    failures = run.events_of(FailureDetected)
    assert [f.error.split(" while ")[-1] if "restoring" in f.error else "step" for f in failures][:2] == \
        ["step", "restoring step 5"]
    assert [r.state_source for r in run.events_of(RestoreDone)][-1] == "live"
