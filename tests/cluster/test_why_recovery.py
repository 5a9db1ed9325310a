"""`status --why` while the JobSet recovers by itself, and when the trainer gave up for good (#43): the real
controllers' objects (tests/cluster/incidents_corpus/, stages of tests/realcluster/incident_story.py) on the
fake API server, the progress record written by the trainer's own ProgressWriter as its elastic loop ends
(trainer.elastic.loop.stop_record), and `elxpk workload status --why` as the user runs it. The same on the
real controllers, sampled during the story: tests/realcluster/test_incidents_real.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from elxpk.cluster.diagnosis.why_recovery import trainer_stopped
from elxpk_contract.exit_codes import EXIT_CODES, FAIL_JOB, SLICE_LOST, USER_ERROR, TrainerStopped
from elxpk_contract.progress_record import read_progress
from tests.cluster.captured import seed_stage
from tests.cluster.conftest import run_cli
from trainer.clock import SystemClock
from trainer.elastic.loop import stop_record
from trainer.elastic.progress import ProgressWriter

LOST = "process 1 (slice 1) was preempted (SIGTERM); the group stopped together at step 7"
GAVE_UP = ("elastic: 2 attempts in a row ended in class slice_lost with no checkpoint past step 8; stopping "
           "(--elastic-stop-on-repeat 2) instead of restarting again")


@pytest.fixture(autouse=True)
def wide_terminal(monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")


def trainer_ended(checkpoints: Path, error: Exception) -> None:
    """The progress record the trainer's primary process leaves when its run ends with `error`."""
    writer = ProgressWriter(str(checkpoints), SystemClock())
    writer.step_done(7, SystemClock().time(), 1)
    writer.finish(*stop_record(error))


def why(capsys, k, name: str) -> list[dict]:
    code, out, err = run_cli(capsys, "workload", "status", name, "--why", "-o", "json", *k)
    assert code == 0, err
    return list(json.loads(out)["why"])


def runnable(reasons: list[dict], name: str) -> None:
    """Every fix is a command as printed: the workload's own name, no placeholder, no `--previous` (there is
    none under restartPolicy Never)."""
    for reason in reasons:
        assert "NAME" not in reason["fix"] and "--previous" not in reason["fix"], reason
        for command in reason["fix"].split("`")[1::2]:
            assert command.startswith("elxpk workload "), reason


def test_a_lost_slice_being_recovered_says_so_and_suggests_no_fix(fake, capsys, k, tmp_path):
    """The story's `plain` workload after one pod exited 75 (its Job retries it): the trainer's record says
    it stopped with a lost slice. --why: recovering, from slice 0's exit, and no `trainer-stopped`."""
    name = seed_stage(fake, "plain_degraded", tmp_path)
    trainer_ended(tmp_path, TrainerStopped(SLICE_LOST, LOST))
    record = read_progress((tmp_path / "elxpk-progress.json").read_text())
    assert (record.state, record.exit_code, record.stopped, record.gave_up()) == ("failed", 75, LOST, False)
    reasons = why(capsys, k, name)
    assert reasons[0]["cause"] == "recovering", reasons
    assert "slice 0 lost (pod incidents-plain-slice-job-0-0-crsws, vm 0; exit 75 slice_lost)" in reasons[0]["text"]
    assert reasons[0]["text"].startswith("recovering by itself: ") and "since 20" in reasons[0]["text"]
    assert reasons[0]["fix"].startswith("nothing to do")
    assert "trainer-stopped" not in [r["cause"] for r in reasons]
    runnable(reasons, name)
    code, out, err = run_cli(capsys, "workload", "status", name, *k)
    assert code == 0, err
    assert "trainer stopped (failed, exit 75), the JobSet restarts it" in out and "trainer failed" not in out
    assert [line for line in out.splitlines() if line.endswith(" ")] == []  # piped: no padding after a line


