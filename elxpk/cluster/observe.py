"""Fetch what `status` and `list` need with a bounded number of label-selector LIST calls.

`status NAME`: GET the JobSet, LIST its Jobs, LIST its Pods (pages of 500), LIST its Kueue Workload, plus one
discovery call for Kueue's version per process: 5 calls for 1 slice or 64, never one per pod.
`list`: LIST JobSets, Jobs, Pods and Kueue Workloads of the namespace once each, then group in memory.

Which pods: a slice's state comes from its Job's counts (active, ready, failed, succeeded); pods add only
their restarts and failures (restart_causes, pod_restarts). Under restartPolicy Never in every pod template
(what elxpk renders: a podFailurePolicy requires it) a container never restarts in place, so only a Failed
pod holds any: `status` then lists Failed pods only (a field selector). On 1,024 running TPU VMs that is
no pod of ~10 KB each instead of all of them, which the API server encodes and the client parses in full
(bench/bench_status_real.py). The one thing not seen: a disrupted pod during its grace period, while it
still runs; it is counted once it has failed. `events` reads every pod (fetch_objects).
"""

from __future__ import annotations

from elxpk.cluster.kube import Kube
from elxpk.cluster.labels import JOBSET_NAME, KUEUE_JOB_UID
from elxpk.cluster.status import WorkloadStatus, compute_status
from elxpk.errors import ClusterError, NotFoundError

JOBSET_MISSING = (
    "JobSet is not installed on this cluster: install the JobSet controller and CRD (the kubernetes-sigs/jobset "
    "release manifest, v0.10 or later; xpk's cluster create installs it), then retry"
)


def require_jobset(kube: Kube) -> None:
    if not kube.jobset_crd_served():
        raise ClusterError(JOBSET_MISSING)


def get_workload(kube: Kube, namespace: str, name: str) -> dict:
    """The JobSet named `name`; a clear error when it, or the JobSet API itself, is missing."""
    try:
        jobset = kube.get_jobset(namespace, name)
    except NotFoundError:
        require_jobset(kube)
        raise NotFoundError(f'workload "{name}" not found in namespace "{namespace}" '
                            "(`elxpk workload list` shows what exists)") from None
    return the_named_jobset(jobset, namespace, name)


def the_named_jobset(answer: object, namespace: str, name: str) -> dict:
    """`answer` when it is the JobSet `name` itself; ClusterError for anything else (a list, another object):
    a verb that deletes or kills acts only on the one object named."""
    meta = answer.get("metadata") if isinstance(answer, dict) else None
    if not isinstance(answer, dict) or answer.get("kind") != "JobSet" or not isinstance(meta, dict) \
            or meta.get("name") != name or meta.get("namespace", namespace) != namespace:
        what = answer.get("kind") if isinstance(answer, dict) else None
        raise ClusterError(f'asked for JobSet "{name}" in namespace "{namespace}", the API server answered '
                           f"with {what or 'something else'}; nothing was done")
    return answer


def fetch_objects(kube: Kube, namespace: str, name: str) -> tuple[dict, list[dict], list[dict], list[dict]]:
    """The JobSet, its Jobs, its Pods and its Kueue Workloads."""
    jobset = get_workload(kube, namespace, name)
    selector = f"{JOBSET_NAME}={name}"
    jobs = kube.list_jobs(namespace, selector)
    pods = kube.list_pods(namespace, selector)
    workloads = kube.list_kueue_workloads(namespace, f"{KUEUE_JOB_UID}={jobset['metadata'].get('uid', '')}")
    return jobset, jobs, pods, workloads


FAILED_PODS = "status.phase=Failed"


def counted_pods(jobsets: list[dict]) -> str | None:
    """The field selector of the pods whose restarts and failures `status` counts: Failed ones when every
    pod template of `jobsets` has restartPolicy Never (no restart in place), else None (every pod)."""
    for jobset in jobsets:
        for rjob in (jobset.get("spec") or {}).get("replicatedJobs") or []:
            pod_spec = (((rjob.get("template") or {}).get("spec") or {}).get("template") or {}).get("spec") or {}
            if pod_spec.get("restartPolicy", "Always") != "Never":
                return None
    return FAILED_PODS


def fetch_status(kube: Kube, namespace: str, name: str, now: float, *, with_progress: bool = False) -> WorkloadStatus:
    """`with_progress`: also read the trainer's progress record from the checkpoint dir the JobSet names."""
    jobset = get_workload(kube, namespace, name)
    selector = f"{JOBSET_NAME}={name}"
    jobs = kube.list_jobs(namespace, selector)
    pods = kube.list_pods(namespace, selector, counted_pods([jobset]))
    workloads = kube.list_kueue_workloads(namespace, f"{KUEUE_JOB_UID}={jobset['metadata'].get('uid', '')}")
    status = compute_status(jobset, jobs, pods, workloads, now)
    if not with_progress:
        return status
    import dataclasses

    from elxpk.cluster.progress import progress_of

    progress, problem = progress_of(jobset, now)
    return dataclasses.replace(status, progress=progress, progress_problem=problem)


def fetch_all(kube: Kube, namespace: str, now: float) -> list[WorkloadStatus]:
    try:
        jobsets = kube.list_jobsets(namespace)
    except NotFoundError:
        require_jobset(kube)
        raise
    if not jobsets:
        return []
    jobs = kube.list_jobs(namespace, JOBSET_NAME)
    pods = kube.list_pods(namespace, JOBSET_NAME, counted_pods(jobsets))
    workloads = kube.list_kueue_workloads(namespace)
    by_name: dict[str, tuple[list[dict], list[dict]]] = {}
    for job in jobs:
        by_name.setdefault(job["metadata"]["labels"][JOBSET_NAME], ([], []))[0].append(job)
    for pod in pods:
        by_name.setdefault(pod["metadata"]["labels"][JOBSET_NAME], ([], []))[1].append(pod)
    statuses = []
    for jobset in jobsets:
        own_jobs, own_pods = by_name.get(jobset["metadata"]["name"], ([], []))
        statuses.append(compute_status(jobset, own_jobs, own_pods, workloads, now))
    return statuses
