"""The JobSet controller's JobCreationFailed Event read into a `status --why` reason (elxpk/cluster/
job_rejections.py). The messages are the controller's own words, recorded on the real control plane
(tests/realcluster/test_job_rejected_real.py runs the same cases live)."""

from __future__ import annotations

from elxpk.cluster.diagnosis.job_rejections import event_selector, jobs_missing, rejection_reasons

RESTART_POLICY = ('job "run-1-worker-0" creation failed with error: Job.batch "run-1-worker-0" is invalid: '
                  'spec.template.spec.restartPolicy: Invalid value: "OnFailure": only "Never" is supported when '
                  'podFailurePolicy is specified')
TWO_FIELDS = ('job "run-1-worker-1" creation failed with error: Job.batch "run-1-worker-1" is invalid: '
              '[spec.managedBy: Invalid value: "x": must be a domain-prefixed path (such as "acme.io/foo"), '
              'spec.successPolicy.rules[0]: Required value: at least one of succeededCount or succeededIndexes '
              'must be specified]')


def jobset(*rjobs: tuple[str, int]) -> dict:
    return {"metadata": {"name": "run-1"},
            "spec": {"replicatedJobs": [{"name": n, "replicas": r} for n, r in rjobs]}}


def event(message: str, when: str = "2026-01-01T00:00:00Z", reason: str = "JobCreationFailed") -> dict:
    return {"reason": reason, "message": message, "lastTimestamp": when, "count": 3}


def test_the_refused_field_is_named_in_the_jobsets_terms():
    (reason,) = rejection_reasons(jobset(("pathways-head", 1), ("worker", 2)), [event(RESTART_POLICY)])
    assert reason.cause == "job-rejected"
    assert "spec.replicatedJobs[1].template.spec.template.spec.restartPolicy" in reason.text
    assert "pathways-head may run alone" in reason.text and "replicatedJob worker" in reason.text
    assert reason.detail == f"JobSet controller (3x): {RESTART_POLICY}"
    assert "workload validate" in reason.fix and "elxpk workload delete run-1" in reason.fix


def test_every_field_of_one_refusal_is_named():
    (reason,) = rejection_reasons(jobset(("worker", 2)), [event(TWO_FIELDS)])
    assert "spec.replicatedJobs[0].template.spec.managedBy" in reason.text
    assert "spec.replicatedJobs[0].template.spec.successPolicy.rules[0]" in reason.text


def test_one_reason_per_replicated_job_from_its_newest_event():
    other = RESTART_POLICY.replace("worker", "worker-b")
    found = rejection_reasons(jobset(("worker", 1), ("worker-b", 1)), [
        event(TWO_FIELDS.replace("worker-1", "worker-0"), "2026-01-01T00:00:00Z"),
        event(RESTART_POLICY, "2026-01-01T00:05:00Z"), event(other)])
    assert len(found) == 2
    assert "restartPolicy" in found[0].text and "managedBy" not in found[0].text  # the newest of worker's
    assert "replicatedJob worker-b" in found[1].text  # the longest replicatedJob name that fits wins


def test_other_events_and_other_jobsets_jobs_are_not_reasons():
    assert rejection_reasons(jobset(("worker", 1)), [event(RESTART_POLICY, reason="FailedCreate"),
                                                      event(RESTART_POLICY.replace("run-1", "run-10")),
                                                      event("something else")]) == []


def test_the_events_are_read_only_when_a_job_is_missing():
    spec = jobset(("pathways-head", 1), ("worker", 2))
    assert jobs_missing(spec, [{}, {}])
    assert not jobs_missing(spec, [{}, {}, {}])
    assert event_selector("run-1", "u-1") == \
        "involvedObject.kind=JobSet,involvedObject.name=run-1,involvedObject.uid=u-1,reason=JobCreationFailed"