def test_pods_running_again_before_the_trainer_steps_is_still_recovering(fake, capsys, k, tmp_path):
    """The story's restart 1, every pod running again, while the trainer's record still says it stopped with
    a lost slice (its new processes import, restore and compile before they step and write it): recovering,
    with the restart's number and budget, not "nothing is holding it back" nor a fix."""
    name = seed_stage(fake, "restarted", tmp_path)
    trainer_ended(tmp_path, TrainerStopped(SLICE_LOST, LOST))
    reasons = why(capsys, k, name)
    assert [r["cause"] for r in reasons] == ["recovering"], reasons
    # the victim in the trainer's own words, the pods that showed it being gone (#52: the replay's --why named
    # no victim once the restart had deleted them)
    assert reasons[0]["text"].startswith("recovering by itself: JobSet restart 1 of at most 2 (1 left), its pods "
                                         "running again and the trainer not stepping yet, after the trainer's stop "
                                         f"(exit 75 slice_lost: retryable, in its words: {LOST}); the trainer's last "
                                         "step: 7")
    restarted = ProgressWriter(str(tmp_path), SystemClock())  # the new process, as the trainer writes it
    for phase in ("restoring", "compiling"):  # its record no longer says stopped: still the recovery
        restarted.phase(phase)
        reasons = why(capsys, k, name)
        assert [r["cause"] for r in reasons] == ["recovering"], reasons
        assert f"its pods running again and the trainer {phase}, not stepping yet" in reasons[0]["text"]
    restarted.step_done(8, SystemClock().time(), 1)  # it steps: recovered
    assert why(capsys, k, name) == []


def test_a_trainer_that_gave_up_names_the_pod_to_read(fake, capsys, k, tmp_path):
    """The story's last stage: slice 0 of restart 1 exited 70 and the JobSet failed. The record of a trainer
    that gave up (--elastic-stop-on-repeat: 70) is the first reason, its fix the failed pod's own log."""
    name = seed_stage(fake, "failed", tmp_path)
    trainer_ended(tmp_path, TrainerStopped(USER_ERROR, GAVE_UP))
    reasons = why(capsys, k, name)
    assert reasons[0]["cause"] == "trainer-stopped", reasons
    assert reasons[0]["text"] == f"the trainer gave up for good (exit 70 user_error): {GAVE_UP}"
    assert f"`elxpk workload logs {name} --slice 0 --vm 0`" in reasons[0]["fix"]
    assert "recovering" not in [r["cause"] for r in reasons]
    runnable(reasons, name)


def test_a_retryable_stop_is_never_the_trainer_giving_up(fake, capsys, k, tmp_path):
    """The same failed JobSet with a record of a lost slice (75): the trainer did not give up; the failed
    Job says why the workload ended."""
    name = seed_stage(fake, "failed", tmp_path)
    trainer_ended(tmp_path, TrainerStopped(SLICE_LOST, LOST))
    causes = [r["cause"] for r in why(capsys, k, name)]
    assert "trainer-stopped" not in causes and "recovering" not in causes and "job-failed" in causes


@pytest.mark.parametrize("code", EXIT_CODES, ids=lambda c: c.name)
def test_only_a_code_the_job_fails_at_once_reads_as_giving_up(code, tmp_path):
    """Every exit code of the table, as the trainer records it when its loop ends with it."""
    writer = ProgressWriter(str(tmp_path), SystemClock())
    writer.finish("failed", "why", code.code)
    record = read_progress(writer.path.read_text())
    data = {**record.to_json(), "gave_up": record.gave_up()}
    assert bool(trainer_stopped(data, "train")) == (code.action == FAIL_JOB)
    assert trainer_stopped({**data, "exit_code": None, "gave_up": False}, "train") == []


