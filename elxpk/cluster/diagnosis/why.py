"""Why a workload is not running: reasons read from the objects the components wrote, each with its fix.

Pure (objects in, reasons out; no I/O, clock passed in). The sources, in the order a stuck workload meets them:
- the JobSet: `spec.suspend` with no Kueue queue to resume it;
- Kueue's Workload: QuotaReserved=False (the quota message: resource, flavor, asked against the most the
  ClusterQueue has; or the ClusterQueue is inactive, with the ClusterQueue's own condition when fetched),
  QuotaReserved but not Admitted (admission checks still Pending), Evicted/Preempted;
- the pods: PodScheduled=False/Unschedulable (the scheduler's "0/N nodes are available: ..." message, split
  into its per-node reasons by why_scheduler.py), containers waiting in ErrImagePull/ImagePullBackOff or
  CrashLoopBackOff (the last exit code's class from the trainer's exit-code table), pods pending past a
  threshold;
- the Job controller (why_jobs.py): the first failed Job, pods it cannot create (FailedCreate Events), its
  pod-failure back-off.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from elxpk.cluster.diagnosis import why_jobs
from elxpk.cluster.diagnosis.why_capacity import with_capacity
from elxpk.cluster.diagnosis.why_reason import Reason
from elxpk.cluster.diagnosis.why_scheduler import TPU, Own, unschedulable
from elxpk.cluster.objects.labels import (
    COMPLETION_INDEX,
    HEAD,
    JOB_INDEX,
    JOBSET_NAME,
    KUEUE_QUEUE,
    REPLICATED_JOB,
    parse_time,
)
from elxpk.cluster.objects.meta import Condition, true_condition
from elxpk.cluster.objects.pods import Node, Pod, Waiting
from elxpk.cluster.objects.queues import ClusterQueue, LocalQueue
from elxpk.cluster.objects.workloads import Job, JobSet, Workload
from elxpk.cluster.records.lost_slice import Fault, restart_attempt
from elxpk.units import format_duration
from elxpk_contract.exit_codes import BY_CODE

WAITING_PULL = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull")
STUCK_STATES = ("Queued", "Admitted", "Restarting")
# Counts are ASCII digits, at most 19 of them ([0-9]{1,19}, not \d: that takes other scripts' digits, and
# int() refuses a 4,301-digit one with a ValueError), so every int() below reads what it matched.
_QUOTA = re.compile(r"insufficient (unused )?quota for (\S+) in flavor ([^\s,]+)")
_ASK_CAP = re.compile(r"(?:requests \(([0-9]{1,19})\) \+ current podset request )?\(([0-9]{1,19})\) > maximum "
                      r"capacity \(([0-9]{1,19})\)")
_MORE = re.compile(r"(?<![0-9])([0-9]{1,19}) more needed")
_INACTIVE = re.compile(r"ClusterQueue (\S+) is inactive")


@dataclass(frozen=True)
class Context:
    """What `status --why` fetches beyond plain status (each optional: absent when not fetched)."""
    cluster_queue: dict | None = None  # the ClusterQueue the LocalQueue points at
    local_queue: dict | None = None
    nodes: tuple[dict | Node, ...] | None = None  # the TPU nodes (name, labels and taints), when listed
    position: str = ""  # queue position, or why it is not known
    rejections: tuple[dict, ...] = ()  # the JobSet's JobCreationFailed Events (elxpk/cluster/diagnosis/job_rejections.py)
    # The Workload that preempted this one, named (records/preemptor.py describe: Kueue gives only its UID);
    # "" when no Kueue condition names one
    preemptor: str = ""
    events: tuple[dict, ...] = ()  # the Job controller's FailedCreate Events, when a Job is short of pods
    # Kueue's eviction Events of the Workload as faults (lost_slice.kueue_event_faults), when listed: once Kueue
    # admits it again its conditions are cleared, and a recovery under way has only these to name Kueue by
    evictions: tuple[Fault, ...] = ()
    # The ProvisioningRequests of the namespace, when the Workload has admission checks (why_capacity.py);
    # None when not fetched or the kind is not served.
    provisioning_requests: tuple[dict, ...] | None = None


def explain(jobset: dict | JobSet, jobs: Sequence[dict | Job], pods: Sequence[dict | Pod],
            workloads: Sequence[dict | Workload], now: float,
            context: Context | None = None, pending_after_s: float = 120.0) -> list[Reason]:
    """Every reason found, the most decisive first (Kueue before pods, pods before the pending count)."""
    context = context or Context()
    js = JobSet.of(jobset)
    job_list, pod_list, workload_list = list(map(Job.of, jobs)), list(map(Pod.of, pods)), list(map(Workload.of, workloads))
    name, namespace = js.meta.name or "", js.meta.namespace or "default"
    reasons = _jobset_reasons(js, workload_list, context)
    if context.provisioning_requests:
        reasons = with_capacity(reasons, js, workload_list, context.provisioning_requests)
    # A Job of an earlier restart attempt than the JobSet's own count (status.restarts) is one the JobSet is
    # replacing: it counted the restart before its Recreate removed the old Jobs. Its failure is the one the
    # restart answers (the first to fail is often a slice that stopped with its group, not the lost one) and
    # its back-off is moot: neither is a reason now. Without the count, the newest attempt's Jobs are current.
    newest = max([js.restarts, *(restart_attempt(j) for j in job_list)])
    current = [j for j in job_list if not j.meta.deleting and restart_attempt(j) >= newest]
    reasons += why_jobs.first_failed(name, [j for j in job_list if restart_attempt(j) == newest], pod_list, Reason)
    reasons += why_jobs.failed_create(name, namespace, current, list(context.events), Reason)
    reasons += why_jobs.backoff(name, current, pod_list, now, Reason)
    reasons += _pod_reasons(name, namespace, _current_pods(pod_list, current), now, context, pending_after_s)
    return reasons


# --- Kueue and the JobSet -------------------------------------------------------------------------------

def _jobset_reasons(jobset: JobSet, workloads: list[Workload], context: Context) -> list[Reason]:
    meta = jobset.meta
    queue = meta.labels.get(KUEUE_QUEUE)
    mine = [w for w in workloads if w.of_jobset(meta.uid)]
    name, namespace = meta.name or "", meta.namespace or "default"
    if not mine:
        if jobset.suspend and not queue:
            suspended = true_condition(jobset.conditions, "Suspended")
            said = (suspended.message or "") if suspended else ""
            return [Reason("suspended", "the JobSet is suspended (spec.suspend: true) and has no Kueue queue "
                           "label, so nothing will resume it",
                           f"set spec.suspend to false on JobSet {name} in namespace {namespace}, or recreate it "
                           "with `elxpk workload create --queue LOCALQUEUE`", f"JobSet: {said}" if said else "")]
        if jobset.suspend:
            return [Reason("suspended", f"the JobSet is suspended for Kueue queue {queue}, but Kueue made no "
                           "Workload for it", "check that Kueue's controller runs (namespace kueue-system) and "
                           f"manages JobSets, and that LocalQueue {queue} exists in namespace {namespace}")]
        return []
    workload = mine[0]
    conditions = {c.type: c for c in workload.conditions}
    out = _eviction(conditions, context.preemptor)
    if _is_true(conditions, "Finished") or _is_true(conditions, "Admitted"):
        return out
    position = f" ({context.position})" if context.position.startswith("position") else ""
    unknown = context.position if context.position and not position else ""
    if _is_true(conditions, "QuotaReserved"):
        cq = workload.cluster_queue
        pending = [c for c in workload.checks if c.state != "Ready"]
        checks = ", ".join(f"{c.name} {c.state}" + (f" ({c.message})" if c.message else "") for c in pending)
        out.append(Reason("admission-check", f"Kueue reserved quota in ClusterQueue {cq} but does not admit the "
                          f"workload yet: admission checks {checks or 'not all Ready'}",
                          "the checks' controllers decide (a ProvisioningRequest check waits for capacity); "
                          "the spec.controllerName of AdmissionCheck "
                          + ((pending[0].name or "NAME") if pending else "NAME")
                          + " names that controller; or submit to a LocalQueue without checks (--queue)"))
        return out
    reserved = conditions.get("QuotaReserved")
    message = (reserved.message if reserved else "") or "waiting for Kueue"
    quota = _QUOTA.search(message)
    inactive = _INACTIVE.search(message)
    if quota:
        resource, flavor = quota.group(2), quota.group(3)
        asked = _ASK_CAP.search(message)
        more = _MORE.search(message)
        cq_name = _cq_name(context)
        if asked:
            total = int(asked.group(1) or 0) + int(asked.group(2))
            amount = f"asks {total}, ClusterQueue {cq_name} has at most {asked.group(3)}"
            fix = (f"ask for fewer ({'--num-slices or a smaller --tpu-type' if resource == TPU else resource}), "
                   f"raise {resource} nominalQuota of flavor {flavor} in ClusterQueue {cq_name}, or use --queue "
                   "with a LocalQueue that has the quota")
        else:
            amount = f"{more.group(1)} more needed than is unused now" if more else "not enough unused quota"
            fix = ("wait for running workloads to finish (`elxpk workload list`), give this one a higher "
                   "--priority so Kueue may preempt, or use --queue with a LocalQueue that has quota free")
        out.append(Reason("quota", f"Kueue: not enough {resource} quota in flavor {flavor}: {amount}{position}",
                          fix, f"Kueue: {message}" + (f"; {unknown}" if unknown else "")))
    elif inactive:
        why = _condition_message(context.cluster_queue, "Active")
        named = re.search(r"inactive AdmissionCheck\(s\): ([^.]+)", why)
        # The Workload lists the ClusterQueue's checks even while the queue is inactive.
        checks = named.group(1) if named else ", ".join(str(c.name) for c in workload.checks if c.state != "Ready")
        cause = "admission-check" if checks else "queue-inactive"
        fix = (f"the controller of AdmissionCheck {checks} is not running or rejects its config: ask "
               f"the cluster admin (AdmissionCheck {checks}: its spec.controllerName and status), or use --queue "
               "with another LocalQueue") if checks else (f"see the status conditions of ClusterQueue "
                                                          f"{inactive.group(1)}, or use --queue with another LocalQueue")
        out.append(Reason(cause, f"Kueue: {message}" + (f": {why}" if why else f" (admission checks: {checks})"
                                                          if checks else ""), fix))  # already Kueue's words
    else:
        out.append(Reason("queued", f"Kueue: {message}{position}"))
    return out


def _eviction(conditions: dict[str | None, Condition], preemptor: str = "") -> list[Reason]:
    for kind in ("Preempted", "Evicted"):
        c = conditions.get(kind)
        if c and c.true:
            preempted = kind == "Preempted" or c.reason == "Preempted"
            fix = ("a workload of higher priority took the quota; give this one a higher --priority, or use a "
                   "LocalQueue with quota of its own") if preempted \
                else "Kueue requeues it; `elxpk workload events NAME` shows the history"
            by = f" to admit {preemptor}" if preempted and preemptor else ""  # Kueue's text has only its UID
            return [Reason("evicted", f"Kueue {kind.lower()} the workload ({c.reason}){by}", fix, f"Kueue: {c.message}")]
    return []


def _cq_name(context: Context) -> str:
    if context.cluster_queue:
        return str(ClusterQueue.of(context.cluster_queue).meta.name or "?")
    if context.local_queue:
        return str(LocalQueue.of(context.local_queue).cluster_queue or "?")
    return "(of the LocalQueue)"


def _condition_message(obj: dict | None, kind: str) -> str:
    """The message of `kind` in a ClusterQueue's conditions, while that condition is not True."""
    for c in () if obj is None else ClusterQueue.of(obj).conditions:
        if c.type == kind and not c.true:
            return str(c.message or c.reason or "")
    return ""


