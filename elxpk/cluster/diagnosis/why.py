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
from elxpk.cluster.records.lost_slice import restart_attempt
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
    nodes: tuple[dict, ...] | None = None  # the TPU nodes' metadata.labels and spec.taints, when listed
    position: str = ""  # queue position, or why it is not known
    rejections: tuple[dict, ...] = ()  # the JobSet's JobCreationFailed Events (elxpk/cluster/diagnosis/job_rejections.py)
    events: tuple[dict, ...] = ()  # the Job controller's FailedCreate Events, when a Job is short of pods
    # The ProvisioningRequests of the namespace, when the Workload has admission checks (why_capacity.py);
    # None when not fetched or the kind is not served.
    provisioning_requests: tuple[dict, ...] | None = None


def explain(jobset: dict, jobs: list[dict], pods: list[dict], workloads: list[dict], now: float,
            context: Context | None = None, pending_after_s: float = 120.0) -> list[Reason]:
    """Every reason found, the most decisive first (Kueue before pods, pods before the pending count)."""
    context = context or Context()
    name = jobset.get("metadata", {}).get("name", "")
    namespace = jobset.get("metadata", {}).get("namespace", "default")
    reasons = _jobset_reasons(jobset, workloads, context)
    if context.provisioning_requests:
        reasons = with_capacity(reasons, jobset, workloads, context.provisioning_requests)
    current = [j for j in jobs if not j["metadata"].get("deletionTimestamp")]
    # A failed Job of an earlier restart attempt is a failure the JobSet already restarted from: no fix is due
    newest = max((restart_attempt(j) for j in jobs), default=0)
    reasons += why_jobs.first_failed(name, [j for j in jobs if restart_attempt(j) == newest], pods, Reason)
    reasons += why_jobs.failed_create(name, namespace, current, list(context.events), Reason)
    reasons += why_jobs.backoff(name, current, pods, now, Reason)
    reasons += _pod_reasons(name, namespace, _current_pods(pods, jobs), now, context, pending_after_s)
    return reasons


# --- Kueue and the JobSet -------------------------------------------------------------------------------

def _jobset_reasons(jobset: dict, workloads: list[dict], context: Context) -> list[Reason]:
    meta, spec = jobset.get("metadata", {}), jobset.get("spec", {})
    queue = (meta.get("labels") or {}).get(KUEUE_QUEUE)
    uid = meta.get("uid")
    mine = [w for w in workloads if (w["metadata"].get("labels") or {}).get("kueue.x-k8s.io/job-uid") == uid]
    name, namespace = meta.get("name", ""), meta.get("namespace", "default")
    if not mine:
        if spec.get("suspend") and not queue:
            said = next((c.get("message", "") for c in (jobset.get("status") or {}).get("conditions") or []
                         if c.get("type") == "Suspended" and c.get("status") == "True"), "")
            return [Reason("suspended", "the JobSet is suspended (spec.suspend: true) and has no Kueue queue "
                           "label, so nothing will resume it",
                           f"set spec.suspend to false on JobSet {name} in namespace {namespace}, or recreate it "
                           "with `elxpk workload create --queue LOCALQUEUE`", f"JobSet: {said}" if said else "")]
        if spec.get("suspend"):
            return [Reason("suspended", f"the JobSet is suspended for Kueue queue {queue}, but Kueue made no "
                           "Workload for it", "check that Kueue's controller runs (namespace kueue-system) and "
                           f"manages JobSets, and that LocalQueue {queue} exists in namespace {namespace}")]
        return []
    workload = mine[0]
    status = workload.get("status") or {}
    conditions = {c.get("type"): c for c in status.get("conditions") or []}
    out = _eviction(conditions)
    if _is_true(conditions, "Finished") or _is_true(conditions, "Admitted"):
        return out
    position = f" ({context.position})" if context.position.startswith("position") else ""
    unknown = context.position if context.position and not position else ""
    if _is_true(conditions, "QuotaReserved"):
        cq = (status.get("admission") or {}).get("clusterQueue", "")
        pending = [c for c in status.get("admissionChecks") or [] if c.get("state") != "Ready"]
        checks = ", ".join(f"{c.get('name')} {c.get('state')}" + (f" ({c['message']})" if c.get("message") else "")
                           for c in pending)
        out.append(Reason("admission-check", f"Kueue reserved quota in ClusterQueue {cq} but does not admit the "
                          f"workload yet: admission checks {checks or 'not all Ready'}",
                          "the checks' controllers decide (a ProvisioningRequest check waits for capacity); "
                          "the spec.controllerName of AdmissionCheck "
                          + (pending[0].get("name", "NAME") if pending else "NAME")
                          + " names that controller; or submit to a LocalQueue without checks (--queue)"))
        return out
    message = (conditions.get("QuotaReserved") or {}).get("message", "") or "waiting for Kueue"
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
        checks = named.group(1) if named else ", ".join(
            str(c.get("name")) for c in status.get("admissionChecks") or [] if c.get("state") != "Ready")
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


def _eviction(conditions: dict[str, dict]) -> list[Reason]:
    for kind in ("Preempted", "Evicted"):
        c = conditions.get(kind)
        if c and c.get("status") == "True":
            fix = ("a workload of higher priority took the quota; give this one a higher --priority, or use a "
                   "LocalQueue with quota of its own") if kind == "Preempted" or c.get("reason") == "Preempted" \
                else "Kueue requeues it; `elxpk workload events NAME` shows the history"
            return [Reason("evicted", f"Kueue {kind.lower()} the workload ({c.get('reason')})", fix,
                           f"Kueue: {c.get('message')}")]
    return []


