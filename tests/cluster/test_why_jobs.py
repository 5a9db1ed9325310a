"""why_jobs.py (the Job controller's side of `--why`) on objects captured from the real control plane
(tests/cluster/why_corpus/backoff.json, failed_create.json: tests/realcluster/test_why_jobs_real.py), at
other moments than the capture's, and the back-off's arithmetic against the Job controller's
(pkg/controller/job/backoff_utils.go: 10 s doubled per failure, at most 10 min)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from elxpk.cluster.diagnosis.why import Reason, explain
from elxpk.cluster.diagnosis.why_jobs import (
    BACKOFF_MAX_S,
    backoff,
    backoff_wait_s,
    failed_create,
    finished_at,
)
from tests.cluster.test_why import captured_at, context_of, load


@given(st.integers(min_value=1, max_value=10_000))
def test_backoff_doubles_from_10_s_up_to_10_min(failures: int) -> None:
    wait = backoff_wait_s(failures)
    assert wait == min(10.0 * 2 ** (failures - 1), BACKOFF_MAX_S) if failures < 64 else wait == BACKOFF_MAX_S
    assert backoff_wait_s(failures + 1) >= wait
    assert backoff_wait_s(0) == 0.0


def _failed_of_slice_1(objects: dict) -> list[dict]:
    return [p for p in objects["pods"] if p["status"].get("phase") == "Failed"
            and p["metadata"]["labels"].get("jobset.sigs.k8s.io/job-index") == "1"]


def test_backoff_next_try_is_the_last_failure_plus_the_wait() -> None:
    objects = load("backoff")
    last = max(t for t in (finished_at(p) for p in _failed_of_slice_1(objects)) if t is not None)
    reasons = backoff("why-backoff", objects["jobs"], objects["pods"], last + 15, Reason)
    assert [r.cause for r in reasons] == ["backoff"]
    assert "next try in about 25s" in reasons[0].text  # 40 s after the third failure, 15 s of it gone
    later = backoff("why-backoff", objects["jobs"], objects["pods"], last + 100, Reason)
    assert "ended 1m00s ago" in later[0].text or "ended 60s ago" in later[0].text, later[0].text


def test_backoff_when_the_failed_pods_are_gone() -> None:
    """A force-deleted or evicted pod leaves the Job's count, not its time: an upper bound instead."""
    objects = load("backoff")
    gone = [p for p in objects["pods"] if p not in _failed_of_slice_1(objects)]
    now = captured_at(objects)
    job = next(j for j in objects["jobs"] if j["metadata"]["name"] == "why-backoff-worker-1")
    assert (job["status"]["failed"], job["status"].get("active", 0)) == (3, 0)  # as the Job controller left it
    [reason] = backoff("why-backoff", objects["jobs"], gone, now, Reason)
    assert "has no pod: after 3 failed pods the Job controller waits up to 40s" in reason.text, reason.text
    assert "its pod is gone, so when is not known" in reason.text and "at the latest" in reason.text


def test_backoff_is_named_while_the_jobs_status_still_counts_the_failed_pod_active() -> None:
    """The Job controller writes its status a sync after a pod fails: captured on the real control plane
    with 3 pods Failed and the Job still saying active 1, failed 2. The pods are the count."""
    objects = load("backoff")
    stale = [dict(j, status={**j["status"], "active": 1, "failed": 2})
             if j["metadata"]["name"] == "why-backoff-worker-1" else j for j in objects["jobs"]]
    last = max(t for t in (finished_at(p) for p in _failed_of_slice_1(objects)) if t is not None)
    [reason] = backoff("why-backoff", stale, objects["pods"], last + 15, Reason)
    assert "3 failed pods since its last success, so it waits 40s" in reason.text, reason.text
    running = [dict(p, status={**p["status"], "phase": "Running"}) if p is _failed_of_slice_1(objects)[0] else p
               for p in objects["pods"]]
    assert backoff("why-backoff", stale, running, last + 15, Reason) == []  # a pod of it runs: no back-off


def test_failed_create_needs_a_job_short_of_pods_and_an_event_newer_than_it() -> None:
    objects = load("failed_create")
    events = objects["events"]
    assert failed_create("why-sa", "why-sa", objects["jobs"], events, Reason)
    done = [dict(j, status={**j.get("status", {}), "active": 1}) for j in objects["jobs"]]
    assert failed_create("why-sa", "why-sa", done, events, Reason) == []  # its pods exist now
    old = [dict(e, lastTimestamp="2000-01-01T00:00:00Z", eventTime=None, firstTimestamp=None) for e in events]
    assert failed_create("why-sa", "why-sa", objects["jobs"], old, Reason) == []  # about an earlier Job
    reasons = explain(objects["jobset"], objects["jobs"], objects["pods"], objects["workloads"],
                      captured_at(objects), context_of(objects))
    assert [r.cause for r in reasons] == ["pod-create"]


