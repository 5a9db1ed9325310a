"""The verbs that act on a submitted workload: delete, logs, wait and kill-slice's plan and kill (its watch of
the recovery: elxpk/cluster/verbs/trainer_recovery.py).

Clocks and sleeps are injected, so `wait` is tested without real waiting.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from elxpk.cluster.api.kube import Kube
from elxpk.cluster.objects.labels import (
    COMPLETION_INDEX,
    HEAD,
    JOB_INDEX,
    JOBSET_NAME,
    REPLICATED_JOB,
)
from elxpk.cluster.objects.pods import Pod
from elxpk.cluster.objects.workloads import JobSet, ReplicatedJob
from elxpk.cluster.records.status import (
    WorkloadStatus,
    worker_replicated_job,
)
from elxpk.cluster.verbs.observe import fetch_status, get_workload
from elxpk.errors import CheckFailed, ClusterError, NotFoundError, Timeout, UsageError
from elxpk.units import format_duration


def delete_workload(kube: Kube, namespace: str, name: str) -> None:
    """Foreground deletion: the JobSet goes once its Jobs and Pods are gone (nothing is left running)."""
    jobset = get_workload(kube, namespace, name)  # a clear "not found" / "JobSet not installed" first
    try:  # exactly the JobSet just read (get_workload checked its name): its uid is the precondition
        kube.delete_jobset(namespace, name, uid=JobSet.of(jobset).meta.uid or "", propagation="Foreground")
    except NotFoundError:
        pass  # a retried DELETE whose first attempt went through: the workload is gone, as asked


def workload_names(kube: Kube, namespace: str) -> list[str]:
    """The JobSets of `namespace` by name, as the API lists them (what `workload delete` without a NAME deletes)."""
    return [str(JobSet.of(js).meta.name) for js in kube.list_jobsets(namespace)]


# --- logs -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LogSource:
    pod: str
    container: str
    what: str  # "head" or "slice K vm I", for messages


def log_source(kube: Kube, namespace: str, name: str, *, head: bool, slice_index: int | None,
               vm: int | None, container: str | None = None) -> LogSource:
    """The pod whose log was asked for: the Pathways head by default, else slice K (default 0), VM I (0)."""
    jobset = JobSet.of(get_workload(kube, namespace, name))
    if head and slice_index is not None:
        raise UsageError("--head and --slice select different pods: give one of them")
    use_head = head or (slice_index is None and vm is None and jobset.pathways)
    if head and not jobset.pathways:
        raise UsageError(f"--head: workload {name} has no {HEAD} (not a Pathways workload); use --slice K --vm I")
    if use_head:
        selector, what = f"{JOBSET_NAME}={name},{REPLICATED_JOB}={HEAD}", "head"
    else:
        worker = _worker(jobset, name)
        k, i = slice_index or 0, vm or 0
        _check_index(jobset, worker, k, i)
        selector = (f"{JOBSET_NAME}={name},{REPLICATED_JOB}={worker.name},{JOB_INDEX}={k},"
                    f"{COMPLETION_INDEX}={i}")
        what = f"slice {k} vm {i}"
    pods = [p for p in map(Pod.of, kube.list_pods(namespace, selector)) if not p.meta.deleting]
    if not pods:
        raise NotFoundError(f"no pod yet for the {what} of workload {name} (is it still queued? "
                            f"see `elxpk workload status {name}`)")
    pod = max(pods, key=lambda p: p.meta.created or "")
    containers = list(pod.container_names)
    if container is not None and container not in containers:
        raise UsageError(f"--container {container}: pod {pod.meta.name} has {', '.join(containers)}")
    return LogSource(str(pod.meta.name), container or containers[0], what)


def read_logs(kube: Kube, namespace: str, source: LogSource, *, follow: bool,
              tail: int | None = None, previous: bool = False) -> Iterator[str]:
    """The log's lines as they arrive, in bounded memory, whatever the log's length."""
    lines = kube.pod_log_lines(namespace, source.pod, source.container, tail_lines=tail, previous=previous,
                               follow=follow)
    try:
        first = next(lines, None)  # the request is made here: its refusal is worded before any line
    except ClusterError as exc:
        if previous and ("not found" in str(exc) or " 400 " in str(exc)):  # the server's answer: 400
            raise NotFoundError(f"--previous: the {source.what} container ({source.pod}/{source.container}) "
                                "has not terminated since its pod started: there is no previous log "
                                "(a replaced pod's log went with it; see `elxpk workload events`)") from None
        raise
    if first is None:
        return
    yield first
    yield from lines


# --- wait -------------------------------------------------------------------------------------------------


def wait_for(kube: Kube, namespace: str, name: str, *, until: str, timeout_s: float | None,
             clock: Callable[[], float], sleep: Callable[[float], None], poll_s: float = 5.0,
             on_update: Callable[[WorkloadStatus], None] = lambda s: None,
             max_consecutive_errors: int = 5) -> WorkloadStatus:
    """Poll status until `until` ("completed" or "running") holds. CheckFailed if the workload fails,
    Timeout when `timeout_s` runs out. A transient API outage is tolerated for a few polls."""
    if until not in ("completed", "running"):
        raise UsageError(f"--for {until}: use completed or running")
    start = clock()
    errors = 0
    seen: WorkloadStatus | None = None  # the last state read: what a timeout reports, even mid-request
    while True:
        left = None if timeout_s is None else max(0.0, timeout_s - (clock() - start))
        try:
            with kube.within(left):  # --timeout holds while a request is in flight
                status = fetch_status(kube, namespace, name, now=clock())
            errors = 0
        except NotFoundError:
            raise
        except Timeout:
            took = format_duration(clock() - start)
            if seen is not None:  # the request in flight was cut at the deadline: report what was seen
                raise Timeout(f"workload {name} is still {seen.state} after {took} (waiting for {until}; the "
                              "last request had no answer yet; raise --timeout to wait longer)") from None
            raise Timeout(f"workload {name}: no answer from the Kubernetes API at {kube.host} before "
                          f"--timeout ran out after {took} (waiting for {until}; "
                          "raise --timeout to wait longer)") from None
        except ClusterError:
            errors += 1
            if errors >= max_consecutive_errors:
                raise
            status = None
        if status is not None:
            seen = status
            on_update(status)
            if status.state == "Failed":
                raise CheckFailed(f"workload {name} failed: {status.message}")
            if status.state == "Succeeded" or (until == "running" and status.state == "Running"):
                return status
        elapsed = clock() - start
        if timeout_s is not None and elapsed >= timeout_s:
            state = seen.state if seen is not None else "unknown (API errors)"
            raise Timeout(f"workload {name} is still {state} after {format_duration(elapsed)} "
                          f"(waiting for {until}; raise --timeout to wait longer)")
        remaining = poll_s if timeout_s is None else min(poll_s, timeout_s - elapsed)
        sleep(max(remaining, 0.0))


# --- kill-slice -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KillPlan:
    selector: str
    pods: tuple[str, ...]
    uids: frozenset[str]
    expected: int  # pods that must run again for the slice to count as back
    pod_uids: tuple[str, ...] = ()  # the uid of each of `pods`: a delete or eviction hits only that pod

    def uid_of(self, pod: str) -> str:
        return dict(zip(self.pods, self.pod_uids, strict=True)).get(pod, "")


def plan_kill(kube: Kube, namespace: str, name: str, slice_index: int, vm: int | None) -> KillPlan:
    jobset = JobSet.of(get_workload(kube, namespace, name))
    ended = jobset_ended(jobset)
    if ended:  # its pods are what is left of the run (their exits, their logs): nothing runs to kill
        raise CheckFailed(f"workload {name} has {ended}: nothing runs to kill; nothing was deleted")
    worker = _worker(jobset, name)
    _check_index(jobset, worker, slice_index, vm)
    selector = f"{JOBSET_NAME}={name},{REPLICATED_JOB}={worker.name},{JOB_INDEX}={slice_index}"
    if vm is not None:
        selector += f",{COMPLETION_INDEX}={vm}"
    # a pod that has ended (Succeeded, Failed) is a record, not a VM at work: never killed
    pods = [p for p in map(Pod.of, kube.list_pods(namespace, selector)) if not p.meta.deleting
            and not p.done and _of_slice(p, name, worker.name or "", slice_index, vm)]
    if not pods:
        raise NotFoundError(f"slice {slice_index} of workload {name} has no pods to kill (queued or restarting?)")
    expected = 1 if vm is not None else worker.job.pods
    pods = sorted(pods, key=lambda p: str(p.meta.name))  # _of_slice: each has a name
    return KillPlan(selector, tuple(str(p.meta.name) for p in pods),
                    frozenset(str(p.meta.uid) for p in pods), expected,
                    tuple(str(p.meta.uid) for p in pods))


def _of_slice(pod: Pod, name: str, replicated_job: str, slice_index: int, vm: int | None) -> bool:
    """The pod carries exactly the labels of the slice (and VM) named: what the selector asked for, checked
    again on the answer, so a kill never reaches a pod of another workload or slice."""
    labels = pod.meta.labels
    wanted = {JOBSET_NAME: name, REPLICATED_JOB: replicated_job, JOB_INDEX: str(slice_index)}
    if vm is not None:
        wanted[COMPLETION_INDEX] = str(vm)
    return bool(pod.meta.name) and all(labels.get(k) == v for k, v in wanted.items())


def kill(kube: Kube, namespace: str, plan: KillPlan) -> None:
    """Force-delete (grace period 0), as a node or VM loss would; a pod already gone is fine."""
    for pod in plan.pods:
        try:
            kube.delete_pod(namespace, pod, uid=plan.uid_of(pod), grace_period_seconds=0)
        except NotFoundError:
            pass


def jobset_ended(jobset: dict | JobSet) -> str:
    """"succeeded" or "failed" once the JobSet has its terminal condition; "" while it runs."""
    end = JobSet.of(jobset).end
    if end is None:
        return ""
    return "succeeded" if end.type == "Completed" else "failed"


def _worker(jobset: JobSet, name: str) -> ReplicatedJob:
    worker = worker_replicated_job(jobset)
    if worker is None:
        raise ClusterError(f"workload {name} has no worker replicatedJob")
    return worker


def _check_index(jobset: JobSet, worker: ReplicatedJob, slice_index: int, vm: int | None) -> None:
    replicas, vms = worker.replicas, worker.job.parallelism
    problems = []
    if not 0 <= slice_index < replicas:
        problems.append(f"--slice {slice_index}: workload {jobset.meta.name} has {replicas} slices "
                        f"(0..{replicas - 1})")
    if vm is not None and not 0 <= vm < vms:
        problems.append(f"--vm {vm}: each slice has {vms} VMs (0..{vms - 1})")
    if problems:
        raise UsageError(*problems)