def _is_true(conditions: dict[str | None, Condition], kind: str) -> bool:
    c = conditions.get(kind)
    return c is not None and c.true


def _exit_meaning(code: object) -> str:
    known = BY_CODE.get(int(code)) if isinstance(code, int) else None
    return known.meaning if known else ""


# --- Pods -----------------------------------------------------------------------------------------------

def _current_pods(pods: list[Pod], jobs: list[Job]) -> list[Pod]:
    """Pods of Jobs still there and not being deleted (a JobSet restart's old pods say nothing now)."""
    live = {j.meta.uid for j in jobs if not j.meta.deleting}
    return [p for p in pods if not p.meta.deleting and any(r.uid in live for r in p.meta.owners)]


def _pod_reasons(name: str, namespace: str, pods: list[Pod], now: float, context: Context,
                 pending_after_s: float) -> list[Reason]:
    seen: dict[tuple[str, str], tuple[Reason, int]] = {}
    stale = 0
    own = _own(pods)
    for pod in pods:
        found = _one_pod(name, namespace, pod, context, own)
        for reason in found:
            key = (reason.cause, reason.text)
            seen[key] = (reason, seen.get(key, (reason, 0))[1] + 1)
        created = parse_time(pod.meta.created)
        if not found and pod.phase == "Pending" and created is not None \
                and now - created >= pending_after_s:
            stale += 1
    out = [Reason(r.cause, (f"{n} pods: " if n > 1 else "pod: ") + r.text, r.fix, r.detail)
           for r, n in seen.values()]
    if stale:
        out.append(Reason("pending", f"{stale} pods pending for more than {format_duration(pending_after_s)} "
                          "with no scheduler or kubelet verdict yet",
                          f"`elxpk workload events {name}` shows the latest events"))
    return out


