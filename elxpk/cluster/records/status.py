"""Elastic-aware workload status, computed from objects already fetched (pure: no I/O, clock passed in).

Inputs are what a handful of label-selector LIST calls return: the JobSet, its child Jobs, their Pods and
the Kueue Workload. A "slice" is one Job of the worker replicatedJob (`worker` for Pathways, otherwise the
replicatedJob with the most replicas). States, from the user's point of view:

- Queued: Kueue has not admitted the workload (the JobSet is suspended).
- Admitted: admitted and starting; no slice has failed or restarted yet.
- Running: every slice (and the Pathways head) is ready.
- Degraded: some slices are ready, others are down or restarting (elastic training continues on fewer).
- Restarting: no slice is ready after a failure, or the JobSet is recreating its Jobs.
- Succeeded / Failed: the JobSet finished (Completed / Failed condition).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field

from elxpk.accelerators import Accelerator
from elxpk.cluster.objects.labels import (
    HEAD,
    JOB_INDEX,
    KUEUE_JOB_UID,
    KUEUE_QUEUE,
    REPLICATED_JOB,
    RESTART_ATTEMPT,
    SUBMISSION_ANNOTATION,
    XPK_WORKLOAD,
    parse_time,
)
from elxpk.cluster.records.incidents import restart_causes

STATES = ("Queued", "Admitted", "Running", "Degraded", "Restarting", "Succeeded", "Failed")


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


def _true(conditions: Iterable[dict], kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


def latest_conditions(conditions: Iterable[dict]) -> tuple[Condition, ...]:
    """Conditions newest first, by lastTransitionTime: list order is by type since Kueue 0.15, not by time."""
    items = [Condition(c.get("type", ""), c.get("status", ""), c.get("reason", ""), c.get("message", ""),
                       c.get("lastTransitionTime")) for c in conditions]
    return tuple(sorted(items, key=lambda c: parse_time(c.time) or 0.0, reverse=True))


def worker_replicated_job(jobset: dict) -> dict | None:
    rjobs = jobset.get("spec", {}).get("replicatedJobs") or []
    named = [r for r in rjobs if r.get("name") == "worker"]
    if named:
        return named[0]
    others = [r for r in rjobs if r.get("name") != HEAD]
    return max(others, key=lambda r: r.get("replicas", 1), default=None)


def _expected_pods(job_spec: dict) -> int:
    parallelism = job_spec.get("parallelism", 1)
    completions = job_spec.get("completions", parallelism)
    return min(parallelism, completions)


def _pod_restarts(pod: dict) -> int:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return sum(int(s.get("restartCount", 0)) for s in statuses)


def _current_jobs(jobs: list[dict], rjob_name: str) -> dict[int, dict]:
    """Index -> Job of the newest restart attempt, skipping Jobs being deleted by a JobSet restart."""
    chosen: dict[int, dict] = {}
    for job in jobs:
        meta = job.get("metadata", {})
        labels = meta.get("labels") or {}
        if labels.get(REPLICATED_JOB) != rjob_name or meta.get("deletionTimestamp"):
            continue
        index = int(labels.get(JOB_INDEX, 0))
        attempt = int(labels.get(RESTART_ATTEMPT, 0))
        if index not in chosen or attempt >= int(chosen[index]["metadata"]["labels"].get(RESTART_ATTEMPT, 0)):
            chosen[index] = job
    return chosen


def slice_status(index: int, job: dict | None, pods: list[dict], template_spec: dict) -> SliceStatus:
    expected = _expected_pods(template_spec)
    if job is None:
        return SliceStatus(index, None, "Missing", expected, backoff_limit=template_spec.get("backoffLimit", 6))
    spec, status = job.get("spec", {}), job.get("status") or {}
    expected = _expected_pods(spec)
    counts = {k: int(status.get(k) or 0) for k in ("active", "ready", "succeeded", "failed")}
    restarts = sum(_pod_restarts(p) for p in pods)
    conditions = status.get("conditions") or []
    if _true(conditions, "Failed") or _true(conditions, "FailureTarget"):
        state = "Failed"
    elif _true(conditions, "Complete") or counts["succeeded"] >= expected:
        state = "Succeeded"
    elif spec.get("suspend"):
        state = "Pending"
    elif counts["ready"] + counts["succeeded"] >= expected:
        state = "Running"
    elif restarts or counts["failed"]:
        state = "Restarting"
    elif counts["active"]:
        state = "Starting"
    else:
        state = "Pending"
    return SliceStatus(index, job["metadata"]["name"], state, expected, pod_restarts=restarts,
                       backoff_limit=spec.get("backoffLimit", 6), **counts)


def _kueue_workloads(workloads: list[dict], jobset: dict) -> list[dict]:
    """The Kueue Workloads of `jobset` (by its uid label, or owned by it)."""
    meta = jobset.get("metadata", {})
    uid, name = meta.get("uid"), meta.get("name")
    return [w for w in workloads
            if (w["metadata"].get("labels") or {}).get(KUEUE_JOB_UID) == uid
            or any(r.get("kind") == "JobSet" and r.get("name") == name
                   for r in w["metadata"].get("ownerReferences") or [])]


def admitted_at(workloads: list[dict], jobset: dict) -> float | None:
    """When Kueue gave the workload its quota, where that is its one admission: its Admitted condition's time
    when it holds no Evicted condition (an eviction and a later admission leave only the later's time, and
    the chips were the workload's before the eviction too). None otherwise, and without Kueue."""
    mine = _kueue_workloads(workloads, jobset)
    conditions = ((mine[0].get("status") or {}).get("conditions") or []) if mine else []
    if any(c.get("type") == "Evicted" for c in conditions) or not _true(conditions, "Admitted"):
        return None
    return next(parse_time(c.get("lastTransitionTime")) for c in conditions if c.get("type") == "Admitted")


def _kueue(workloads: list[dict], jobset: dict) -> tuple[str | None, str | None, str]:
    meta = jobset.get("metadata", {})
    mine = _kueue_workloads(workloads, jobset)
    queue = (meta.get("labels") or {}).get(KUEUE_QUEUE)
    if not mine:
        return queue, None, ""
    workload = mine[0]
    queue = workload.get("spec", {}).get("queueName") or queue
    conditions = (workload.get("status") or {}).get("conditions") or []
    for kind in ("Finished", "Evicted", "Admitted", "QuotaReserved"):
        if _true(conditions, kind):
            latest = next(c for c in latest_conditions(conditions) if c.type == kind)
            return queue, kind, latest.message
    pending = latest_conditions(conditions)
    return queue, "Pending", pending[0].message if pending else ""


def compute_status(jobset: dict, jobs: list[dict], pods: list[dict], workloads: list[dict],
                   now: float) -> WorkloadStatus:

    meta, spec, status = jobset.get("metadata", {}), jobset.get("spec", {}), jobset.get("status") or {}
    conditions = status.get("conditions") or []
    worker = worker_replicated_job(jobset)
    pods_by_owner: dict[str, list[dict]] = {}
    for pod in pods:
        for ref in pod["metadata"].get("ownerReferences") or []:
            pods_by_owner.setdefault(ref.get("uid", ""), []).append(pod)
    slices: list[SliceStatus] = []
    if worker is not None:
        current = _current_jobs(jobs, worker["name"])
        template = worker.get("template", {}).get("spec", {})
        for index in range(int(worker.get("replicas", 1))):
            job = current.get(index)
            owned = pods_by_owner.get(job["metadata"]["uid"], []) if job else []
            slices.append(slice_status(index, job, owned, template))
    head = None
    if any(r.get("name") == HEAD for r in spec.get("replicatedJobs") or []):
        head_jobs = _current_jobs(jobs, HEAD)
        head_job = head_jobs.get(0)
        head_template = next(r for r in spec["replicatedJobs"] if r["name"] == HEAD)["template"].get("spec", {})
        owned = pods_by_owner.get(head_job["metadata"]["uid"], []) if head_job else []
        head = slice_status(0, head_job, owned, head_template).state
    queue, admission, admission_message = _kueue(workloads, jobset)
    restarts = int(status.get("restarts") or 0)
    # absent while 0 (omitempty in the JobSet API), as when every restart came from an IgnoreMaxRestarts rule
    counted = int(status.get("restartsCountTowardsMax") or 0)
    max_restarts = int((spec.get("failurePolicy") or {}).get("maxRestarts") or 0)
    state, message = _state(jobset, slices, head, restarts, admission, admission_message, jobs)
    created = parse_time(meta.get("creationTimestamp"))
    return WorkloadStatus(
        name=meta.get("name", ""), namespace=meta.get("namespace", ""), state=state, message=message,
        age_s=None if created is None else max(now - created, 0.0),
        worker_job=worker.get("name") if worker else None, slices=tuple(slices), head=head,
        restarts=restarts, restarts_counted=counted, max_restarts=max_restarts, queue=queue,
        admission=admission, admission_message=admission_message, conditions=latest_conditions(conditions),
        created_by=created_by(meta),
        restart_causes=restart_causes(pods),
        ended_at=ended_at(jobset) if state in ("Succeeded", "Failed") else None,
        admitted_at=admitted_at(workloads, jobset),
    )


def created_by(meta: dict) -> str:
    if SUBMISSION_ANNOTATION in (meta.get("annotations") or {}):
        return "elxpk"
    return "xpk" if XPK_WORKLOAD in (meta.get("labels") or {}) else ""


def finished(jobset: dict) -> str | None:
    """"Succeeded" or "Failed" once the JobSet has finished, else None: its terminalState, or its Completed or
    Failed condition (a JobSet can carry the condition without terminalState); one rule for status, wait and
    `events --watch`, so they never disagree on whether it ended."""
    status = jobset.get("status") or {}
    conditions = status.get("conditions") or []
    terminal = status.get("terminalState")
    if terminal == "Completed" or _true(conditions, "Completed"):
        return "Succeeded"
    if terminal == "Failed" or _true(conditions, "Failed"):
        return "Failed"
    return None


def ended_at(jobset: dict) -> float | None:
    """When the JobSet finished: its Completed or Failed condition's transition (None when it has neither,
    e.g. a terminalState without the condition)."""
    for c in (jobset.get("status") or {}).get("conditions") or []:
        if c.get("type") in ("Completed", "Failed") and c.get("status") == "True":
            return parse_time(c.get("lastTransitionTime"))
    return None


def _state(jobset: dict, slices: list[SliceStatus], head: str | None, restarts: int, admission: str | None,
           admission_message: str, jobs: list[dict]) -> tuple[str, str]:
    status = jobset.get("status") or {}
    conditions = status.get("conditions") or []
    ended = finished(jobset)
    if ended is not None:
        return ended, _condition_message(conditions, "Completed" if ended == "Succeeded" else "Failed")
    if jobset.get("spec", {}).get("suspend") or _true(conditions, "Suspended"):
        if admission == "Admitted":
            return "Admitted", "admitted by Kueue; the JobSet is being resumed"
        return "Queued", admission_message or "waiting for Kueue admission"
    healthy = sum(1 for s in slices if s.healthy)
    total = len(slices)
    down = [s for s in slices if not s.healthy]
    # A Job of restart attempt N > 0 means the JobSet has restarted, even when the JobSet read a moment before
    # the Jobs still shows restarts 0: each LIST is its own read, and the controller acts in between.
    attempts = max((int((j["metadata"].get("labels") or {}).get(RESTART_ATTEMPT, 0)) for j in jobs), default=0)
    history = restarts > 0 or attempts > 0 or any(s.pod_restarts or s.failed for s in slices)
    recreating = any(j["metadata"].get("deletionTimestamp") for j in jobs)
    head_ok = head in (None, "Running", "Succeeded")
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


def _condition_message(conditions: list[dict], kind: str) -> str:
    for c in conditions:
        if c.get("type") == kind:
            return c.get("message") or c.get("reason") or kind
    return kind
