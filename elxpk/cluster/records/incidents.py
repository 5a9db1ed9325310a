"""Incidents: one normalised record per thing that went wrong, read from the objects while they exist.

Pure (objects in, records out; no I/O). Sources, as the API reports them:
- a container that terminated with a non-zero code (`state.terminated`, or `lastState.terminated` after a
  restart in place): exit code, reason (OOMKilled, Error), pod, node, slice;
- a pod's DisruptionTarget condition (preemption, eviction, node loss, kubelet termination) or a pod the
  kubelet evicted (`status.reason` Evicted);
- the Kueue Workload's Evicted / Preempted conditions;
- JobSet restarts (`status.restarts`, dated by the creation of the Jobs of each restart attempt) and the
  failed Jobs, the first of them marked;
- Warning core/v1 Events about the workload's objects.

Each exit code is classified with the trainer's exit-code table (elxpk_contract.exit_codes): `infra`
(retryable: slice lost, stall, preemption, timeout), `user` (bad settings, an error in the training code);
a SIGKILL or SIGTERM from outside (137, 143: a force delete, kill-slice, a VM going) is `infra`, the OOM
killer's 137 (reason OOMKilled) `user`; another code outside the table (134) is `unknown`: the
orchestrator counts it. Every incident has a stable `id` (a hash of what identifies it), so a recorder can append
the same incident once however often it is seen.
"""

from __future__ import annotations

import hashlib
import signal
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timezone

from elxpk.cluster.objects.labels import RESTART_ATTEMPT, parse_time
from elxpk.cluster.records import incident_merge as merge
from elxpk.cluster.records.lost_slice import exit_meaning, pod_fault, slice_of
from elxpk.shown import shown
from elxpk_contract.exit_codes import BY_CODE

INFRA, USER, UNKNOWN = "infra", "user", "unknown"
CAUSES = (INFRA, USER, UNKNOWN)
# DisruptionTarget reasons (k8s.io/api/core/v1): all outside the workload's control
DISRUPTION_REASONS = ("PreemptionByScheduler", "PreemptionByKubeScheduler", "DeletionByTaintManager",
                      "EvictionByEvictionAPI", "DeletionByPodGC", "TerminationByKubelet")


@dataclass(frozen=True)
class Incident:
    id: str
    time: str | None  # RFC 3339, as the API wrote it
    kind: str  # exit, disruption, evicted, kueue_eviction, jobset_restart, job_failed, event
    cause: str  # infra, user or unknown
    reason: str
    message: str = ""
    slice: int | None = None
    pod: str | None = None
    node: str | None = None
    container: str | None = None
    exit_code: int | None = None
    workload: str = ""
    # What happened to the pod, as lost_slice.py reads it (preempted, evicted, lost its VM, deleted, stopped by
    # SIGTERM, failed; `lost`: it exited 75, the trainer's word for stopping with its group or losing a peer)
    fault: str = ""

    def to_dict(self) -> dict:
        return asdict(self)

    def line(self) -> str:
        where = " ".join(part for part in (
            f"slice {self.slice}" if self.slice is not None else "",
            f"pod {self.pod}" if self.pod else "", f"node {self.node}" if self.node else "") if part)
        what = f"exit {self.exit_code}/{self.reason}" if self.exit_code is not None else self.reason
        text = f"{self.time or '-'}  {self.kind:<14} {self.cause:<7} {what}"
        # every field is the cluster's (a container writes its own termination message): one visible line
        return shown(text + (f"  {where}" if where else "") + (f"  {self.message}" if self.message else ""))


def _id(*parts: object) -> str:
    return hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).hexdigest()[:16]


def classify_exit(code: int, reason: str = "") -> str:
    """infra, user or unknown: the trainer's table for its own codes; a SIGKILL (137) or SIGTERM (143) from
    outside is infra (a force delete, kill-slice, a VM going), but the OOM killer's is the workload's memory
    (the kubelet's reason OOMKilled); anything else outside the table (134: jax aborting) is unknown."""
    known = BY_CODE.get(code)
    if known is not None:
        return INFRA if known.retryable else USER
    if code in (128 + signal.SIGKILL, 128 + signal.SIGTERM):
        return USER if reason == "OOMKilled" else INFRA
    return UNKNOWN