def test_plain_status_past_the_threshold_names_it_with_one_more_call(fake, kube) -> None:
    """Stuck and not asked why: plain status reads the FailedCreate Events too (one LIST, only when a Job
    lacks pods), since a pod that cannot be created leaves no other trace."""
    from elxpk.cluster.verbs.observe import fetch_status
    from tests.cluster.captured import load_captured

    objects = load_captured(fake, "failed_create", "why_corpus")
    kube.kueue_version()
    before = len(fake.calls)
    status = fetch_status(kube, "why-sa", "why-sa", now=captured_at(objects), stuck_after_s=0)
    assert status.reason.startswith("the Job controller cannot create the pods of Job why-sa-slice-job-0"), status
    assert sum(1 for c in fake.calls[before:] if "/events" in c.path) == 1
    quiet = fetch_status(kube, "why-sa", "why-sa", now=captured_at(objects))  # not past any threshold asked
    assert quiet.reason == ""


def test_jobs_the_jobset_is_replacing_give_no_back_off_and_no_first_failure() -> None:
    """Issue 52 L4: the JobSet has counted its restart (status.restarts 1) and its Recreate has not yet removed
    the Jobs of attempt 0: slice 1's Job failed (its trainer stopped with its group, exit 75) and slice 0's
    lost its pod. Neither is a reason now: the restart answers them (it was `[job-failed]` naming slice 1, the
    wrong slice, and `[backoff]` for slice 0)."""
    import copy

    from elxpk.cluster.objects.labels import parse_time
    from tests.cluster.captured import load as story_stage

    objects = copy.deepcopy(story_stage("ignored"))  # attempt 0, both Jobs running, a failed pod of each replaced
    slice0, slice1 = objects["jobs"]
    slice1["status"]["conditions"].append({
        "type": "Failed", "status": "True", "reason": "PodFailurePolicy", "lastTransitionTime": "2026-12-01T21:57:00Z",
        "message": "Container trainer for pod default/incidents-slice-job-1-0-6p2g2 failed with exit code 75"})
    slice0["status"]["failed"] = 1
    pods = [p for p in objects["pods"] if p["status"]["phase"] == "Failed" or p["metadata"]["labels"][
        "jobset.sigs.k8s.io/job-index"] == "1"]  # slice 0's running pod gone: its Job is short of one
    now = parse_time("2026-12-01T21:57:05Z") or 0.0
    before = [r.cause for r in explain(objects["jobset"], objects["jobs"], pods, objects["workloads"], now)]
    assert before == ["job-failed", "backoff"]  # the JobSet has not counted a restart: they are the news
    objects["jobset"]["status"]["restarts"] = 1
    assert explain(objects["jobset"], objects["jobs"], pods, objects["workloads"], now) == []


def test_the_failed_job_named_is_the_victims_not_a_survivors_75() -> None:
    """Issue 52 L4: a JobSet failed for good after slice 0's VM was lost (its pod killed, exit 137): slice 1's
    process stopped with 75 when its peer went, and its Job failed first. --why names slice 0's Job, and says
    the earlier 75 is a survivor's; alone, a 75 is still the Job that failed first."""
    import copy

    from elxpk.cluster.diagnosis.why_jobs import first_failed
    from tests.cluster.captured import load as load_stage

    (victim,) = load_stage("failed")["jobs"]  # slice 0's Job, failed with exit code 70 at 21:56:36
    victim = copy.deepcopy(victim)
    survivor = copy.deepcopy(victim)
    survivor["metadata"].update(name="incidents-slice-job-1", uid="uid-slice-1")
    survivor["metadata"]["labels"]["jobset.sigs.k8s.io/job-index"] = "1"
    for job, code, at in ((victim, 137, "2026-12-01T21:56:40Z"), (survivor, 75, "2026-12-01T21:56:36Z")):
        for c in job["status"]["conditions"]:
            c["message"] = c["message"].replace("exit code 70", f"exit code {code}")
            c["lastTransitionTime"] = at
    (reason,) = first_failed("incidents", [survivor, victim], [], Reason)
    assert reason.text.startswith("failed: Job incidents-slice-job-0 of replicatedJob slice-job (PodFailurePolicy), "
                                  "exit 137"), reason.text
    assert reason.text.endswith("; Job incidents-slice-job-1 failed first, with 75: a survivor, its peer lost")
    (alone,) = first_failed("incidents", [survivor], [], Reason)
    assert alone.text.startswith("first failed: Job incidents-slice-job-1 ") and "survivor" not in alone.text
