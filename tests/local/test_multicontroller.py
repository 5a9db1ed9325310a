"""Multi-controller: one process per slice over jax.distributed, SIGKILL one, restart the group.

The resumed losses must equal an uninterrupted multi-controller run bit for bit. (They are compared with
a multi-controller reference, not the in-process one: gloo's cross-process reduction order differs in the
last bit from the single-process one, and training amplifies that.)
"""

from __future__ import annotations

import json

import pytest

from tests.local.test_local_run import PERIOD, TINY_FLAGS, run_cli

pytestmark = pytest.mark.slow
STEPS, KILL = 30, 14


def _run(run_dir, *extra):
    return run_cli("local", "run", "--run-dir", run_dir, "--mode", "multi-controller", "--steps", STEPS,
                   "--checkpoint-period", PERIOD, "--plain", "--revive-after", "0", *extra, *TINY_FLAGS)


def test_group_restart_resumes_bit_identically(tmp_path):
    ref, killed = tmp_path / "mc-reference", tmp_path / "mc-killed"
    code, out, err = _run(ref, "--no-faults")
    assert code == 0, out + err
    code, out, err = _run(killed, "--kill-slice", f"1@{KILL}")
    assert code == 0, out + err
    assert f"slice 1 lost at step {KILL}" in out and "Traceback" not in out + err
    # the supervisor restarted the group once: two attempts' logs per process
    assert sorted(p.name for p in (killed / "logs").iterdir()) == [
        "attempt1-process0.log", "attempt1-process1.log", "attempt2-process0.log", "attempt2-process1.log"]

    code, out, _ = run_cli("report", killed, "-o", "json", "--no-png")
    report = json.loads(out)
    assert len(report["recoveries"]) == 1 and report["sessions"] == 2
    rec = report["recoveries"][0]
    assert rec["lost_slices"] == [1] and rec["restored_step"] % PERIOD == 0
    # --recovery live is the default, but jax aborted the survivors: the checkpoint, and the reason said.
    assert rec["state_source"] == "checkpoint" and "multi-controller" in rec["live_fallback"]
    assert rec["first_step_s"] is not None and rec["first_step_s"] > rec["slices_ready_s"] >= 0

    code, out, _ = run_cli("compare", ref, killed, "-o", "json")
    result = json.loads(out)
    assert code == 0, result["failures"]
    assert result["bitwise_equal"] and result["common_steps"] == STEPS