def pod_incidents(pod: dict, workload: str = "") -> list[Incident]:
    meta, spec, status = pod.get("metadata", {}), pod.get("spec", {}), pod.get("status") or {}
    labels = meta.get("labels") or {}
    fault = pod_fault(pod)
    base = {"slice": slice_of(labels), "pod": meta.get("name"), "node": spec.get("nodeName"), "workload": workload,
            "fault": "" if fault is None else fault[1].cause}
    uid = meta.get("uid", meta.get("name"))
    found: list[Incident] = []
    # A disrupted or evicted pod's container is then killed (137): that exit is the disruption's, one incident
    disrupted = status.get("reason") == "Evicted" or any(
        c.get("type") == "DisruptionTarget" and c.get("status") == "True" for c in status.get("conditions") or [])
    killed: list[str] = []
    for cs in status.get("containerStatuses") or []:
        for when in ("lastState", "state"):
            term = (cs.get(when) or {}).get("terminated")
            if not term or int(term.get("exitCode", 0)) == 0:
                continue
            if disrupted and when == "state":
                killed.append(f"container {cs.get('name')} exited {term['exitCode']}"
                              + (f" ({exit_meaning(int(term['exitCode']))})" if exit_meaning(int(term["exitCode"])) else ""))
                continue
            code = int(term["exitCode"])
            finished = term.get("finishedAt")
            meaning = exit_meaning(code)
            found.append(Incident(
                _id("exit", uid, cs.get("name"), code, finished or cs.get("restartCount", 0)), finished, "exit",
                classify_exit(code, term.get("reason") or ""), term.get("reason") or "Error",
                "; ".join(p for p in (meaning, term.get("message", "")) if p), container=cs.get("name"),
                exit_code=code, **base))
    then = "; ".join(killed)
    target = next((c for c in status.get("conditions") or []
                   if c.get("type") == "DisruptionTarget" and c.get("status") == "True"), None)
    if target is not None:
        found.append(Incident(_id("disruption", uid, target.get("reason")), target.get("lastTransitionTime"),
                              "disruption", INFRA, target.get("reason") or "DisruptionTarget",
                              "; ".join(p for p in (target.get("message", ""), then) if p), **base))
    elif status.get("reason") == "Evicted":  # the kubelet's node-pressure eviction (no DisruptionTarget on old nodes)
        found.append(Incident(_id("evicted", uid), status.get("startTime"), "evicted", INFRA, "Evicted",
                              "; ".join(p for p in (status.get("message", ""), then) if p), **base))
    return found


def job_incidents(jobs: list[dict], workload: str = "") -> list[Incident]:
    failed = []
    for job in jobs:
        labels = job["metadata"].get("labels") or {}
        for c in (job.get("status") or {}).get("conditions") or []:
            if c.get("type") == "Failed" and c.get("status") == "True":
                failed.append((parse_time(c.get("lastTransitionTime")) or 0.0, job, c, labels))
    failed.sort(key=lambda row: row[0])
    found = []
    for n, (_, job, c, labels) in enumerate(failed):
        reason = c.get("reason") or "Failed"
        cause = USER if reason == "PodFailurePolicy" and "FailJob" in (c.get("message") or "") else UNKNOWN
        message = ("first failed Job; " if n == 0 else "") + (c.get("message") or "")
        found.append(Incident(_id("job_failed", job["metadata"].get("uid"), reason), c.get("lastTransitionTime"),
                              "job_failed", cause, reason, f"Job {job['metadata']['name']}: {message}",
                              slice=slice_of(labels), workload=workload))
    return found


