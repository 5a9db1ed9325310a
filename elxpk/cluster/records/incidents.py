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
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from typing import Any

from elxpk.cluster.objects.labels import parse_time
from elxpk.cluster.objects.pods import Event, Pod
from elxpk.cluster.objects.workloads import Job, JobSet, Workload
from elxpk.cluster.records import incident_merge as merge
from elxpk.cluster.records.lost_slice import DELETED, KUEUE_EVICTED_EVENT, exit_meaning, pod_fault, slice_of
from elxpk.shown import shown
from elxpk_contract.exit_codes import BY_CODE, SLICE_LOST

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

    @property
    def stopped_with_group(self) -> bool:
        """An exit that is a casualty, not a loss: a 75 (the trainer's word for its group stopping), or the exit
        of a graceful delete (mostly a JobSet restart taking the group down after another slice's loss)."""
        return self.kind == "exit" and (self.exit_code == SLICE_LOST.code or self.fault == DELETED)

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


def pod_incidents(pod: dict | Pod, workload: str = "") -> list[Incident]:
    view = Pod.of(pod)
    meta = view.meta
    fault = pod_fault(view)
    base: dict[str, Any] = {"slice": slice_of(meta.labels), "pod": meta.name, "node": view.node, "workload": workload,
            "fault": "" if fault is None else fault[1].cause}
    uid = meta.uid or meta.name
    found: list[Incident] = []
    # A disrupted or evicted pod's container is then killed (137): that exit is the disruption's, one incident
    target = view.disruption
    disrupted = view.reason == "Evicted" or target is not None
    killed: list[str] = []
    for cs in view.containers:
        for when, term in (("lastState", cs.last_terminated), ("state", cs.terminated)):
            if not term or int(term.exit_code or 0) == 0:
                continue
            code = int(term.exit_code)
            meaning = exit_meaning(code)
            if disrupted and when == "state":
                killed.append(f"container {cs.name} exited {term.exit_code}" + (f" ({meaning})" if meaning else ""))
                continue
            found.append(Incident(
                _id("exit", uid, cs.name, code, term.finished or cs.restarts), term.finished, "exit",
                classify_exit(code, term.reason or ""), term.reason or "Error",
                "; ".join(p for p in (meaning, term.message or "") if p), container=cs.name, exit_code=code, **base))
    then = "; ".join(killed)
    if target is not None:
        found.append(Incident(_id("disruption", uid, target.reason), target.time, "disruption", INFRA,
                              target.reason or "DisruptionTarget",
                              "; ".join(p for p in (target.message or "", then) if p), **base))
    elif view.reason == "Evicted":  # the kubelet's node-pressure eviction (no DisruptionTarget on old nodes)
        found.append(Incident(_id("evicted", uid), view.started, "evicted", INFRA, "Evicted",
                              "; ".join(p for p in (view.message or "", then) if p), **base))
    return found


def job_incidents(jobs: Iterable[dict | Job], workload: str = "") -> list[Incident]:
    failed = []
    for job in map(Job.of, jobs):
        c = job.true("Failed")
        if c is not None:
            failed.append((c.at or 0.0, job, c))
    failed.sort(key=lambda row: row[0])
    found = []
    for n, (_, job, c) in enumerate(failed):
        reason = c.reason or "Failed"
        cause = USER if reason == "PodFailurePolicy" and "FailJob" in (c.message or "") else UNKNOWN
        message = ("first failed Job; " if n == 0 else "") + (c.message or "")
        found.append(Incident(_id("job_failed", job.meta.uid, reason), c.time, "job_failed", cause, reason,
                              f"Job {job.meta.name}: {message}", slice=slice_of(job.meta.labels), workload=workload))
    return found


