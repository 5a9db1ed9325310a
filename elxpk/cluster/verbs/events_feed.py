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
  a workload that finished or was deleted is noticed within `refresh_s` even when no pod changes. The
  notifications shorten it while they wait for what only a snapshot shows (NotifyingWatch.refresh_s: a
  recovery ends at the trainer's first step, in its progress record): an alert is sent seconds after its
  event, not up to a minute. (Not at once when a pod finishes: the Job's counts lag its pod's by a moment,
  and a look then reads the slice healthy, a recovery that never was.)
An incident is emitted once, however often it is seen.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from elxpk.cluster.api.api_errors import ApiFailure
from elxpk.cluster.api.kube import Kube
from elxpk.cluster.objects.labels import JOBSET_NAME, RESTART_ATTEMPT
from elxpk.cluster.objects.pods import Pod
from elxpk.cluster.records.incidents import Incident, collect, pod_incidents
from elxpk.cluster.records.status import finished as jobset_finished
from elxpk.cluster.verbs.observe import fetch_objects
from elxpk.errors import ClusterError, NotFoundError
from elxpk.retry_policy import REQUESTS
from elxpk.units import format_duration

Refresh = float | Callable[[], float]  # seconds between snapshots, or what says it at each watch

# How long `events --watch` rides out an API outage (no connection, 5xx, no answer in time) before it gives
# up with exit 1; docs/cluster.md states it. The pauses between its tries are the one retry policy's.
OUTAGE_S = 600.0


# What a snapshot's objects are also given to (the JobSet, its Jobs, Pods and Kueue Workloads), e.g. the
# notification rules (elxpk/notify/watch.py): they cost no call of their own.
ObjectsHook = Callable[[dict, list, list, list], None]


def snapshot(kube: Kube, namespace: str, name: str, on_objects: ObjectsHook | None = None
             ) -> tuple[list[Incident], bool]:
    """(the incidents the objects show now, whether the JobSet has finished)."""
    jobset, jobs, pods, workloads = fetch_objects(kube, namespace, name)
    try:
        events = kube.list_events(namespace)
    except NotFoundError:
        events = []
    finished = jobset_finished(jobset) is not None  # terminalState or the condition, as status reads it
    if on_objects is not None:
        on_objects(jobset, jobs, pods, workloads)
    return collect(jobset, jobs, pods, workloads, events), finished


def follow(kube: Kube, namespace: str, name: str, emit: Callable[[Incident], None], *, watch: bool,
           clock: Callable[[], float], watch_s: int = 300, refresh_s: Refresh = 60.0,
           max_watches: int | None = None, on_following: Callable[[], None] = lambda: None,
           sleep: Callable[[float], None] = time.sleep, outage_s: float = OUTAGE_S,
           on_outage: Callable[[str], None] = lambda line: None, on_objects: ObjectsHook | None = None) -> int:
    """Emit each incident once; with `watch`, until the JobSet finishes (or `max_watches` watch requests,
    for tests), calling `on_following` once the history is out and the first watch starts. The number
    emitted. While watching, an API outage (no connection, 5xx, no answer in time) is ridden out for up to
    `outage_s`: the next snapshot and a watch from the last resourceVersion reached lose nothing, and `seen`
    repeats nothing. `on_objects` gets each snapshot's objects."""
    seen: set[str] = set()
    outage = Outage(clock, sleep, outage_s, on_outage)

    def send(incidents: list[Incident]) -> None:
        for incident in incidents:
            if incident.id not in seen:
                seen.add(incident.id)
                emit(incident)

    incidents, finished = outage.ride(lambda: snapshot(kube, namespace, name, on_objects)) if watch else \
        snapshot(kube, namespace, name, on_objects)
    send(incidents)
    attempt = _restart_attempt_of(incidents)
    resume: str | None = None  # the resourceVersion the last watch reached
    watches = 0
    if watch and not finished:
        on_following()
    while watch and not finished and (max_watches is None or watches < max_watches):
        watches += 1
        try:
            resume, attempt, finished, deleted = _watch_once(kube, namespace, name, send, resume, attempt,
                                                             clock=clock, watch_s=watch_s, refresh_s=refresh_s,
                                                             on_objects=on_objects)
            if deleted:
                break
            incidents, finished = snapshot(kube, namespace, name, on_objects)
        except NotFoundError:
            break  # the workload was deleted: nothing more will happen to it
        except ClusterError as exc:
            outage.failed(exc)
            continue  # a snapshot and a watch from `resume` again
        outage.over()
        send(incidents)
        attempt = max(attempt, _restart_attempt_of(incidents))
    return len(seen)


def _watch_once(kube: Kube, namespace: str, name: str, send: Callable[[list[Incident]], None],
                resume: str | None, attempt: int, *, clock: Callable[[], float], watch_s: int,
                refresh_s: Refresh, on_objects: ObjectsHook | None = None) -> tuple[str | None, int, bool, bool]:
    """One pod watch: (the resourceVersion reached, the restart attempt seen, finished, deleted)."""
    finished = False
    last_refresh = clock()
    every = refresh_s() if callable(refresh_s) else refresh_s  # read once a watch: the watch's own timeout
    for kind, pod in kube.watch_pods(namespace, f"{JOBSET_NAME}={name}", resource_version=resume,
                                     timeout_s=max(1, min(watch_s, math.ceil(every)))):
        if kind == "ERROR":  # 410 Gone: the server no longer holds `resume`; start afresh
            return None, attempt, finished, False
        view = Pod.of(pod)
        resume = view.meta.version or resume
        if kind in ("ADDED", "MODIFIED", "DELETED"):
            send(pod_incidents(view, name))
        labels = view.meta.labels
        restarted = _int(labels.get(RESTART_ATTEMPT)) > attempt
        if restarted or clock() - last_refresh >= every:
            try:
                incidents, finished = snapshot(kube, namespace, name, on_objects)
            except NotFoundError:
                return resume, attempt, finished, True  # deleted: nothing more will happen to it
            send(incidents)
            attempt = max(attempt, _restart_attempt_of(incidents), _int(labels.get(RESTART_ATTEMPT)))
            last_refresh = clock()
            if finished:
                break
    return resume, attempt, finished, False


class Outage:
    """How long the API has failed in a row; ClusterError once that passes `limit_s`, or at once for what
    waiting does not mend (403, an answer that is not the object asked for). Bounded by time, not by tries:
    the pause after the n-th failure in a row is elxpk/retry_policy.py's (0.5 s doubled, at most 30 s), on
    top of each request's own tries."""

    def __init__(self, clock: Callable[[], float], sleep: Callable[[float], None], limit_s: float,
                 note: Callable[[str], None]) -> None:
        self.clock, self.sleep, self.limit_s, self.note = clock, sleep, limit_s, note
        self.since: float | None = None
        self.failures = 0  # in a row

    def ride(self, call: Callable[[], Any]) -> Any:
        while True:
            try:
                result = call()
            except NotFoundError:
                raise
            except ClusterError as exc:
                self.failed(exc)
                continue
            self.over()
            return result

    def failed(self, exc: ClusterError) -> None:
        if not isinstance(exc, ApiFailure) or not exc.retryable:
            raise exc
        now = self.clock()
        if self.since is None:
            self.since = now
            self.note(f"the API server is not answering ({exc}); retrying for up to {format_duration(self.limit_s)}")
        if now - self.since >= self.limit_s:
            raise ClusterError(f"{exc} (still failing after {format_duration(now - self.since)} of retries; "
                               "run the same command again to resume: incidents already recorded are kept "
                               "once)") from None
        self.failures += 1
        self.sleep(REQUESTS.pause(self.failures, exc.retry_after))

    def over(self) -> None:
        if self.since is not None:
            self.note(f"the API server answers again after {format_duration(self.clock() - self.since)}")
        self.since, self.failures = None, 0


def _int(text: object) -> int:
    try:
        return int(str(text))
    except ValueError:
        return 0


def _restart_attempt_of(incidents: list[Incident]) -> int:
    """The JobSet's restart count as the snapshot's jobset_restart incidents show it."""
    return sum(1 for i in incidents if i.kind == "jobset_restart")