def jobset_incidents(jobset: dict, jobs: list[dict], restart_times: Sequence[float] = ()) -> list[Incident]:
    """One per JobSet restart, dated by the creation of the Jobs of its attempt, else by the JobSet
    controller's restart Events (`restart_times`, oldest first: the newest ones are the newest restarts'),
    else (both gone) undated, with the first dated later restart as a bound."""
    status = jobset.get("status") or {}
    name, uid = jobset["metadata"].get("name", ""), jobset["metadata"].get("uid", "")
    restarts = int(status.get("restarts") or 0)
    # absent while 0 (omitempty in the JobSet API), as when every restart came from an IgnoreMaxRestarts rule
    counted = int(status.get("restartsCountTowardsMax") or 0)
    started: dict[int, str] = {}
    for job in jobs:
        attempt = int((job["metadata"].get("labels") or {}).get(RESTART_ATTEMPT, 0))
        created = job["metadata"].get("creationTimestamp")
        if created and (attempt not in started or created < started[attempt]):
            started[attempt] = created
    dated: dict[int, str | None] = {n: started.get(n) for n in range(1, restarts + 1)}
    for i, when in enumerate(reversed(restart_times)):
        n = restarts - i
        if n >= 1 and dated[n] is None:
            dated[n] = _rfc3339(when)
    found = []
    for n in range(1, restarts + 1):
        later = next((dated[m] for m in range(n + 1, restarts + 1) if dated[m]), None)
        note = "" if dated[n] or not later else f"; its time is no longer kept (before {later})"
        found.append(Incident(_id("jobset_restart", uid, n), dated[n], "jobset_restart", UNKNOWN,
                              "Recreate", f"JobSet restart {n} of {name} ({counted} counted towards maxRestarts)"
                              + note, workload=name))
    return found