def _own(pods: list[Pod]) -> Own:
    """The nodes the workload's live pods are bound to, and how many live pods it has (each asks a host)."""
    live = [p for p in pods if not p.done]
    return Own(frozenset(str(p.node) for p in live if p.node), len(live))


def _one_pod(name: str, namespace: str, pod: Pod, context: Context, own: Own) -> list[Reason]:
    out = []
    for c in pod.conditions:
        if c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable":
            out += unschedulable(pod, c.message or "", context.nodes, own)
    for cs in pod.init_containers + pod.containers:
        waiting = cs.waiting or Waiting(None, None)
        reason = waiting.reason
        if reason in WAITING_PULL:
            out.append(Reason("image-pull", f"image {cs.image} of container {cs.name} cannot be pulled ({reason})",
                              "check the image name and tag exist and that the nodes' service account can read "
                              "the registry; recreate with --docker-image IMAGE", f"kubelet: {waiting.message or ''}"))
        elif reason == "CrashLoopBackOff":
            code = cs.last_terminated.exit_code if cs.last_terminated else None
            klass = why_jobs.exit_class(int(code)) if isinstance(code, int) else ""
            meaning = _exit_meaning(code)
            out.append(Reason("crash-loop", f"container {cs.name} keeps exiting (CrashLoopBackOff, "
                              f"{cs.restarts} restarts{klass})",
                              f"`elxpk workload logs {name}{_pod_flags(pod)} --previous` shows the crashed run's "
                              "output",
                              f"kubelet: {waiting.message or ''}" + (f"; exit {code}: {meaning}" if meaning else "")))
    return out


