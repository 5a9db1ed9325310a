"""The typed views of the API's objects (elxpk/cluster/objects/): each field read in one place, whatever the
answer leaves out. The API omits empty fields (omitempty) and a hand-written object may write them null:
for every nested part absent, null or empty, a view builds and reads the same default; a part that is there
reads as written. And `of` takes the dict or its view, so an object is read once however many readers it meets.
The captured objects of the why corpus (real control plane) build too."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from elxpk.cluster.objects.labels import is_pathways
from elxpk.cluster.objects.pods import Event, Node, Pod
from elxpk.cluster.objects.queues import AdmissionCheckObject, ClusterQueue, LocalQueue
from elxpk.cluster.objects.workloads import Job, JobSet, ProvisioningRequest, Workload

CORPUS = Path(__file__).parent / "why_corpus"
NOTHING = object()  # the key left out


def gaps(value: object) -> st.SearchStrategy:
    """The value itself, or the ways the API leaves it out: absent, null, empty."""
    empty = {} if isinstance(value, dict) else [] if isinstance(value, list) else ""
    return st.sampled_from([value, NOTHING, None, empty])


def obj(**parts: object) -> dict:
    return {k: v for k, v in parts.items() if v is not NOTHING}


@st.composite
def pods(draw) -> tuple[dict, dict]:
    """(a pod with gaps, what it holds) for the fields the views read."""
    labels = draw(gaps({"jobset.sigs.k8s.io/job-index": "1"}))
    meta = draw(gaps(obj(name="p", uid="u", labels=labels, ownerReferences=draw(gaps([{"uid": "j"}])))))
    term = draw(gaps({"exitCode": 77, "finishedAt": "2026-01-01T00:00:00Z"}))
    state = draw(gaps(obj(terminated=term)))
    statuses = draw(gaps([obj(name="c", restartCount=draw(gaps(3)), state=state)]))
    status = draw(gaps(obj(phase=draw(gaps("Running")), containerStatuses=statuses,
                           conditions=draw(gaps([{"type": "Ready", "status": "True"}])))))
    spec = draw(gaps(obj(nodeName=draw(gaps("n")), nodeSelector=draw(gaps({"k": "v"})))))
    return obj(metadata=meta, spec=spec, status=status), {"meta": meta, "status": status, "statuses": statuses,
                                                         "state": state, "term": term, "labels": labels}


def there(value: object) -> bool:
    return value is not NOTHING and bool(value)


@given(pods())
def test_a_pod_reads_what_it_holds_and_defaults_for_every_gap(case) -> None:
    raw, held = case
    pod = Pod.of(raw)
    assert Pod.of(pod) is pod
    assert pod.meta.name == ("p" if there(held["meta"]) else None)
    labelled = there(held["meta"]) and there(held["labels"])
    assert pod.meta.labels.get("jobset.sigs.k8s.io/job-index") == ("1" if labelled else None)
    assert pod.meta.owned_by("j") == (there(held["meta"]) and "ownerReferences" in held["meta"]
                                      and bool(held["meta"]["ownerReferences"]))
    containers = there(held["status"]) and there(held["statuses"])
    assert len(pod.containers) == (1 if containers else 0)
    if containers:
        terminated = pod.containers[0].terminated
        assert (terminated is not None) == (there(held["state"]) and there(held["term"]))
        assert terminated is None or (terminated.exit_code, terminated.finished) == (77, "2026-01-01T00:00:00Z")
        assert pod.containers[0].restarts in (0, 3)
    assert pod.ready == (there(held["status"]) and pod.phase == "Running" and bool(pod.conditions))


@given(gaps({"replicatedJobs": [{"name": "worker", "replicas": 2, "template": {"spec": {"parallelism": 4}}}],
             "failurePolicy": {"maxRestarts": 3}}), gaps({"restarts": 2, "conditions": []}))
def test_a_jobset_reads_its_replicated_jobs_and_counts(spec, status) -> None:
    jobset = JobSet.of(obj(metadata={"name": "w"}, spec=spec, status=status))
    assert JobSet.of(jobset) is jobset
    worker = jobset.replicated_job("worker")
    assert (worker is not None) == there(spec)
    assert worker is None or (worker.replicas, worker.job.parallelism, worker.job.pods) == (2, 4, 4)
    assert jobset.max_restarts == (3 if there(spec) else 0)
    assert jobset.restarts == (2 if there(status) else 0) and jobset.restarts_counted == 0


@given(gaps({"active": 1, "succeeded": 2, "conditions": [{"type": "Failed", "status": "True"}]}),
       gaps({"admission": {"clusterQueue": "cq"}, "admissionChecks": [{"name": "prov", "state": "Pending"}]}),
       gaps({"involvedObject": {"kind": "Job"}}))
def test_jobs_workloads_and_events_default_every_gap(job_status, workload_status, event) -> None:
    job = Job.of(obj(metadata={"name": "j"}, status=job_status))
    assert (job.active, job.succeeded, job.true("Failed") is not None) == \
        ((1, 2, True) if there(job_status) else (0, 0, False))
    assert job.spec.backoff_limit == 6 and job.attempt == 0
    workload = Workload.of(obj(metadata={"name": "w"}, status=workload_status))
    assert (workload.cluster_queue, [c.name for c in workload.checks]) == \
        (("cq", ["prov"]) if there(workload_status) else ("", []))
    found = Event.of(event if isinstance(event, dict) else {})
    assert (found.involved.kind, found.count, found.time) == ("Job" if there(event) else None, 1, None)


def test_the_captured_objects_build_and_read_as_the_api_wrote_them() -> None:
    for path in sorted(CORPUS.glob("*.json")):
        objects = json.loads(path.read_text())
        jobset = JobSet.of(objects["jobset"])
        assert jobset.meta.name == objects["jobset"]["metadata"]["name"]
        for raw in objects["pods"]:
            pod = Pod.of(raw)
            assert (pod.meta.uid, pod.phase) == (raw["metadata"]["uid"], raw["status"].get("phase"))
            assert len(pod.containers) == len(raw["status"].get("containerStatuses") or [])
        for raw in objects["jobs"]:
            assert Job.of(raw).failed == int(raw.get("status", {}).get("failed") or 0)
        for raw in objects["workloads"]:
            assert Workload.of(raw).meta.name == raw["metadata"]["name"]
        for raw in objects["nodes"]:
            assert Node.of(raw).labels == raw["metadata"]["labels"]
    assert ProvisioningRequest.of({}).conditions == ()


POD_SPEC = {"nodeSelector": {"cloud.google.com/gke-queued": "true"}, "priorityClassName": "high",
            "serviceAccountName": "sa", "containers": [{"name": "jax-tpu"}, {"name": "sidecar"}]}


@given(gaps([{"name": "pathways-head", "template": {"spec": {"template": {"spec": POD_SPEC}}}},
             {"name": "worker"}]),
       gaps([{"type": "Suspended", "status": "True"}, {"type": "Failed", "status": "False"},
             {"type": "Completed", "status": "True"}]))
def test_a_jobset_says_whether_it_runs_pathways_and_how_it_ended(rjobs, conditions) -> None:
    """One test of "is Pathways" for the API's answers (the view) and manifests (the dict); the end is the
    first True Completed or Failed condition; the pod template's fields read as written, or default."""
    raw = obj(metadata={"name": "w"}, spec=obj(replicatedJobs=rjobs), status=obj(conditions=conditions))
    jobset = JobSet.of(raw)
    assert jobset.pathways == is_pathways(raw) == there(rjobs)
    assert (jobset.end.type if jobset.end else None) == ("Completed" if there(conditions) else None)
    head = jobset.replicated_job("pathways-head")
    job = head.job if head is not None else None
    assert job is None or (job.node_selector, job.priority_class, job.service_account,
                           [c["name"] for c in job.containers]) == \
        ({"cloud.google.com/gke-queued": "true"}, "high", "sa", ["jax-tpu", "sidecar"])
    worker = jobset.replicated_job("worker")
    assert worker is None or (worker.job.node_selector, worker.job.priority_class, worker.job.containers) == \
        ({}, None, ())