def _rfc3339(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def kueue_incidents(workloads: list[dict], workload: str = "") -> list[Incident]:
    """One per eviction: Kueue marks a preemption both Evicted (reason Preempted) and Preempted (its kind,
    InClusterQueue or InCohort...); the Preempted condition words it, the Evicted one's id keeps it."""
    found = []
    for w in workloads:
        conditions = [c for c in (w.get("status") or {}).get("conditions") or []
                      if c.get("type") in ("Evicted", "Preempted") and c.get("status") == "True"]
        preempted = next((c for c in conditions if c.get("type") == "Preempted"), None)
        evicted = next((c for c in conditions if c.get("type") == "Evicted"), None)
        if preempted is not None and evicted is not None and evicted.get("reason") == "Preempted":
            conditions = [{**preempted, "type": "Evicted", "reason": evicted.get("reason"),
                           "lastTransitionTime": evicted.get("lastTransitionTime"),
                           "shown": f"Preempted/{preempted.get('reason')}"}]
        for c in conditions:
            found.append(Incident(_id("kueue", w["metadata"].get("uid"), c.get("type"), c.get("reason"),
                                      c.get("lastTransitionTime")), c.get("lastTransitionTime"),
                                  "kueue_eviction", INFRA, c.get("shown") or c.get("reason") or c["type"],
                                  f"Kueue Workload {w['metadata']['name']}: {c.get('message', '')}",
                                  workload=workload))
    return found


# Normal-type Events that still report an incident (Kueue's and the scheduler's preemptions, evictions).
# Kueue names each eviction's Event EvictedDueTo<condition reason> (PodsReadyTimeout, Deactivated,
# AdmissionCheck, ClusterQueueStopped, ...): every one of them is.
INCIDENT_REASONS = ("Preempted", "Evicted", "TaintManagerEviction")  # and every KUEUE_EVICTED one
KUEUE_EVICTED = "EvictedDueTo"


def reports_incident(reason: str) -> bool:
    """A Normal Event's reason that reports an incident."""
    return reason in INCIDENT_REASONS or reason.startswith(KUEUE_EVICTED)


def event_incidents(events: list[dict], names: set[str], workload: str = "") -> list[Incident]:
    """Warning Events (and Normal ones that `reports_incident`) whose object is one of `names` (the JobSet,
    its Jobs and Pods, its Kueue Workload)."""
    found = []
    for e in events:
        involved = e.get("involvedObject") or {}
        if involved.get("name") not in names:
            continue
        if e.get("type") != "Warning" and not reports_incident(e.get("reason") or ""):
            continue
        when = e.get("lastTimestamp") or e.get("eventTime") or e.get("firstTimestamp")
        pod = involved.get("name") if involved.get("kind") == "Pod" else None
        reason = e.get("reason") or "Warning"
        cause = INFRA if reports_incident(reason) or reason == "NodeNotReady" else UNKNOWN
        found.append(Incident(_id("event", e["metadata"].get("uid"), when), when, "event", cause, reason,
                              f"{involved.get('kind', '')}/{involved.get('name', '')}: {e.get('message', '')}",
                              pod=pod, node=(e.get("source") or {}).get("host"), workload=workload))
    return found


def collect(jobset: dict, jobs: list[dict], pods: list[dict], workloads: list[dict],
            events: Iterable[dict] = ()) -> list[Incident]:
    """Every incident the objects show, oldest first (undated ones last), each once."""
    name = jobset["metadata"].get("name", "")
    found = [i for pod in pods for i in pod_incidents(pod, name)]
    found += job_incidents(jobs, name) + kueue_incidents(workloads, name)
    events = merge.own_events(events, jobset, [{**o, "kind": kind} for kind, group in (
        ("JobSet", [jobset]), ("Job", jobs), ("Pod", pods), ("Workload", workloads)) for o in group])
    found += jobset_incidents(jobset, jobs, merge.restart_times(events, name))
    conditions: dict[tuple[str, str], list[float]] = {}
    for kind, group, types in (("Job", jobs, ("Failed",)), ("Workload", workloads, ("Evicted", "Preempted"))):
        for o in group:
            for c in (o.get("status") or {}).get("conditions") or []:
                if c.get("type") in types and c.get("status") == "True" and parse_time(c.get("lastTransitionTime")):
                    conditions.setdefault((kind, o["metadata"]["name"]), []).append(
                        parse_time(c["lastTransitionTime"]) or 0.0)
    names = {name} | {o["metadata"]["name"] for o in (*jobs, *pods, *workloads)}
    found += event_incidents(merge.not_restated(events, name, conditions, reports_incident), names, name)
    unique = {i.id: i for i in found}
    return sorted(unique.values(), key=lambda i: (_sort_time(i) is None, _sort_time(i) or 0.0, i.kind, i.id))


def _sort_time(incident: Incident) -> float | None:
    """Its time; for a restart whose time is no longer kept, just before the later restart that bounds it."""
    if incident.time is None and "(before " in incident.message:
        bound = parse_time(incident.message.rsplit("(before ", 1)[1].rstrip(")"))
        return None if bound is None else bound - 1e-3
    return parse_time(incident.time)


def restart_causes(pods: list[dict]) -> dict[str, int]:
    """Pod-level restarts and failures of the pods still there, by cause. A disruption (preemption,
    eviction, node loss) is infra whatever the container's code; otherwise the code of the container's
    last termination decides for all its restarts (the API keeps only the last one)."""
    counts = dict.fromkeys(CAUSES, 0)
    for pod in pods:
        status = pod.get("status") or {}
        disrupted = any(i.kind in ("disruption", "evicted") for i in pod_incidents(pod))
        for cs in status.get("containerStatuses") or []:
            last = (cs.get("lastState") or {}).get("terminated") or {}
            now = (cs.get("state") or {}).get("terminated") or {}
            restarts = int(cs.get("restartCount") or 0)
            failed_now = int(now.get("exitCode", 0)) != 0
            n = restarts + (1 if failed_now else 0)
            ended = now if failed_now else last
            code = int(ended.get("exitCode", 0) or 0)
            if n and (disrupted or code):
                counts[INFRA if disrupted else classify_exit(code, ended.get("reason") or "")] += n
        if disrupted and not any(int(cs.get("restartCount") or 0) or (cs.get("state") or {}).get("terminated")
                                 for cs in status.get("containerStatuses") or []):
            counts[INFRA] += 1
    return counts
