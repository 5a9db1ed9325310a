"""The bodies of stories 2 and 3 of #31, shared by the workload shapes (test_stories_tpu.py,
test_stories_gpu_faults.py): each takes a `Story` of its shape and returns the figures line it prints."""

from __future__ import annotations

import json
import re
import subprocess
import time
import uuid
from pathlib import Path

from elxpk_contract.exit_codes import SLICE_LOST, USER_ERROR
from tests.realcluster.armed_kill import ArmedKill
from tests.realcluster.stories import STEPS, Story, jsonl, timed
from tools.testcluster.kubeapi import PODS

KILL_AFTER_CHECKPOINT = 4  # the kill comes once this checkpoint committed, so the resume has one to restore
# Story 2's run: the kill must land before it ends, and the wait for checkpoint 4 reads the run's records
# from gs:// while the trainer steps on. 20 steps to go ran out twice in CI (at loads of 10 to 20: the kill
# landed after the last step, or restored the last checkpoint with no step left); 44 give twice the margin.
KILLED_RUN_STEPS = 2 * STEPS


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:4]}"


def killed_slice_resumes_bitwise(story: Story, reference: Path | str, mode: str) -> str:
    """Story 2: "a slice" of the shape killed by `kill-slice --mode MODE` once checkpoint 4 committed, with
    KILLED_RUN_STEPS - 4 steps still to go; one JobSet restart, resumed from the newest checkpoint, bitwise
    equal to `reference` at every step they share, with every example once (`compare`), the kill and the
    restart in `events --watch --record`, the recovery in `report`."""
    took = timed()
    name = unique(f"st2{mode[0]}")
    run = story.create(name, steps=KILLED_RUN_STEPS, flags=("--max-restarts=3",))
    record = story.root / f"{name}-incidents.jsonl"
    watch = subprocess.Popen([str(story.elxpk_path), "workload", "events", name, "--watch", "--record", str(record),
                              "--kubeconfig", str(story.cluster.kubeconfig)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=story.env())
    armed = None
    try:
        # Armed once the pods exist (a delete plans on them before it asks), fired at the checkpoint.
        story.wait_for(f"the {story.shape.processes} pods of {name}",
                       lambda: len(story.cluster.items(PODS.format(ns="default"), labelSelector=(
                           f"jobset.sigs.k8s.io/jobset-name={name}"))) >= story.shape.processes, timeout=300)
        armed = ArmedKill([str(story.elxpk_path), "workload", "kill-slice", name, *story.shape.kill_args(mode),
                           "--kubeconfig", str(story.cluster.kubeconfig)], story.env())
        story.wait_for(f"checkpoint {KILL_AFTER_CHECKPOINT} committed",
                       lambda: KILL_AFTER_CHECKPOINT in story.committed(run), timeout=400)
        code, said = armed.fire()
        assert code == 0, said
        killed_at = time.time()
        done = story.wait_done(name)
        assert done.returncode == 0, story.explain(name, done)
        wall = took()
        watch.wait(timeout=120)  # --watch ends once the workload finishes
    finally:
        if armed is not None:
            armed.cancel()
        if watch.poll() is None:
            watch.kill()
            watch.wait()

    # The real controllers restarted the group; the trainer resumed from a checkpoint and finished. Which
    # controller: an evicted pod carries a DisruptionTarget condition, whose podFailurePolicy action is Ignore
    # whatever its exit code (77, or 75 where a peer heard the SIGTERM first), so when the evicted slice is the
    # whole group (the GPU shape's one node group) the Job controller replaces its pods and no JobSet restart
    # is spent; otherwise a surviving slice's trainer stops with its peer (75), and that counted failure makes
    # the JobSet restart the group once.
    whole_group = mode == "evict" and story.shape.slices == 1
    status = story.status(name)
    assert (status["state"], status["restarts"]) == ("Succeeded", 0 if whole_group else 1), status
    restores = [e for e in story.events(run) if e["event"] == "restore_done"]
    assert [r["state_source"] for r in restores] == ["init", "checkpoint"], restores
    resumed_from = restores[1]["step"]
    # The first attempt's last step, read from the record once it is over: the kill lands some time after
    # `kill-slice` returns (an eviction's SIGTERM, a kubelet's grace), and on a loaded host the trainer may
    # commit one more checkpoint in between, so a step read at the kill's return is no bound.
    last_before = max(m["step"] for m in story.metrics(run) if m["time"] < restores[1]["time"])
    assert KILL_AFTER_CHECKPOINT <= resumed_from <= last_before + 1, (resumed_from, last_before, restores)
    # The first step of the resumed attempt: the killed trainer may still record a step in the moments
    # between `kill-slice` returning and its SIGKILL (a kubelet's 2 s grace), so count from the restore.
    after = [m for m in story.metrics(run) if m["time"] > max(killed_at, restores[1]["time"])]
    first_after = min(after, key=lambda m: m["time"])
    assert first_after["step"] == resumed_from

    compared = story.elxpk("compare", str(reference), str(run), cluster_verb=False)
    assert compared.returncode == 0, compared.stdout + compared.stderr
    assert "loss: bitwise equal at every step" in compared.stdout
    assert compared.stdout.count("each exactly once") == 2

    # events: the killed slice's pod with its cause, and the JobSet restart.
    incidents = jsonl(record)
    assert whole_group or any(i["kind"] == "jobset_restart" for i in incidents), incidents
    killed_slice = story.shape.killed_slice
    killed_rows = [i for i in incidents if i.get("slice") in (killed_slice, str(killed_slice)) and i["kind"] in (
        "exit", "disruption", "evicted", "job_failed")]
    assert killed_rows, incidents
    assert all(i["cause"] in ("infra", "unknown") for i in killed_rows), killed_rows

    # report, on the real run dir: one recovery, its timeline and the steps it rewound. A whole group evicted
    # stopped on purpose: where process 0 heard its own SIGTERM by the step the group stopped at (77,
    # `preempted` recorded), the new session that followed makes it a recovery all the same (one per fault,
    # whichever process heard the signal: #43); where a peer heard it first, process 0 recorded the peer's
    # loss (`peer_preempted`), a recovery (docs/trainer.md, Preemption).
    reported = story.elxpk("report", str(run), "-o", "json", cluster_verb=False)
    assert reported.returncode == 0, reported.stderr
    report = json.loads(reported.stdout)
    if whole_group and not any(e.get("kind") == "peer_preempted" for e in story.events(run)):
        [preempted] = [e for e in story.events(run) if e["event"] == "preempted"]
        # An eviction's SIGTERM comes with the pod's 30 s grace: the group saved the step it stopped at on the
        # way out (trainer/elastic/drain.py) and resumed there, nothing rewound; the stop and the new session
        # are one recovery of kind `preempted`.
        assert (preempted["saved"], preempted["drain_steps_lost"]) == (True, 0), preempted
        assert [(d["saved"], d["drain_steps_lost"]) for d in report["drains"]] == [(True, 0)], report["drains"]
        assert resumed_from == preempted["step"], (preempted, restores)
        [recovery] = report["recoveries"]
        assert (report["sessions"], recovery["kind"], recovery["heard_by"]) == (2, "preempted", 0), report
        assert (recovery["failure_step"], recovery["restored_step"]) == (preempted["step"], resumed_from), report
        story.delete(name)
        return (f"story 2 --mode {mode} ({story.shape.name}): {wall} s from create to Succeeded; stopped with 77 "
                f"at step {preempted['step']}, resumed from {resumed_from} (steps rewound "
                f"{preempted['step'] - resumed_from}); kill to the next step "
                f"{round(first_after['time'] - killed_at, 1)} s; bitwise yes")
    [recovery] = report["recoveries"]
    assert recovery["restored_step"] == resumed_from
    rewound = recovery["rewound_steps"]
    assert rewound == max(0, recovery["failure_step"] - resumed_from)
    if mode == "evict":  # SIGTERM with the pod's 30 s grace: the group saved its stop step on the way out
        [stop] = [e for e in story.events(run) if e["event"] in ("preempted", "failure_detected")]
        assert (stop["saved"], stop["drain_steps_lost"], rewound) == (True, 0, 0), (stop, recovery)
        assert [(d["saved"], d["drain_steps_lost"]) for d in report["drains"]] == [(True, 0)], report["drains"]
    text = story.elxpk("report", str(run), cluster_verb=False).stdout
    assert re.search(rf"recoveries: 1\n\s+1\. .*restored step {resumed_from}", text), text
    story.delete(name)
    return (f"story 2 --mode {mode} ({story.shape.name}): {wall} s from create to Succeeded; steps rewound "
            f"{rewound}; kill to the next step {round(first_after['time'] - killed_at, 1)} s; bitwise yes")


def exit_75_is_retried_inside_its_budget(story: Story, name: str) -> str:
    """A retryable failure (75) on the first attempt: the JobSet restarts the group once, counted against
    --max-restarts 1, and the second attempt succeeds (mkdir is the once-only switch: the pods share this
    machine's /tmp as the pods of one group would share nothing else)."""
    took = timed()
    once = story.root / f"{name}-failed-once"
    story.plain_workload(name, f"mkdir {once} 2>/dev/null && exit 75; echo attempt-ok", "--max-restarts=1")
    done = story.wait_done(name, timeout=300)
    assert done.returncode == 0, story.explain(name, done)
    status = story.status(name)
    assert (status["state"], status["restarts"], status["restarts_counted"], status["restarts_left"]) == (
        "Succeeded", 1, 1, 0), status
    assert any("attempt-ok" in log for log in story.pod_logs(name).values())
    story.delete(name)
    return f"story 3 exit 75 ({story.shape.name}): {took()} s"


def exit_70_fails_the_jobset_at_once(story: Story, name: str) -> str:
    """A user error (70): the Job's podFailurePolicy fails it, the JobSet's rule fails the JobSet, and no
    restart is spent although --max-restarts 2 allows two."""
    took = timed()
    story.plain_workload(name, "exit 70", "--max-restarts=2")
    done = story.wait_done(name, timeout=300)
    assert done.returncode == 1, story.explain(name, done)
    status = story.status(name)
    assert (status["state"], status["restarts"]) == ("Failed", 0), status
    assert "FailJobSet" in status["message"], status
    story.delete(name)
    return f"story 3 exit 70 ({story.shape.name}): {took()} s"


def dies_on_every_attempt_stops_within_its_count(story: Story, name: str) -> str:
    """Story 5: "a slice" of the shape dies before step 10 on every attempt (`--fault=S@10` given 5 times: the
    run dir remembers each fired one, so each group restart fires the next). Each retry is a new process, so
    the trainer's attempt history on gs:// (trainer/elastic/attempt_history.py) counts them: with
    `--elastic-stop-on-repeat 2`, once 2 attempts in a row left the same newest checkpoint, the next start
    exits 70 on every process, whose FailJob ends the JobSet although --max-restarts 6 allows more, and
    `status --why` names the cause (`trainer-stopped`), the class and the step. Within its count: 2 restarts,
    or 3 when the first attempt's save of step 8 was still committing when the fault struck (the second
    attempt then saved it: progress, a new run of repeats)."""
    took = timed()
    shape = story.shape
    fault = f"--fault={shape.killed_slice}@10"
    run = story.create(name, flags=("--max-restarts=6", "--elastic-stop-on-repeat=2"), trainer_args=(fault,) * 5)
    done = story.wait_done(name, timeout=900)
    assert done.returncode == 1, story.explain(name, done)
    status = story.status(name)
    restarts = status["restarts"]
    # Failed by the trainer's 70, with budget left: no restart after the one that stopped.
    assert status["state"] == "Failed" and restarts in (2, 3) and status["restarts_left"] > 0, status
    assert "FailJobSet" in status["message"], status

    # The attempt history process 0 kept on gs://: one entry per attempt, each failed one a lost slice, the
    # last the stop; the last 2 restored the same step, the one nothing past was ever saved.
    history = json.loads(story.gs_text(name, "elxpk-attempts.json"))
    attempts = history["attempts"]
    assert len(attempts) == restarts + 1, (history, status)
    # Every attempt counted under one run identity: the JobSet's UID (ELXPK_RUN_ID from the pod label), the
    # same in every group restart; a later JobSet on the same directory would not count these.
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", history["run"]), history
    assert [a["ended"] for a in attempts] == [SLICE_LOST.name] * restarts + [USER_ERROR.name], history
    stuck_at = attempts[-1]["restored"]
    assert stuck_at in (4, 8) and [a["restored"] for a in attempts[-2:]] == [stuck_at] * 2, history
    assert f"no checkpoint past step {stuck_at}" in history["stopped"], history
    # Within its count: exactly 2 failed attempts left stuck_at as the newest checkpoint (each one's successor
    # restored it), so the third start stopped; none was read as a preemption.
    left_stuck = [a for a, successor in zip(attempts, attempts[1:], strict=False) if successor["restored"] == stuck_at]
    assert len(left_stuck) == 2, history
    # The run dir agrees: each attempt a new process 0 (its run_started), each failed one a fired fault.
    starts = [e for e in story.events(run) if e["event"] == "run_started"]
    assert len(starts) == len(attempts), starts
    assert story.fired_faults(run) == restarts
    # Every process of the last attempt exited 70 (the pods' logs, kept by the node after the pods are gone).
    logs = story.pod_logs(name)
    assert len(logs) == shape.processes * len(attempts), sorted(logs)
    stopped_pods = [pod for pod, log in logs.items() if "EXIT_CODE=70" in log]
    assert len(stopped_pods) == shape.processes, {pod: log[-800:] for pod, log in logs.items()}
    # The progress record `status` reads: the trainer's own verdict.
    progress = status["progress"]
    assert progress["state"] == "failed" and progress["stopped"] == history["stopped"], progress

    why = story.elxpk("workload", "status", name, "--why", "-o", "json")
    assert why.returncode == 0, why.stderr
    first = json.loads(why.stdout)["why"][0]
    assert first["cause"] == "trainer-stopped", first
    text = " ".join(story.elxpk("workload", "status", name, "--why").stdout.split())
    assert re.search(rf"\[trainer-stopped\] the trainer gave up for good \(exit 70 user_error\): elastic: 2 attempts in a row "
                     rf"ended in class "
                     rf"slice_lost with no checkpoint past step {stuck_at}\b.*--elastic-stop-on-repeat 2", text), text
    story.delete(name)
    return (f"story 5 ({shape.name}): {took()} s; stopped after {restarts} restarts of 6 allowed, "
            f"{len(attempts)} attempts, stuck at step {stuck_at}")