def test_a_back_off_under_a_recovery_repeats_no_fix():
    """The Job controller's back-off is a step of the recovery: under `recovering` it keeps its words, not its
    fix, so --why names `workload events` once (the real cluster printed it twice, CI 2026-12-06)."""
    from elxpk.cluster.diagnosis.why_reason import Reason
    from elxpk.cluster.diagnosis.why_recovery import with_recovery

    healing = [Reason("recovering", "recovering by itself", "nothing to do; `elxpk workload events w`")]
    backoff = Reason("backoff", "Job w-worker-1 ... waits 40s", "nothing to do; `elxpk workload events w`")
    quota = Reason("quota", "short of quota", "raise it")
    assert [(r.cause, r.fix) for r in with_recovery(healing, [backoff, quota])] == [
        ("recovering", healing[0].fix), ("backoff", ""), ("quota", "raise it")]
    assert with_recovery([], [backoff, quota]) == [backoff, quota]  # no recovery: the back-off keeps its fix


def _preempted_with_its_preemptor(fake) -> tuple[dict, str]:
    """The captured Kueue preemption in the fake's store, with the preemptor's Workload beside it (the capture
    holds the preempted one only: here a copy of it under the UID Kueue names, as test_preemptor does)."""
    import copy

    from elxpk.cluster.objects.labels import KUEUE_JOB_UID
    from elxpk.cluster.records.preemptor import preemptor_uid
    from tests.cluster.captured import KINDS, load_captured

    objects = load_captured(fake, "preempted", "why_corpus")
    (preempted,) = objects["workloads"]
    uid = preemptor_uid(next(c["message"] for c in preempted["status"]["conditions"] if c["type"] == "Preempted"))
    high = copy.deepcopy(preempted)
    high["metadata"].update(uid=uid, name="jobset-why-high-1f2e3")
    high["metadata"]["ownerReferences"][0].update(name="why-high", uid="0b0b0b0b-high")
    high["metadata"]["labels"][KUEUE_JOB_UID] = "0b0b0b0b-high"  # its own JobSet's Workload, admitted
    high["status"]["conditions"] = [{"type": t, "status": "True", "reason": t, "message": "",
                                     "lastTransitionTime": "2026-12-03T13:32:54Z"} for t in ("QuotaReserved", "Admitted")]
    high["spec"].update(priorityClassRef={**high["spec"]["priorityClassRef"], "name": "high"}, priority=750)
    fake.store.put(KINDS["workloads"], high)
    assert uid is not None
    return objects, uid


def test_a_preemption_names_its_preemptor_not_its_uid(fake, capsys, k):
    """Issue 52 L5: Kueue names the preemptor by its Workload's UID only; --why names the Workload, its JobSet
    and priority (one LIST of the namespace's Workloads, only when a condition names a UID)."""
    _preempted_with_its_preemptor(fake)
    code, out, err = run_cli(capsys, "workload", "status", "why-low", "-n", "why-preempt", "--why", "-o", "json", *k)
    assert code == 0, err
    reasons = json.loads(out)["why"]
    assert reasons[0]["cause"] == "evicted", reasons
    assert reasons[0]["text"] == ("Kueue preempted the workload (InClusterQueue) to admit Workload "
                                  "why-preempt/jobset-why-high-1f2e3 (JobSet why-high, priority high (750))")