def _cq_name(context: Context) -> str:
    if context.cluster_queue:
        return str(context.cluster_queue.get("metadata", {}).get("name", "?"))
    if context.local_queue:
        return str((context.local_queue.get("spec") or {}).get("clusterQueue", "?"))
    return "(of the LocalQueue)"


def _condition_message(obj: dict | None, kind: str) -> str:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == kind and c.get("status") != "True":
            return str(c.get("message") or c.get("reason") or "")
    return ""


def _is_true(conditions: dict[str, dict], kind: str) -> bool:
    return (conditions.get(kind) or {}).get("status") == "True"


def _exit_meaning(code: object) -> str:
    known = BY_CODE.get(int(code)) if isinstance(code, int) else None
    return known.meaning if known else ""


# --- Pods -----------------------------------------------------------------------------------------------

def _current_pods(pods: list[dict], jobs: list[dict]) -> list[dict]:
    """Pods of Jobs still there and not being deleted (a JobSet restart's old pods say nothing now)."""
    live = {j["metadata"].get("uid") for j in jobs if not j["metadata"].get("deletionTimestamp")}
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")
            and any(r.get("uid") in live for r in p["metadata"].get("ownerReferences") or [])]


def _pod_reasons(name: str, namespace: str, pods: list[dict], now: float, context: Context,
                 pending_after_s: float) -> list[Reason]:
    seen: dict[tuple[str, str], tuple[Reason, int]] = {}
    stale = 0
    own = _own(pods)
    for pod in pods:
        found = _one_pod(name, namespace, pod, context, own)
        for reason in found:
            key = (reason.cause, reason.text)
            seen[key] = (reason, seen.get(key, (reason, 0))[1] + 1)
        status = pod.get("status") or {}
        created = parse_time(pod["metadata"].get("creationTimestamp"))
        if not found and status.get("phase") == "Pending" and created is not None \
                and now - created >= pending_after_s:
            stale += 1
    out = [Reason(r.cause, (f"{n} pods: " if n > 1 else "pod: ") + r.text, r.fix, r.detail)
           for r, n in seen.values()]
    if stale:
        out.append(Reason("pending", f"{stale} pods pending for more than {format_duration(pending_after_s)} "
                          "with no scheduler or kubelet verdict yet",
                          f"`elxpk workload events {name}` shows the latest events"))
    return out


def _own(pods: list[dict]) -> Own:
    """The nodes the workload's live pods are bound to, and how many live pods it has (each asks a host)."""
    live = [p for p in pods if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
    return Own(frozenset(str(n) for p in live if (n := (p.get("spec") or {}).get("nodeName"))), len(live))


def _one_pod(name: str, namespace: str, pod: dict, context: Context, own: Own) -> list[Reason]:
    status = pod.get("status") or {}
    out = []
    for c in status.get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "Unschedulable":
            out += unschedulable(pod, c.get("message") or "", context.nodes, own)
    for cs in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
        waiting = (cs.get("state") or {}).get("waiting") or {}
        reason = waiting.get("reason")
        if reason in WAITING_PULL:
            out.append(Reason("image-pull", f"image {cs.get('image')} of container {cs.get('name')} cannot be "
                              f"pulled ({reason})",
                              "check the image name and tag exist and that the nodes' service account can read "
                              "the registry; recreate with --docker-image IMAGE", f"kubelet: {waiting.get('message', '')}"))
        elif reason == "CrashLoopBackOff":
            last = ((cs.get("lastState") or {}).get("terminated") or {})
            code = last.get("exitCode")
            klass = why_jobs.exit_class(int(code)) if isinstance(code, int) else ""
            meaning = _exit_meaning(code)
            out.append(Reason("crash-loop", f"container {cs.get('name')} keeps exiting (CrashLoopBackOff, "
                              f"{cs.get('restartCount', 0)} restarts{klass})",
                              f"`elxpk workload logs {name}{_pod_flags(pod)} --previous` shows the crashed run's "
                              "output",
                              f"kubelet: {waiting.get('message', '')}" + (f"; exit {code}: {meaning}" if meaning else "")))
    return out


def _pod_flags(pod: dict) -> str:
    """The `workload logs` flags that select this pod."""
    labels = pod["metadata"].get("labels") or {}
    if labels.get(REPLICATED_JOB) == HEAD:
        return " --head"
    return f" --slice {labels.get(JOB_INDEX, '0')} --vm {labels.get(COMPLETION_INDEX, '0')}"


def stuck_line(state: str, state_age_s: float | None, reasons: list[Reason], after_s: float) -> str:
    """The one line plain `status` shows: the first reason, when stuck longer than `after_s`."""
    if state not in STUCK_STATES or not reasons or state_age_s is None or state_age_s < after_s:
        return ""
    return reasons[0].text


def state_since(jobset: dict, jobs: list[dict], workloads: list[dict]) -> float | None:
    """When the present state began, at the latest: the JobSet's creation, Kueue's admission, or the
    creation of the newest Job (a JobSet restart recreates them)."""
    times = [parse_time(jobset.get("metadata", {}).get("creationTimestamp"))]
    times += [parse_time(j["metadata"].get("creationTimestamp")) for j in jobs
              if (j["metadata"].get("labels") or {}).get(JOBSET_NAME)]
    for w in workloads:
        for c in (w.get("status") or {}).get("conditions") or []:
            if c.get("type") == "Admitted" and c.get("status") == "True":
                times.append(parse_time(c.get("lastTransitionTime")))
    known = [t for t in times if t is not None]
    return max(known) if known else None
