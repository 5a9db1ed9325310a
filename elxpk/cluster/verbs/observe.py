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

import dataclasses
from collections.abc import Callable, Iterable, Sequence

from elxpk.cluster.api.kube import Kube
from elxpk.cluster.diagnosis import why as why_mod
from elxpk.cluster.diagnosis.job_rejections import event_selector, jobs_missing, rejection_reasons
from elxpk.cluster.diagnosis.why import Context
from elxpk.cluster.diagnosis.why_jobs import FAILED_CREATE, short_of_pods
from elxpk.cluster.diagnosis.why_recovery import (
    NOT_SELF_HEALING,
    readmitted_at,
    recovering,
    trainer_stopped,
    with_recovery,
)
from elxpk.cluster.objects.labels import ACCELERATOR, JOBSET_NAME, KUEUE_JOB_UID, KUEUE_QUEUE
from elxpk.cluster.objects.meta import EMPTY, Meta
from elxpk.cluster.objects.pods import Node, Pod
from elxpk.cluster.objects.queues import LocalQueue
from elxpk.cluster.objects.workloads import Job, JobSet, Workload
from elxpk.cluster.records import preemptor
from elxpk.cluster.records.chips import workload_accelerator
from elxpk.cluster.records.lost_slice import Fault, kueue_event_faults, kueue_fault
from elxpk.cluster.records.progress import progress_of
from elxpk.cluster.records.status import WorkloadStatus, compute_status
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
        kube.require_namespace(namespace)
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


def counted_pods(jobsets: Iterable[dict | JobSet]) -> str | None:
    """The field selector of the pods whose restarts and failures `status` counts: Failed ones when every
    pod template of `jobsets` has restartPolicy Never (no restart in place), else None (every pod)."""
    for jobset in map(JobSet.of, jobsets):
        for rjob in jobset.replicated_jobs:
            if rjob.job.pod_spec.get("restartPolicy", "Always") != "Never":
                return None
    return FAILED_PODS


def fetch_status(kube: Kube, namespace: str, name: str, now: float, *, with_progress: bool = False,
                 stuck_after_s: float | None = None, why: bool = False,
                 on_objects: Callable[[JobSet, list, list, list], None] | None = None,
                 clock: Callable[[], float] | None = None) -> WorkloadStatus:
    """`with_progress`: also read the trainer's progress record from the checkpoint dir the JobSet names.
    `stuck_after_s`: set `reason` (one line) when Queued, Admitted or Restarting longer than that. `why`:
    every reason in `why`, with what that needs fetched besides (the LocalQueue and ClusterQueue of a
    pending Workload, its queue position, the TPU node pools when a pod is unschedulable, the Job
    controller's FailedCreate Events when a Job has fewer pods than it asks for, the JobSet's JobCreationFailed
    Events when a Job is missing, the namespace's ProvisioningRequests when the Workload has admission
    checks, the namespace's Kueue Workloads when a condition names a preemptor): at most 8 more calls, none
    per pod. `on_objects` gets the JobSet, Jobs, Pods and Kueue Workloads read (`status --watch` finds its
    incidents in them at no call of its own). A workload that runs reads
    only its Failed pods (counted_pods); the pods of one that is stuck are read in full, once, since its
    reasons are in the pods that have not failed. `clock`: read once, when the reads are done (the progress
    record's too), as `now` for every age, so every age is as of the last read that answered, not of the
    first request (a read that rides out an API or storage pause takes minutes)."""
    raw = get_workload(kube, namespace, name)
    jobset = JobSet.of(raw)  # each object read once into its view, for status, --why and chip-hours alike
    selector = f"{JOBSET_NAME}={name}"
    raw_jobs = kube.list_jobs(namespace, selector)
    only = None if why else counted_pods([jobset])
    raw_pods = kube.list_pods(namespace, selector, only)
    raw_workloads = kube.list_kueue_workloads(namespace, f"{KUEUE_JOB_UID}={jobset.meta.uid or ''}")
    jobs, pods = [Job.of(j) for j in raw_jobs], [Pod.of(p) for p in raw_pods]
    workloads = [Workload.of(w) for w in raw_workloads]
    if on_objects is not None:  # the views already built: the hook's readers take them as they are
        on_objects(jobset, jobs, pods, workloads)
    # Read once: status shows it, and --why names the trainer's own verdict from it. With `clock`, `now` is the
    # time the reads ended (the progress record's, where it is read), one time for every age below.
    read_at: list[float] = []  # the one reading of `clock`

    def stamp() -> float:
        read_at.append(clock() if clock is not None else now)
        return read_at[0]

    progress, problem = progress_of(raw, now, stamp) if (why or with_progress) else (None, "")
    now = read_at[0] if read_at else stamp()  # no record read (none named, none there): the objects' end
    status = compute_status(jobset, jobs, pods, workloads, now)
    status = dataclasses.replace(status, accelerator=workload_accelerator(jobset))  # for chip-hours
    if why or stuck_after_s is not None:
        since = why_mod.state_since(jobset, jobs, workloads)
        age = None if since is None else now - since
        after = stuck_after_s if stuck_after_s is not None else 0.0
        if why or (status.state in why_mod.STUCK_STATES and age is not None and age >= after):
            if only is not None:
                pods = [Pod.of(p) for p in kube.list_pods(namespace, selector)]
            # Stuck, but not asked why: only the Job controller's Events (one LIST, when a Job lacks pods),
            # which nothing else shows; a pod that cannot be created leaves no other trace (#33)
            context = why_context(kube, namespace, jobset, pods, workloads, jobs, progress) if why else \
                Context(events=tuple(_failed_creates(kube, namespace, jobs)), nodes=_unschedulable_nodes(kube, pods))
            reasons = why_mod.explain(jobset, jobs, pods, workloads, now, context,
                                      pending_after_s=stuck_after_s if stuck_after_s is not None else 120.0)
            if context is not None and context.rejections:  # a Job the API server refused: decisive
                reasons = rejection_reasons(jobset, list(context.rejections), jobs) + reasons
            if why:  # the trainer's own final verdict (--elastic-stop-on-repeat) comes first: it names the cause;
                # else a failure the JobSet's restart is handling, which needs no fix
                healing = [] if any(r.cause in NOT_SELF_HEALING for r in reasons) else \
                    recovering(status, pods, workloads, progress, now, readmitted_at(jobset, jobs, workloads),
                               context.preemptor if context is not None else "",
                               context.evictions if context is not None else (), jobs)
                reasons = trainer_stopped(progress, name, pods) + with_recovery(healing, reasons)
            status = dataclasses.replace(status, reason=why_mod.stuck_line(status.state, age, reasons, after),
                                         why=tuple(reasons) if why else ())
    if not with_progress:
        return status

    return dataclasses.replace(status, progress=progress, progress_problem=problem)