def jobset_incidents(jobset: dict | JobSet, jobs: Iterable[dict | Job],
                     restart_times: Sequence[float] = ()) -> list[Incident]:
    """One per JobSet restart, dated by the creation of the Jobs of its attempt, else by the JobSet
    controller's restart Events (`restart_times`, oldest first: the newest ones are the newest restarts'),
    else (both gone) undated, with the first dated later restart as a bound."""
    view = JobSet.of(jobset)
    name, uid, restarts = view.meta.name or "", view.meta.uid or "", view.restarts
    started: dict[int, str] = {}
    for job in map(Job.of, jobs):
        created = job.meta.created
        if created and (job.attempt not in started or created < started[job.attempt]):
            started[job.attempt] = created
    dated: dict[int, str | None] = {n: started.get(n) for n in range(1, restarts + 1)}
    for i, when in enumerate(reversed(restart_times)):
        n = restarts - i
        if n >= 1 and dated[n] is None:
            dated[n] = _rfc3339(when)
    found = []
    for n in range(1, restarts + 1):
        later = next((dated[m] for m in range(n + 1, restarts + 1) if dated[m]), None)
        note = "" if dated[n] or not later else f"; its time is no longer kept (before {later})"
        # The JobSet keeps one count for all its restarts: said once, on the newest (each line repeating
        # "(8 counted)" read as 8 for each); a watch meets each restart as the newest, with the count then
        counted = f" ({view.restarts_counted} of {restarts} counted towards maxRestarts)" if n == restarts else ""
        found.append(Incident(_id("jobset_restart", uid, n), dated[n], "jobset_restart", UNKNOWN,
                              "Recreate", f"JobSet restart {n} of {name}{counted}" + note, workload=name))
    return found