def test_a_kueue_readmission_is_no_jobset_restart(fake, capsys, k, tmp_path):
    """Issue 52 L5: after 9 JobSet restarts Kueue preempted the workload and admitted it again: the JobSet
    controller resumed its Jobs (Suspended False, ResumeJobs), no new restart attempt. --why said "JobSet
    restart 9 of at most 10"; it says Kueue admitted it again, and names the preemptor."""
    from tests.cluster.captured import KINDS

    objects, uid = _preempted_with_its_preemptor(fake)
    jobset, (workload,) = objects["jobset"], objects["workloads"]
    jobset["spec"]["suspend"] = False
    jobset["spec"]["failurePolicy"]["maxRestarts"] = 10
    jobset["status"]["restarts"] = 9
    jobset["status"]["conditions"] = [{"type": "Suspended", "status": "False", "reason": "ResumeJobs",
                                       "message": "jobset is resumed", "lastTransitionTime": "2026-12-03T13:33:20Z"}]
    for job in objects["jobs"]:
        job["metadata"]["labels"]["jobset.sigs.k8s.io/restart-attempt"] = "9"  # created before the preemption
        job["spec"]["suspend"] = False
        fake.store.put(KINDS["jobs"], job)
    fake.store.put(KINDS["jobset"], jobset)
    # readmitted: Kueue's eviction conditions cleared, its Requeued one kept (it still names the preemptor)
    workload["status"]["conditions"] = [c for c in workload["status"]["conditions"] if c["type"] == "Requeued"] + [
        {"type": t, "status": "True", "reason": t, "message": "", "lastTransitionTime": "2026-12-03T13:33:19Z"}
        for t in ("QuotaReserved", "Admitted")]
    fake.store.put(KINDS["workloads"], workload)
    code, out, err = run_cli(capsys, "workload", "status", "why-low", "-n", "why-preempt", "--why", "-o", "json", *k)
    assert code == 0, err
    reasons = json.loads(out)["why"]
    assert reasons and reasons[0]["cause"] == "recovering", reasons
    text = reasons[0]["text"]
    assert text.startswith("recovering by itself: Kueue admitted the workload again at 2026-12-03T13:33:20Z after "
                           "evicting it (a resume, not a JobSet restart: 9 of at most 10 so far)"), text
    assert "JobSet restart 9 of" not in text and f"UID: {uid}" not in text.split("; preempted to admit")[-1]
    assert "preempted to admit Workload why-preempt/jobset-why-high-1f2e3 (JobSet why-high" in text
    assert reasons[0]["fix"].startswith("nothing to do: Kueue admitted it again")


def test_a_readmission_whose_conditions_are_gone_names_kueue_from_its_event(fake, capsys, k, tmp_path):
    """Issue 52: Kueue preempted the workload and admitted it again, and its conditions say so no more (no
    Evicted, Preempted or Requeued): the pods are new, and the trainer's own stop names only the process that
    wrote it ("process 0 (slice 0) was preempted"), as if slice 0 were the victim. Kueue's Event of the eviction
    stays an hour: --why names the whole workload's preemption from it, dated by it, with the preemptor."""
    import time

    from elxpk_contract.exit_codes import PREEMPTED
    from tests.cluster.captured import KINDS, with_checkpoint_dir

    objects, _ = _preempted_with_its_preemptor(fake)
    objects = with_checkpoint_dir(objects, tmp_path)
    jobset, (workload,) = objects["jobset"], objects["workloads"]
    jobset["spec"]["suspend"] = False
    jobset["status"]["conditions"] = []
    fake.store.put(KINDS["jobset"], jobset)
    workload["status"]["conditions"] = [
        {"type": t, "status": "True", "reason": t, "message": "", "lastTransitionTime": "2026-12-03T13:33:19Z"}
        for t in ("QuotaReserved", "Admitted")]
    fake.store.put(KINDS["workloads"], workload)
    evicted_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 3))
    for event in objects["events"]:
        event.update(lastTimestamp=evicted_at, firstTimestamp=evicted_at)
        fake.store.put(KINDS["events"], event)
    said = "process 0 (slice 0) was preempted (SIGTERM) at step 7; saved step 7 on the way out"
    trainer_ended(tmp_path, TrainerStopped(PREEMPTED, said))
    code, out, err = run_cli(capsys, "workload", "status", "why-low", "-n", "why-preempt", "--why", "-o", "json", *k)
    assert code == 0, err
    reasons = json.loads(out)["why"]
    assert reasons and reasons[0]["cause"] == "recovering", reasons
    text = reasons[0]["text"]
    assert "after the workload preempted (by Kueue: EvictedDueToPreempted: Preempted to accommodate" in text, text
    assert f"since {evicted_at}" in text and "slice 0 was preempted" not in text, text
    assert "preempted to admit Workload why-preempt/jobset-why-high-1f2e3 (JobSet why-high" in text, text