def why_context(kube: Kube, namespace: str, jobset: dict | JobSet, pods: Sequence[dict | Pod],
                workloads: Sequence[dict | Workload], jobs: Sequence[dict | Job] | None = None,
                progress: dict | None = None):
    """What `status --why` reads beyond plain status, only where the objects point at it (`progress`: the
    trainer's record, which says whether Kueue's Events may name what stopped it)."""
    meta = JobSet.of(jobset).meta
    queue = meta.labels.get(KUEUE_QUEUE)
    mine = [w for w in map(Workload.of, workloads) if w.of_jobset(meta.uid)]
    reserved = any(w.true("QuotaReserved") for w in mine)
    local_queue = cluster_queue = None
    position = ""
    if queue and mine and not reserved:
        local_queue = kube.get_kueue_object("localqueues", queue, namespace)
        cq = LocalQueue.of(local_queue or EMPTY).cluster_queue
        cluster_queue = kube.get_kueue_object("clusterqueues", cq) if cq else None
        position = _position(kube, namespace, queue, str(mine[0].meta.name), local_queue)
    nodes = _unschedulable_nodes(kube, pods)
    rejections: tuple[dict, ...] = ()
    if jobs is not None and jobs_missing(jobset, jobs):  # one more call, only when a Job is missing
        rejections = tuple(kube.list_events(namespace, event_selector(str(meta.name), meta.uid or "")))
    # A Workload with admission checks may wait on a ProvisioningRequest (--flex-start): one LIST.
    checked = any(w.checks for w in mine)
    requests = kube.list_provisioning_requests(namespace) if checked else None
    evictions = _evictions(kube, namespace, mine, progress)
    return Context(cluster_queue=cluster_queue, local_queue=local_queue, nodes=nodes, position=position,
                   rejections=rejections, events=tuple(_failed_creates(kube, namespace, jobs or [])),
                   provisioning_requests=None if requests is None else tuple(requests),
                   preemptor=_preemptor(kube, namespace, mine, evictions), evictions=evictions)