def _pod_flags(pod: Pod) -> str:
    """The `workload logs` flags that select this pod."""
    labels = pod.meta.labels
    if labels.get(REPLICATED_JOB) == HEAD:
        return " --head"
    return f" --slice {labels.get(JOB_INDEX, '0')} --vm {labels.get(COMPLETION_INDEX, '0')}"


def stuck_line(state: str, state_age_s: float | None, reasons: list[Reason], after_s: float) -> str:
    """The one line plain `status` shows: the first reason, when stuck longer than `after_s`."""
    if state not in STUCK_STATES or not reasons or state_age_s is None or state_age_s < after_s:
        return ""
    return reasons[0].text


def state_since(jobset: dict | JobSet, jobs: Sequence[dict | Job], workloads: Sequence[dict | Workload]) -> float | None:
    """When the present state began, at the latest: the JobSet's creation, Kueue's admission, or the
    creation of the newest Job (a JobSet restart recreates them)."""
    times = [parse_time(JobSet.of(jobset).meta.created)]
    times += [parse_time(j.meta.created) for j in map(Job.of, jobs) if j.meta.labels.get(JOBSET_NAME)]
    for w in map(Workload.of, workloads):
        for c in w.conditions:
            if c.type == "Admitted" and c.true:
                times.append(c.at)
    known = [t for t in times if t is not None]
    return max(known) if known else None