def _rfc3339(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def kueue_incidents(workloads: Iterable[dict | Workload], workload: str = "") -> list[Incident]:
    """One per eviction: Kueue marks a preemption both Evicted (reason Preempted) and Preempted (its kind,
    InClusterQueue or InCohort...); the Preempted condition words it, the Evicted one's id keeps it."""
    found = []
    for w in map(Workload.of, workloads):
        # (condition, the reason the line shows)
        conditions = [(c, c.reason or c.type) for c in w.conditions if c.type in ("Evicted", "Preempted") and c.true]
        preempted, evicted = w.true("Preempted"), w.true("Evicted")
        if preempted is not None and evicted is not None and evicted.reason == "Preempted":
            conditions = [(replace(preempted, type="Evicted", reason=evicted.reason, time=evicted.time),
                           f"Preempted/{preempted.reason}")]
        for c, shown_reason in conditions:
            found.append(Incident(_id("kueue", w.meta.uid, c.type, c.reason, c.time), c.time, "kueue_eviction",
                                  INFRA, shown_reason, f"Kueue Workload {w.meta.name}: {c.message or ''}",
                                  workload=workload))
    return found


# Normal-type Events that still report an incident (Kueue's and the scheduler's preemptions, evictions).
# Kueue names each eviction's Event EvictedDueTo<condition reason> (PodsReadyTimeout, Deactivated,
# AdmissionCheck, ClusterQueueStopped, ...): every one of them is.
INCIDENT_REASONS = ("Preempted", "Evicted", "TaintManagerEviction")  # and every KUEUE_EVICTED_EVENT one


def reports_incident(reason: str) -> bool:
    """A Normal Event's reason that reports an incident."""
    return reason in INCIDENT_REASONS or reason.startswith(KUEUE_EVICTED_EVENT)


def kueue_event_incidents(events: Iterable[Event], workloads: Sequence[Workload], workload: str = "") -> list[Incident]:
    """Kueue's eviction Events on the workload's Kueue Workload that no condition states any longer (a
    readmission clears Evicted and Preempted; the Events stay an hour): the one `kueue_eviction` each, as
    the conditions would have made it, with the id they would have had (the Evicted condition's type, its
    reason, EvictedDueTo<reason>'s, and its time: the same second), so a watch that saw the conditions first
    repeats nothing. `events`: already one per eviction (incident_merge.not_restated)."""
    uids = {w.meta.name: w.meta.uid for w in workloads}
    found = []
    for e in events:
        name = e.involved.name or ""
        if name not in uids:
            continue
        reason = (e.reason or "").removeprefix(KUEUE_EVICTED_EVENT) or "Evicted"
        found.append(Incident(_id("kueue", e.involved.uid or uids[name], "Evicted", reason, e.time), e.time,
                              "kueue_eviction", INFRA, reason, f"Kueue Workload {name}: {e.message or ''}",
                              workload=workload))
    return found


def _kueue_eviction_event(event: Event) -> bool:
    return event.involved.kind == "Workload" and reports_incident(event.reason or "")


def event_incidents(events: Iterable[dict | Event], names: set[str], workload: str = "") -> list[Incident]:
    """Warning Events (and Normal ones that `reports_incident`) whose object is one of `names` (the JobSet,
    its Jobs and Pods, its Kueue Workload)."""
    found = []
    for e in map(Event.of, events):
        involved = e.involved
        if involved.name not in names:
            continue
        if e.type != "Warning" and not reports_incident(e.reason or ""):
            continue
        when = e.time
        pod = involved.name if involved.kind == "Pod" else None
        reason = e.reason or "Warning"
        cause = INFRA if reports_incident(reason) or reason == "NodeNotReady" else UNKNOWN
        found.append(Incident(_id("event", e.meta.uid, when), when, "event", cause, reason,
                              f"{involved.kind or ''}/{involved.name or ''}: {e.message or ''}",
                              pod=pod, node=e.host, workload=workload))
    return found


def collect(jobset: dict | JobSet, jobs: Iterable[dict | Job], pods: Iterable[dict | Pod],
            workloads: Iterable[dict | Workload], events: Iterable[dict | Event] = ()) -> list[Incident]:
    """Every incident the objects show, oldest first (undated ones last), each once."""
    view = JobSet.of(jobset)
    job_list, pod_list, workload_list = list(map(Job.of, jobs)), list(map(Pod.of, pods)), list(map(Workload.of, workloads))
    name = view.meta.name or ""
    found = [i for pod in pod_list for i in pod_incidents(pod, name)]
    found += job_incidents(job_list, name) + kueue_incidents(workload_list, name)
    metas = [("JobSet", view.meta), *(("Job", o.meta) for o in job_list), *(("Pod", o.meta) for o in pod_list),
             *(("Workload", o.meta) for o in workload_list)]
    own = merge.own_events(map(Event.of, events), view.meta, metas)
    found += jobset_incidents(view, job_list, merge.restart_times(own, name))
    conditions: dict[tuple[str, str], list[float]] = {}
    for kind, group, types in (("Job", job_list, ("Failed",)), ("Workload", workload_list, ("Evicted", "Preempted"))):
        for o in group:
            for c in o.conditions:
                if c.type in types and c.true and c.at:
                    conditions.setdefault((kind, o.meta.name or ""), []).append(c.at or 0.0)
    names = {name} | {str(meta.name) for kind, meta in metas[1:]}
    kept = merge.not_restated(own, name, conditions, reports_incident)
    found += kueue_event_incidents([e for e in kept if _kueue_eviction_event(e)], workload_list, name)
    found += event_incidents([e for e in kept if not _kueue_eviction_event(e)], names, name)
    unique = {i.id: i for i in found}
    return sorted(unique.values(), key=lambda i: (_sort_time(i) is None, _sort_time(i) or 0.0, i.kind, i.id))


def _sort_time(incident: Incident) -> float | None:
    """Its time; for a restart whose time is no longer kept, just before the later restart that bounds it."""
    if incident.time is None and "(before " in incident.message:
        bound = parse_time(incident.message.rsplit("(before ", 1)[1].rstrip(")"))
        return None if bound is None else bound - 1e-3
    return parse_time(incident.time)


def restart_causes(pods: Iterable[dict | Pod]) -> dict[str, int]:
    """Pod-level restarts and failures of the pods still there, by cause. A disruption (preemption,
    eviction, node loss) is infra whatever the container's code; otherwise the code of the container's
    last termination decides for all its restarts (the API keeps only the last one)."""
    counts = dict.fromkeys(CAUSES, 0)
    for pod in map(Pod.of, pods):
        disrupted = any(i.kind in ("disruption", "evicted") for i in pod_incidents(pod))
        for cs in pod.containers:
            failed_now = cs.terminated is not None and int(cs.terminated.exit_code or 0) != 0
            n = cs.restarts + (1 if failed_now else 0)
            ended = cs.terminated if failed_now else cs.last_terminated
            code = int(ended.exit_code or 0) if ended else 0
            if n and (disrupted or code):
                counts[INFRA if disrupted else classify_exit(code, (ended.reason if ended else "") or "")] += n
        if disrupted and not any(cs.restarts or cs.terminated for cs in pod.containers):
            counts[INFRA] += 1
    return counts