def _evictions(kube: Kube, namespace: str, mine: Sequence[Workload], progress: dict | None) -> tuple[Fault, ...]:
    """Kueue's eviction Events of the workload's Workload, as faults: one LIST, only while the trainer is stopped
    by a SIGTERM or resuming after one, and no Kueue condition is True (a condition names the fault itself)."""
    trainer = progress or {}
    stopped = trainer.get("state") == "preempted" or trainer.get("phase") in ("restoring", "compiling")
    if not mine or not stopped or kueue_fault(mine) is not None:
        return ()
    newest = max(mine, key=lambda w: w.meta.created or "")
    try:
        listed = kube.list_events(namespace, f"involvedObject.kind=Workload,involvedObject.name={newest.meta.name}")
    except ClusterError:  # refused (RBAC) or failed: the trainer's own words are what --why says then
        return ()
    return tuple(kueue_event_faults(listed))


def _preemptor(kube: Kube, namespace: str, mine: Sequence[Workload], evictions: Sequence[Fault] = ()) -> str:
    """The Workload that preempted this one, named: Kueue's conditions and Events give only its UID (one LIST
    of the namespace's Workloads, only when one does); "" when none names one."""
    said = (preemptor.preemptor_uid(text) for text in [
        *(c.message or "" for w in mine for c in w.conditions if c.type in ("Preempted", "Evicted", "Requeued")),
        *(f.detail for f in evictions)])
    uid = next((u for u in said if u), None)
    if uid is None:
        return ""
    try:
        found = preemptor.describe(kube.list_kueue_workloads(namespace), uid)
    except ClusterError:  # a listing refused (RBAC) or failed: the UID is what is known
        found = None
    return found or f"the Workload of UID {uid} (not among the Workloads of namespace {namespace})"


def _unschedulable_nodes(kube: Kube, pods: Sequence[dict | Pod]) -> tuple[Node, ...] | None:
    """The TPU nodes' labels and taints, when a pod is unschedulable (one LIST, else none): which nodes have
    the pod's shape, and whether a taint the scheduler names is theirs or another pool's."""
    if not any(c.reason == "Unschedulable" for p in map(Pod.of, pods) for c in p.conditions):
        return None
    return tuple(map(Node.of, kube.list_nodes(ACCELERATOR, limit=1000)))


def _failed_creates(kube: Kube, namespace: str, jobs: Sequence[dict | Job]) -> list[dict]:
    """The Job controller's FailedCreate Events, when a Job has fewer pods than it asks for (else no call)."""
    if not any(short_of_pods(j) for j in jobs):
        return []
    try:
        return kube.list_events(namespace, f"involvedObject.kind=Job,reason={FAILED_CREATE}")
    except NotFoundError:
        return []


def _position(kube: Kube, namespace: str, queue: str, workload: str, local_queue: dict | None) -> str:
    pending = kube.pending_workloads(namespace, queue)
    waiting = LocalQueue.of(local_queue or EMPTY).pending
    if pending is None:
        return ("queue position unknown: Kueue's visibility API (visibility.kueue.x-k8s.io) is not served on "
                f"this cluster; LocalQueue {queue} has {waiting if waiting is not None else '?'} pending")
    for item in pending:
        if Meta.of(item).name == workload:
            return (f"position {item.get('positionInLocalQueue')} in LocalQueue {queue}, "
                    f"{item.get('positionInClusterQueue')} in its ClusterQueue")
    return f"not among the {len(pending)} pending workloads Kueue lists for LocalQueue {queue}"


def fetch_all(kube: Kube, namespace: str, now: float) -> list[WorkloadStatus]:
    try:
        jobsets = kube.list_jobsets(namespace)
    except NotFoundError:
        require_jobset(kube)
        raise
    if not jobsets:
        kube.require_namespace(namespace)  # a LIST in a namespace that does not exist is empty, not a 404
        return []
    views = [JobSet.of(j) for j in jobsets]
    jobs = [Job.of(j) for j in kube.list_jobs(namespace, JOBSET_NAME)]
    pods = [Pod.of(p) for p in kube.list_pods(namespace, JOBSET_NAME, counted_pods(views))]
    workloads = [Workload.of(w) for w in kube.list_kueue_workloads(namespace)]
    by_name: dict[str, tuple[list[Job], list[Pod]]] = {}
    for job in jobs:
        by_name.setdefault(job.meta.labels[JOBSET_NAME], ([], []))[0].append(job)
    for pod in pods:
        by_name.setdefault(pod.meta.labels[JOBSET_NAME], ([], []))[1].append(pod)
    statuses = []
    for jobset in views:
        own_jobs, own_pods = by_name.get(str(jobset.meta.name), ([], []))
        statuses.append(compute_status(jobset, own_jobs, own_pods, workloads, now))
    return statuses
