"""`workload events`: the incidents of a workload now, and (--watch) as they happen, through the watch API.

One snapshot is the bounded set of LIST calls of `status` plus one LIST of the namespace's Events. While
watching, pod changes arrive through a pod watch (one long request, which the server ends after at most
`refresh_s`); each change re-reads the pod's own incidents. Each watch resumes at the resourceVersion the
last one reached (bookmarks keep it fresh), so a pod that came and went between two watches is still seen:
the API server also ends a watch early when its reader falls behind (a snapshot under load takes seconds).
Only when the server no longer holds that point (410) does a watch start afresh. The whole snapshot is
taken again for what a pod watch cannot see (JobSet restarts, Kueue evictions, Events, the end of the
workload):
- at once when a pod of a new restart attempt appears, so each JobSet restart is recorded while the Jobs
  that date it exist (a soak may restart the JobSet every few seconds);
- every `refresh_s`, and whenever a watch ends; a quiet watch is ended by the server after `refresh_s`, so
  a workload that finished or was deleted is noticed within `refresh_s` even when no pod changes.
An incident is emitted once, however often it is seen.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from elxpk.cluster.incidents import Incident, collect, pod_incidents
from elxpk.cluster.kube import Kube
from elxpk.cluster.labels import JOBSET_NAME, RESTART_ATTEMPT
from elxpk.cluster.observe import fetch_objects
from elxpk.errors import NotFoundError


def snapshot(kube: Kube, namespace: str, name: str) -> tuple[list[Incident], bool]:
    """(the incidents the objects show now, whether the JobSet has finished)."""
    jobset, jobs, pods, workloads = fetch_objects(kube, namespace, name)
    try:
        events = kube.list_events(namespace)
    except NotFoundError:
        events = []
    status = jobset.get("status") or {}
    finished = status.get("terminalState") in ("Completed", "Failed")
    return collect(jobset, jobs, pods, workloads, events), finished


def follow(kube: Kube, namespace: str, name: str, emit: Callable[[Incident], None], *, watch: bool,
           clock: Callable[[], float], watch_s: int = 300, refresh_s: float = 60.0,
           max_watches: int | None = None, on_following: Callable[[], None] = lambda: None) -> int:
    """Emit each incident once; with `watch`, until the JobSet finishes (or `max_watches` watch requests,
    for tests), calling `on_following` once the history is out and the first watch starts. The number
    emitted."""
    seen: set[str] = set()

    def send(incidents: list[Incident]) -> None:
        for incident in incidents:
            if incident.id not in seen:
                seen.add(incident.id)
                emit(incident)

    incidents, finished = snapshot(kube, namespace, name)
    send(incidents)
    attempt = _restart_attempt_of(incidents)
    resume: str | None = None  # the resourceVersion the last watch reached
    watches = 0
    if watch and not finished:
        on_following()
    while watch and not finished and (max_watches is None or watches < max_watches):
        watches += 1
        last_refresh = clock()
        for kind, pod in kube.watch_pods(namespace, f"{JOBSET_NAME}={name}", resource_version=resume,
                                         timeout_s=max(1, min(watch_s, math.ceil(refresh_s)))):
            if kind == "ERROR":  # 410 Gone: the server no longer holds `resume`; start afresh
                resume = None
                break
            resume = (pod.get("metadata") or {}).get("resourceVersion") or resume
            if kind in ("ADDED", "MODIFIED", "DELETED"):
                send(pod_incidents(pod, name))
            labels = (pod.get("metadata") or {}).get("labels") or {}
            restarted = _int(labels.get(RESTART_ATTEMPT)) > attempt
            if restarted or clock() - last_refresh >= refresh_s:
                try:
                    incidents, finished = snapshot(kube, namespace, name)
                except NotFoundError:
                    return len(seen)  # the workload was deleted: nothing more will happen to it
                send(incidents)
                attempt = max(attempt, _restart_attempt_of(incidents), _int(labels.get(RESTART_ATTEMPT)))
                last_refresh = clock()
                if finished:
                    break
        try:
            incidents, finished = snapshot(kube, namespace, name)
        except NotFoundError:
            break  # the workload was deleted: nothing more will happen to it
        send(incidents)
        attempt = max(attempt, _restart_attempt_of(incidents))
    return len(seen)


def _int(text: object) -> int:
    try:
        return int(str(text))
    except ValueError:
        return 0


def _restart_attempt_of(incidents: list[Incident]) -> int:
    """The JobSet's restart count as the snapshot's jobset_restart incidents show it."""
    return sum(1 for i in incidents if i.kind == "jobset_restart")
