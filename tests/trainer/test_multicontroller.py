"""Multi-controller backend (item 5c): one slice per process over jax.distributed on loopback.

A fault kills process 1 at step 6 (exit 137, as SIGKILL); jax aborts process 0 when the heartbeat
stops. A group restart (what a JobSet does; here this test's tiny supervisor) then cold-starts both
processes, which restore the last committed checkpoint through the same path as an in-process retry.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest

from elxpk.runs.report import build_report, render_text
from elxpk.runs.rundir import load_run as load_run_dir
from elxpk_contract.exit_codes import SLICE_LOST
from tests.support.loopback import free_port
from tests.support.processes import wait_group
from tests.support.runs import STEPS, read_jsonl, run_trainer
from tests.trainer.test_cold_restart import _flags

pytestmark = pytest.mark.slow



def _start_group(cfg, run_dir, repo_root, extra) -> list[subprocess.Popen]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    args = [sys.executable, "-m", "trainer", "--slice-backend", "multi-controller", "--num-processes", "2",
            "--coordinator", f"127.0.0.1:{port}", "--run-dir", str(run_dir), "--heartbeat-timeout-seconds", "15",
            *_flags(cfg), *extra]
    return [subprocess.Popen([*args, "--process-id", str(i)], cwd=repo_root, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True) for i in range(2)]


def test_group_restart_after_a_killed_process_restores_and_reproduces(reference_run, repo_root, tmp_path):
    """Killed, the group exits 137 and non-zero; restarted, it restores, reproduces the reference and exits 0;
    extended, it resumes from its final checkpoint and exits 0 again."""
    cfg = reference_run.cfg
    # The survivor cannot continue on its own: it exits 75, its line printed, once its collective reports the
    # dead peer (MultiControllerSlices.close skips jax's shutdown barrier, which waited for the peer and then
    # aborted it), or jax aborts it at the heartbeat timeout where the collective never noticed. Nothing else.
    codes, outputs = wait_group(_start_group(cfg, tmp_path, repo_root, ["--fault", "1@6"]), 180)
    assert codes[1] == 137 and codes[0] in (SLICE_LOST.code, -signal.SIGABRT), outputs[0][-3000:]
    assert (codes[0] == SLICE_LOST.code) == ("error: slice lost:" in outputs[0]), outputs[0][-3000:]
    codes, outputs = wait_group(_start_group(cfg, tmp_path, repo_root, ["--fault", "1@6"]), 180)  # fault already fired
    assert codes == [0, 0], outputs[0][-2000:]

    metrics = read_jsonl(tmp_path / "metrics.jsonl")  # written by process 0 only
    restores = [e for e in read_jsonl(tmp_path / "events.jsonl") if e["event"] == "restore_done"]
    # The group restores step 4 if its commit finished before the kill at step 6, else it starts over.
    assert len(restores) == 2 and restores[1]["step"] in (0, 4)
    resumed_at = restores[1]["step"]
    assert [r["step"] for r in metrics] == list(range(6)) + list(range(resumed_at, STEPS))
    first, second = {}, {}
    for record in metrics:
        (second if record["step"] in first else first)[record["step"]] = record["loss"]
    assert second == {s: first[s] for s in range(resumed_at, 6)}  # the cold start reproduced them exactly
    ref = reference_run.last_by_step()
    got = {r["step"]: r for r in metrics}
    a = np.array([float.fromhex(ref[s]["loss"]) for s in range(STEPS)])
    b = np.array([float.fromhex(got[s]["loss"]) for s in range(STEPS)])
    np.testing.assert_allclose(b, a, rtol=1e-6, atol=0)  # cross-process collectives may sum in another order

    # The finished run, extended: the group exits 0 again after a resume from its final checkpoint. (This was
    # tests/process/test_group_and_cli_exit_codes.py's own run of two groups, the same kind of run.)
    codes, outputs = wait_group(_start_group(cfg, tmp_path, repo_root, ["--fault", "1@6", "--steps", str(STEPS + 2)]),
                                180)
    assert codes == [0, 0], outputs[0][-2000:] + outputs[1][-2000:]
    assert [e for e in read_jsonl(tmp_path / "events.jsonl") if e["event"] == "restore_done"][-1]["step"] == STEPS
    assert [r["step"] for r in read_jsonl(tmp_path / "metrics.jsonl")] == (
        list(range(6)) + list(range(resumed_at, STEPS + 2)))  # nothing rewound: on from the final step
    # Every process of each of the three groups wrote its own start-up (issue 49), each phase once, in order.
    starts = [(e["process"], e["phase"]) for e in read_jsonl(tmp_path / "events.jsonl") if e["event"] == "startup"]
    for process in (0, 1):
        phases = [phase for p, phase in starts if p == process]
        assert phases.count("imports_done") == 3 and phases.count("executable_ready") == 3, phases


def test_a_host_due_to_die_dies_before_it_honours_a_pending_sigterm(reference_run, repo_root, tmp_path):
    """Slice 0's fault is due at step 0 and process 0 got SIGTERM before it (during its restore and compile,
    once `run_started` is recorded, the handler installed long before): it dies as the fault says (137), not
    preempted (77). A group whose peer died first and whose restart SIGTERMs the survivor must not be read
    as a preemption by the attempt history (trainer/elastic/attempt.py, before_step)."""
    import signal
    import time

    group = _start_group(reference_run.cfg, tmp_path, repo_root, ["--fault", "0@0"])
    deadline = time.monotonic() + 180  # a bound against a hang, no timing
    while not any(e["event"] == "run_started" for e in read_jsonl(tmp_path / "events.jsonl")):
        assert time.monotonic() < deadline and group[0].poll() is None, "process 0 never recorded run_started"
        time.sleep(0.05)
    group[0].send_signal(signal.SIGTERM)
    codes, outputs = wait_group(group, 180)
    assert codes[0] == 137, outputs[0][-2000:]
    events = [e["event"] for e in read_jsonl(tmp_path / "events.jsonl")]
    assert "preempted" not in events and "restore_done" in events, events
    assert (tmp_path / ".faults-fired" / "0").exists()


@pytest.mark.parametrize("signalled", [0, 1])
def test_a_sigterm_to_one_process_stops_the_whole_group_at_one_step(reference_run, repo_root, tmp_path, signalled):
    """A JobSet's pods hear SIGTERM one Job at a time, an evicted slice's alone: the process that hears it
    announces the group's stop, and every process stops at the same step boundary (trainer.elastic.group_stop),
    none left inside a collective for a peer that is gone. The signalled process exits 77 (preempted), the
    other 75 (its peer was lost); process 0's record says which, and every step before the stop was done.
    On the way out the whole group saves the stop step (trainer.elastic.drain: 30 s of grace cover a save of
    this state many times over), so the records say 0 steps lost, and a restart resumes there: nothing
    rewound, the same losses as the uninterrupted reference. Told that its grace period is 1 s (process 0's
    run), the group saves nothing, says why, and counts the steps back to the last periodic checkpoint."""
    import signal
    import time

    grace = ["--termination-grace-seconds", "1"] if signalled == 0 else []  # 30 s by default
    group = _start_group(reference_run.cfg, tmp_path, repo_root, ["--steps", "100000", *grace])
    deadline = time.monotonic() + 180  # a bound against a hang, no timing
    while len(read_jsonl(tmp_path / "metrics.jsonl")) < 3:
        assert time.monotonic() < deadline and all(p.poll() is None for p in group), "the group never trained"
        time.sleep(0.05)
    group[signalled].send_signal(signal.SIGTERM)
    codes, outputs = wait_group(group, 120)
    other = 1 - signalled
    assert (codes[signalled], codes[other]) == (77, 75), [o[-1500:] for o in outputs]
    events = read_jsonl(tmp_path / "events.jsonl")
    [stop] = [e for e in events if e["event"] in ("preempted", "failure_detected")]
    assert stop["heard_by"] == signalled, stop  # the record names the process that heard the signal
    if signalled == 0:
        assert (stop["event"], stop["signal"]) == ("preempted", "SIGTERM"), stop
        assert stop["heard_slice"] == 0, stop  # process 0's slice: the victim `report` names (#52)
    else:
        assert (stop["event"], stop["kind"], stop["slices_lost"]) == ("failure_detected", "peer_preempted", [1]), stop
        assert f"process 1 (slice 1) was preempted (SIGTERM); the group stopped together at step {stop['step']}" in (
            outputs[0]), outputs[0][-1500:]
    at = stop["step"]
    assert [m["step"] for m in read_jsonl(tmp_path / "metrics.jsonl")] == list(range(at))
    committed = [e["step"] for e in events if e["event"] == "checkpoint_committed"]
    progress = json.loads((tmp_path / "checkpoints" / "elxpk-progress.json").read_text())
    if signalled == 0:  # the record's own words name the victim, for --why once the pods are gone (#52)
        assert progress["stopped"].startswith(f"process 0 (slice 0) was preempted (SIGTERM) at step {at}"), progress
    report = render_text(build_report(load_run_dir(tmp_path)))  # `report` (run as a command in the TPU stories)
    if signalled == 0:  # 1 s of grace: no save, and the records say so and what it costs
        lost = at - (committed[-1] if committed else 0)
        assert (stop["saved"], stop["drain_steps_lost"]) == (False, lost), stop
        assert stop["save_skipped"].startswith("too little grace left to save: ") and "of the 1 s grace" in (
            stop["save_skipped"]), stop
        assert (progress["drain_saved"], progress["drain_steps_lost"]) == (False, lost), progress
        assert f"drain: stopped at step {at} (process 0 heard SIGTERM): not saved: too little grace" in (
            "\n".join(report)), report
        return  # one resume is enough to show the saved step is the one a restart continues from
    # The drain: saved at the stop step, committed by both processes, 0 steps lost, in both records.
    assert (stop["saved"], stop["drain_steps_lost"], stop["save_skipped"]) == (True, 0, ""), stop
    assert committed[-1] == at, committed
    assert (progress["checkpoint_step"], progress["drain_saved"], progress["drain_steps_lost"]) == (at, True, 0)
    assert f"saved step {at} on the way out; the restart rewinds nothing" in outputs[0], outputs[0][-1500:]
    assert f"drain: stopped at step {at} (process 1 heard SIGTERM): saved on the way out; 0 steps lost" in report
    assert at < STEPS - 1, f"the group stopped at step {at}, past the reference's {STEPS} steps"
    # The restart, in this process: every backend restores through the one path (trainer/elastic/attempt.py),
    # and a group's own restart is test_group_restart_after_a_killed_process_restores_and_reproduces's. Two
    # more trainer processes here would cost CI ~20 s for no other line of code.
    resumed = run_trainer(tmp_path)
    restores = resumed.events_named("restore_done")
    assert (restores[-1]["step"], restores[-1]["state_source"]) == (at, "checkpoint"), restores[-1]
    assert [m["step"] for m in resumed.metrics] == list(range(STEPS)), "a step rewound or skipped"  # 0 rewound
    ref = reference_run.last_by_step()
    assert [m["loss"] for m in resumed.metrics] == [ref[s]["loss"] for s in range(STEPS)]  # bit for bit
