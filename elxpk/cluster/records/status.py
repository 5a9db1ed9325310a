"""Elastic-aware workload status, computed from objects already fetched (pure: no I/O, clock passed in).

Inputs are what a handful of label-selector LIST calls return: the JobSet, its child Jobs, their Pods and
the Kueue Workload. A "slice" is one Job of the worker replicatedJob (`worker` for Pathways, otherwise the
replicatedJob with the most replicas). States, from the user's point of view:

- Queued: Kueue has not admitted the workload (the JobSet is suspended).
- Admitted: admitted and starting; no slice has failed or restarted yet.
- Running: every slice (and the Pathways head) is ready.
- Degraded: some slices are ready, others are down or restarting (elastic training continues on fewer).
- Restarting: the JobSet says so (its RestartingJobSet condition), no slice is ready after a failure, or the
  JobSet is recreating its Jobs.
- Succeeded / Failed: the JobSet finished (Completed / Failed condition).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field

from elxpk.accelerators import Accelerator
from elxpk.cluster.objects.labels import HEAD, KUEUE_QUEUE, SUBMISSION_ANNOTATION, XPK_WORKLOAD, parse_time
from elxpk.cluster.objects.meta import Condition as ObjCondition
from elxpk.cluster.objects.meta import true_condition
from elxpk.cluster.objects.pods import Pod
from elxpk.cluster.objects.workloads import Job, JobSet, JobSpec, ReplicatedJob, Workload
from elxpk.cluster.records.incidents import restart_causes

STATES = ("Queued", "Admitted", "Running", "Degraded", "Restarting", "Succeeded", "Failed")
# The JobSet controller's condition while it replaces the group: True from the failure it acts on until every
# Job of the new attempt is ready (then False, reason JobsReady).
RESTARTING_CONDITION = "RestartingJobSet"


@dataclass(frozen=True)
class SliceStatus:
    index: int
    job: str | None
    state: str  # Running, Starting, Restarting, Pending, Succeeded, Failed, Missing
    expected: int  # pods the slice needs (min of parallelism and completions)
    active: int = 0
    ready: int = 0
    succeeded: int = 0
    failed: int = 0
    pod_restarts: int = 0
    backoff_limit: int | None = None

    @property
    def healthy(self) -> bool:
        return self.state in ("Running", "Succeeded")

    @property
    def budget_used(self) -> int:
        # With restartPolicy OnFailure, container restarts count against backoffLimit, like failed pods.
        return self.failed + self.pod_restarts

    @property
    def budget_left(self) -> int | None:
        return None if self.backoff_limit is None else max(self.backoff_limit - self.budget_used, 0)


@dataclass(frozen=True)
class Condition:
    type: str
    status: str
    reason: str
    message: str
    time: str | None


@dataclass(frozen=True)
class WorkloadStatus:
    name: str
    namespace: str
    state: str
    message: str
    age_s: float | None
    worker_job: str | None
    slices: tuple[SliceStatus, ...]
    head: str | None  # state of the Pathways head (None when there is none)
    restarts: int  # JobSet-level restarts (every Job recreated)
    restarts_counted: int  # those that count towards maxRestarts
    max_restarts: int
    queue: str | None
    admission: str | None  # Kueue: Pending, QuotaReserved, Admitted, Evicted, Finished
    admission_message: str
    conditions: tuple[Condition, ...] = field(default=())  # latest first
    created_by: str = ""  # "elxpk" (its submission annotation), "xpk" (only the xpk label), or ""
    # pod restarts and failures of the pods still there, by cause (infra, user, unknown): see incidents.py
    restart_causes: dict[str, int] = field(default_factory=dict)
    progress: dict | None = None  # the trainer's progress record and its ages, when it could be read
    progress_problem: str = ""  # why it could not be read, when the workload names a checkpoint dir
    reason: str = ""  # one line: why it is stuck, when Queued/Admitted/Restarting past the threshold (why.py)
    why: tuple = ()  # every reason (why.Reason), with `status --why`
    accelerator: Accelerator | None = None  # the worker pods' (node selector), for chip-hours
    chip_hours: dict | None = None  # chip-hours and money spent so far (elxpk/cluster/records/chips.py), with their chips
    chip_hours_lines: tuple[str, ...] = ()  # the same as text (not in JSON)
    # unix seconds the JobSet finished (its Completed or Failed condition), None while it runs: chip-hours stop there
    ended_at: float | None = None
    # unix seconds Kueue admitted it (its one admission: status.admitted_at), None without: where the trainer's
    # record gives no billed interval, chip-hours run from here (queueing not billed), else from creation
    admitted_at: float | None = None

    @property
    def slices_total(self) -> int:
        return len(self.slices)

    @property
    def slices_healthy(self) -> int:
        return sum(1 for s in self.slices if s.healthy)

    @property
    def restarts_left(self) -> int:
        return max(self.max_restarts - self.restarts_counted, 0)

    def to_dict(self) -> dict:
        data = asdict(self)
        data["slices"] = [
            {**asdict(s), "healthy": s.healthy, "budget_used": s.budget_used, "budget_left": s.budget_left}
            for s in self.slices
        ]
        data["conditions"] = [asdict(c) for c in self.conditions]
        data["slices_healthy"] = self.slices_healthy
        data["slices_total"] = self.slices_total
        data["restarts_left"] = self.restarts_left
        data["accelerator"] = self.accelerator._asdict() if self.accelerator is not None else None
        data.pop("chip_hours_lines")
        return data


def _true(conditions: Iterable[ObjCondition], kind: str) -> bool:
    return true_condition(conditions, kind) is not None


def latest_conditions(conditions: Iterable[dict | ObjCondition]) -> tuple[Condition, ...]:
    """Conditions newest first, by lastTransitionTime: list order is by type since Kueue 0.15, not by time."""
    items = [Condition(c.type or "", c.status or "", c.reason or "", c.message or "", c.time)
             for c in map(ObjCondition.of, conditions)]
    return tuple(sorted(items, key=lambda c: parse_time(c.time) or 0.0, reverse=True))


def worker_replicated_job(jobset: dict | JobSet) -> ReplicatedJob | None:
    rjobs = JobSet.of(jobset).replicated_jobs
    named = [r for r in rjobs if r.name == "worker"]
    if named:
        return named[0]
    others = [r for r in rjobs if r.name != HEAD]
    return max(others, key=lambda r: r.replicas, default=None)


def _pod_restarts(pod: Pod) -> int:
    return sum(cs.restarts for cs in pod.containers)


def _current_jobs(jobs: Iterable[Job], rjob_name: str | None) -> dict[int, Job]:
    """Index -> Job of the newest restart attempt, skipping Jobs being deleted by a JobSet restart."""
    chosen: dict[int, Job] = {}
    for job in jobs:
        if job.replicated_job != rjob_name or job.meta.deleting:
            continue
        index = int(job.index or 0)
        if index not in chosen or job.attempt >= chosen[index].attempt:
            chosen[index] = job
    return chosen


def slice_status(index: int, job: dict | Job | None, pods: Iterable[dict | Pod], template: JobSpec) -> SliceStatus:
    if job is None:
        return SliceStatus(index, None, "Missing", template.pods, backoff_limit=template.backoff_limit)
    job = Job.of(job)
    expected = job.spec.pods
    counts = {"active": job.active, "ready": job.ready, "succeeded": job.succeeded, "failed": job.failed}
    restarts = sum(_pod_restarts(Pod.of(p)) for p in pods)
    if job.true("Failed") or job.true("FailureTarget"):
        state = "Failed"
    elif job.true("Complete") or counts["succeeded"] >= expected:
        state = "Succeeded"
    elif job.spec.suspend:
        state = "Pending"
    elif counts["ready"] + counts["succeeded"] >= expected:
        state = "Running"
    elif restarts or counts["failed"]:
        state = "Restarting"
    elif counts["active"]:
        state = "Starting"
    else:
        state = "Pending"
    return SliceStatus(index, job.meta.name, state, expected, pod_restarts=restarts,
                       backoff_limit=job.spec.backoff_limit, **counts)


def kueue_workloads(workloads: Iterable[dict | Workload], jobset: dict | JobSet) -> list[Workload]:
    """The Kueue Workloads of `jobset` (by its uid label, or owned by it)."""
    meta = JobSet.of(jobset).meta
    return [w for w in map(Workload.of, workloads)
            if w.of_jobset(meta.uid) or any(r.kind == "JobSet" and r.name == meta.name for r in w.meta.owners)]


def admitted_at(workloads: Iterable[dict | Workload], jobset: dict | JobSet) -> float | None:
    """When Kueue gave the workload its quota, where that is its one admission: its Admitted condition's time
    when it holds no Evicted condition (an eviction and a later admission leave only the later's time, and
    the chips were the workload's before the eviction too). None otherwise, and without Kueue."""
    mine = kueue_workloads(workloads, jobset)
    conditions = mine[0].conditions if mine else ()
    if any(c.type == "Evicted" for c in conditions) or not _true(conditions, "Admitted"):
        return None
    return next(c.at for c in conditions if c.type == "Admitted")


def _kueue(workloads: list[Workload], jobset: JobSet) -> tuple[str | None, str | None, str]:
    mine = kueue_workloads(workloads, jobset)
    queue = jobset.meta.labels.get(KUEUE_QUEUE)
    if not mine:
        return queue, None, ""
    workload = mine[0]
    queue = workload.queue or queue
    for kind in ("Finished", "Evicted", "Admitted", "QuotaReserved"):
        if _true(workload.conditions, kind):
            latest = next(c for c in latest_conditions(workload.conditions) if c.type == kind)
            return queue, kind, latest.message
    pending = latest_conditions(workload.conditions)
    return queue, "Pending", pending[0].message if pending else ""


def compute_status(jobset: dict | JobSet, jobs: Iterable[dict | Job], pods: Iterable[dict | Pod],
                   workloads: Iterable[dict | Workload], now: float) -> WorkloadStatus:
    js = JobSet.of(jobset)
    job_list, pod_list, workload_list = list(map(Job.of, jobs)), list(map(Pod.of, pods)), list(map(Workload.of, workloads))
    meta = js.meta
    worker = worker_replicated_job(js)
    pods_by_owner: dict[str, list[Pod]] = {}
    for pod in pod_list:
        for ref in pod.meta.owners:
            pods_by_owner.setdefault(ref.uid or "", []).append(pod)
    slices: list[SliceStatus] = []
    if worker is not None:
        current = _current_jobs(job_list, worker.name)
        for index in range(worker.replicas):
            job = current.get(index)
            owned = pods_by_owner.get(job.meta.uid or "", []) if job else []
            slices.append(slice_status(index, job, owned, worker.job))
    head = None
    head_rjob = js.replicated_job(HEAD)
    if head_rjob is not None:
        head_job = _current_jobs(job_list, HEAD).get(0)
        owned = pods_by_owner.get(head_job.meta.uid or "", []) if head_job else []
        head = slice_status(0, head_job, owned, head_rjob.job).state
    queue, admission, admission_message = _kueue(workload_list, js)
    state, message = _state(js, slices, head, js.restarts, admission, admission_message, job_list)
    created = parse_time(meta.created)
    return WorkloadStatus(
        name=meta.name or "", namespace=meta.namespace or "", state=state, message=message,
        age_s=None if created is None else max(now - created, 0.0),
        worker_job=worker.name if worker else None, slices=tuple(slices), head=head,
        restarts=js.restarts, restarts_counted=js.restarts_counted, max_restarts=js.max_restarts,
        queue=queue, admission=admission, admission_message=admission_message,
        conditions=latest_conditions(js.conditions),
        created_by=created_by(js),
        restart_causes=restart_causes(pod_list),
        ended_at=ended_at(js) if state in ("Succeeded", "Failed") else None,
        admitted_at=admitted_at(workload_list, js),
    )


def created_by(jobset: dict | JobSet) -> str:
    meta = JobSet.of(jobset).meta
    if SUBMISSION_ANNOTATION in meta.annotations:
        return "elxpk"
    return "xpk" if XPK_WORKLOAD in meta.labels else ""


def finished(jobset: dict | JobSet) -> str | None:
    """"Succeeded" or "Failed" once the JobSet has finished, else None: its terminalState, or its Completed or
    Failed condition (a JobSet can carry the condition without terminalState); one rule for status, wait and
    `events --watch`, so they never disagree on whether it ended."""
    jobset = JobSet.of(jobset)
    if jobset.terminal_state == "Completed" or _true(jobset.conditions, "Completed"):
        return "Succeeded"
    if jobset.terminal_state == "Failed" or _true(jobset.conditions, "Failed"):
        return "Failed"
    return None


def ended_at(jobset: dict | JobSet) -> float | None:
    """When the JobSet finished: its Completed or Failed condition's transition (None when it has neither,
    e.g. a terminalState without the condition)."""
    end = JobSet.of(jobset).end
    return None if end is None else end.at


def _state(jobset: JobSet, slices: list[SliceStatus], head: str | None, restarts: int, admission: str | None,
           admission_message: str, jobs: list[Job]) -> tuple[str, str]:
    conditions = jobset.conditions
    ended = finished(jobset)
    if ended is not None:
        return ended, _condition_message(conditions, "Completed" if ended == "Succeeded" else "Failed")
    if jobset.suspend or _true(conditions, "Suspended"):
        if admission == "Admitted":
            return "Admitted", "admitted by Kueue; the JobSet is being resumed"
        return "Queued", admission_message or "waiting for Kueue admission"
    healthy = sum(1 for s in slices if s.healthy)
    total = len(slices)
    down = [s for s in slices if not s.healthy]
    # A Job of restart attempt N > 0 means the JobSet has restarted, even when the JobSet read a moment before
    # the Jobs still shows restarts 0: each LIST is its own read, and the controller acts in between.
    attempts = max((j.attempt for j in jobs), default=0)
    history = restarts > 0 or attempts > 0 or any(s.pod_restarts or s.failed for s in slices)
    recreating = any(j.meta.deleting for j in jobs)
    head_ok = head in (None, "Running", "Succeeded")
    # The controller's own word comes first: while it restarts the group, the survivors' Jobs still read ready
    # and the new attempt's may not exist yet, so the slices alone would say Running or Degraded meanwhile.
    if _true(conditions, RESTARTING_CONDITION):
        return "Restarting", _down_message(down, restarts)
    if healthy == total and head_ok and not recreating:
        return "Running", f"{healthy}/{total} slices healthy"
    if recreating or (healthy == 0 and history):
        return "Restarting", _down_message(down, restarts)
    if not history:
        return "Admitted", f"starting: {healthy}/{total} slices ready" + ("" if head_ok else f", head {head}")
    if healthy == 0 or not head_ok:
        return "Restarting", _down_message(down, restarts)
    return "Degraded", _down_message(down, restarts)


def _down_message(down: list[SliceStatus], restarts: int) -> str:
    parts = [f"slice {s.index} {s.state.lower()}"
             + (f" (budget {s.budget_used}/{s.backoff_limit} used)" if s.backoff_limit is not None else "")
             for s in down[:4]]
    if len(down) > 4:
        parts.append(f"{len(down) - 4} more slices down")
    if restarts:
        parts.append(f"JobSet restart {restarts}")
    return "; ".join(parts) or "restarting"


def _condition_message(conditions: Iterable[ObjCondition], kind: str) -> str:
    for c in conditions:
        if c.type == kind:
            return c.message or c.reason or kind
    return kind