@given(gaps([{"name": "jax-tpu"}, {"name": "sidecar"}]))
def test_a_pod_names_its_containers_in_order(containers) -> None:
    pod = Pod.of(obj(metadata={"name": "p"}, spec=obj(containers=containers)))
    assert pod.container_names == (("jax-tpu", "sidecar") if there(containers) else ())


@given(gaps({"clusterQueue": "cq"}), gaps({"pendingWorkloads": 3}),
       gaps({"admissionChecksStrategy": {"admissionChecks": [{"name": "a"}]}, "admissionChecks": ["b"]}))
def test_kueue_queues_and_checks_default_every_gap(lq_spec, lq_status, cq_spec) -> None:
    local = LocalQueue.of(obj(metadata={"name": "lq"}, spec=lq_spec, status=lq_status))
    assert (local.cluster_queue, local.pending) == ("cq" if there(lq_spec) else None,
                                                    3 if there(lq_status) else None)
    cluster = ClusterQueue.of(obj(metadata={"name": "cq"}, spec=cq_spec,
                                  status={"conditions": [{"type": "Active", "status": "False"}]}))
    assert cluster.checks == (("a", "b") if there(cq_spec) else ())  # v1beta2's strategy, then v1beta1's names
    assert [c.type for c in cluster.conditions] == ["Active"]
    assert AdmissionCheckObject.of({"spec": {"controllerName": "kueue.x-k8s.io/provisioning-request"}}).controller \
        == "kueue.x-k8s.io/provisioning-request"
    assert AdmissionCheckObject.of({}).controller is None
