"""`workload events`: the incidents of a workload now, and (--watch) as they happen, through the watch API.

One snapshot is the bounded set of LIST calls of `status` plus one LIST of the namespace's Events. While
watching, pod changes arrive through a pod watch (one long request, ended by the server after
`watch_s`); each change re-reads the pod's own incidents, and every `refresh_s` (and whenever a watch
ends) the whole snapshot is taken again, for what a pod watch cannot see (JobSet restarts, Kueue
evictions, Events). An incident is emitted once, however often it is seen.
"""

from __future__ import annotations

from collections.abc import Callable

from elxpk.cluster.incidents import Incident, collect, pod_incidents
from elxpk.cluster.kube import Kube
from elxpk.cluster.labels import JOBSET_NAME
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
           max_watches: int | None = None) -> int:
    """Emit each incident once; with `watch`, until the JobSet finishes (or `max_watches` watch requests,
    for tests). The number emitted."""
    seen: set[str] = set()

    def send(incidents: list[Incident]) -> None:
        for incident in incidents:
            if incident.id not in seen:
                seen.add(incident.id)
                emit(incident)

    incidents, finished = snapshot(kube, namespace, name)
    send(incidents)
    watches = 0
    while watch and not finished and (max_watches is None or watches < max_watches):
        watches += 1
        last_refresh = clock()
        for kind, pod in kube.watch_pods(namespace, f"{JOBSET_NAME}={name}", timeout_s=watch_s):
            if kind in ("ADDED", "MODIFIED", "DELETED"):
                send(pod_incidents(pod, name))
            if clock() - last_refresh >= refresh_s:
                incidents, finished = snapshot(kube, namespace, name)
                send(incidents)
                last_refresh = clock()
                if finished:
                    break
        try:
            incidents, finished = snapshot(kube, namespace, name)
        except NotFoundError:
            break  # the workload was deleted: nothing more will happen to it
        send(incidents)
    return len(seen)
