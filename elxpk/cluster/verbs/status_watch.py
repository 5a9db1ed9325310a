"""`workload status NAME --watch`: the status of a workload kept current by the pod watch, not by polling.

A refresh is one `status` (GET the JobSet, LIST its Jobs, LIST its counted pods, LIST its Kueue Workload,
the progress record): never more API calls than `status` itself. Refreshes happen
- when the pod watch reports a change (at most one per `min_gap_s`, so a burst of 1,024 pod changes costs
  a handful of refreshes, not 1,024), and
- whenever a watch ends; the server ends a quiet one after `refresh_s`, so what no pod shows (a Kueue
  eviction, the JobSet finishing) is seen within `refresh_s`.
Each watch resumes at the resourceVersion the last one reached (events_feed's protocol), so no pod change
is lost across a watch's end or an API outage; an incident is kept once however often it is seen: those of
the changed pods (no extra call) and those the refresh's own objects show (JobSet restarts, Kueue
evictions). An outage is ridden out as `events --watch` rides it (events_feed.Outage); the view says
"reconnecting" as soon as an answer is later than expected, since a paused API server accepts connections
and answers nothing (no error to catch until the request's own deadline).
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from elxpk.cluster.api.kube import Kube
from elxpk.cluster.diagnosis.failure_summary import LOSS_KINDS
from elxpk.cluster.objects.labels import JOBSET_NAME
from elxpk.cluster.objects.pods import Pod
from elxpk.cluster.objects.workloads import JobSet
from elxpk.cluster.records.incidents import Incident, collect, pod_incidents
from elxpk.cluster.records.status import WorkloadStatus
from elxpk.cluster.records.trainer_phase import pod_start
from elxpk.cluster.verbs.events_feed import OUTAGE_S, Outage
from elxpk.errors import ClusterError, NotFoundError

TERMINAL = ("Succeeded", "Failed")
SHOWN_INCIDENTS = 8
# An answer this much later than due (a refresh, or a watch past its own timeout) shows "reconnecting".
LATE_S = 5.0

STORAGE = "storage"  # WatchState.waiting_on while the progress record is read

# The refresh: one `status` read, handing its objects (JobSet, Jobs, Pods, Kueue Workloads) to the hook.
ReadStatus = Callable[[Callable[[JobSet, list, list, list], None]], WorkloadStatus]


@dataclass
class WatchState:
    """What the view shows; written by the watch loop, read by the view's refresh thread (under `lock`)."""

    name: str
    status: WorkloadStatus | None = None
    read_at: float = 0.0  # time.time() of the status: the view ages the trainer's ages from it
    incidents: deque = field(default_factory=lambda: deque(maxlen=SHOWN_INCIDENTS))
    new_incidents: list = field(default_factory=list)  # not yet written by the JSON stream
    incident_count: int = 0
    # id -> every loss incident seen (an exit with a code, a disruption, an eviction), kept after a JobSet
    # restart deletes its pods, so the count never says none above the exits listed under it; the view counts
    # faults from them (failure_summary.faults: one per slice killed, its group's stops apart)
    losses: dict = field(default_factory=dict)
    # pod -> when its running container started (trainer_phase.pod_start), from the pod watch: a refresh of a
    # running workload reads only its Failed pods, the watch sees them all (its first answer lists them)
    pod_starts: dict = field(default_factory=dict)
    rate: float | None = None  # trainer steps per second between the last two step records
    expect_by: float | None = None  # monotonic time the request in flight should have answered by
    answered_at: float | None = None  # monotonic time of the API's last answer (a refresh, a watch event)
    outage_note: str = ""  # the last line Outage wrote while the API failed
    # What the request in flight waits on: the API server, or (once a refresh's objects are read) the storage
    # that holds the progress record, a gs:// read whose pause is no API outage and must not read as one
    waiting_on: str = "api"
    refreshes: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def started_at(self) -> float | None:
        """When the newest running pod's process started: a progress record older is its predecessor's."""
        starts = [t for t in self.pod_starts.values() if t is not None]
        return max(starts) if starts else None

    def connection(self, now_monotonic: float) -> str:
        """'' when the API answers in time, else the 'reconnecting ...' line."""
        if self.outage_note:
            return f"reconnecting: {self.outage_note}"
        if self.expect_by is not None and now_monotonic > self.expect_by + LATE_S:
            since = self.answered_at if self.answered_at is not None else self.expect_by
            if self.waiting_on == STORAGE:
                return (f"storage not answering: no answer from the checkpoint directory for {now_monotonic - since:.0f} s"
                        " (reading the progress record; the Kubernetes API answered)")
            return f"reconnecting: no answer from the API server for {now_monotonic - since:.0f} s"
        return ""


def watch_status(kube: Kube, namespace: str, name: str, read_status: ReadStatus, state: WatchState, *,
                 on_change: Callable[[], None], clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep, refresh_s: float = 5.0, min_gap_s: float = 1.0,
                 outage_s: float = OUTAGE_S, max_watches: int | None = None) -> WorkloadStatus:
    """Follow the workload until it is Succeeded or Failed (or `max_watches` watches, for tests); its last
    status. NotFoundError when it is deleted; ClusterError when the first read fails, or when the API fails
    for longer than `outage_s` after it answered once."""
    seen: set[str] = set()

    def note(line: str) -> None:
        with state.lock:
            state.outage_note = "" if "answers again" in line else line
        on_change()

    outage = Outage(clock, sleep, outage_s, note)

    def send(incidents: list[Incident]) -> None:
        fresh = [i for i in incidents if i.id not in seen]
        if not fresh:
            return
        seen.update(i.id for i in fresh)
        fresh.sort(key=lambda i: i.time or "")
        with state.lock:
            state.incidents.extend(fresh)
            state.new_incidents.extend(fresh)
            state.incident_count += len(fresh)
            state.losses.update((i.id, i) for i in fresh if _is_loss(i))

    def refresh() -> WorkloadStatus:
        found: list[Incident] = []

        def objects(jobset: JobSet, jobs: list, pods: list, workloads: list) -> None:
            found.extend(collect(jobset, jobs, pods, workloads, []))
            # the API's part of the refresh is done: what follows is the progress record's read (gs://)
            _expect(state, clock(), answered=clock(), waiting_on=STORAGE)

        _expect(state, clock())
        try:
            status = read_status(objects)
        finally:
            _expect(state, None, waiting_on="api")
        _expect(state, None, answered=clock())
        send(found)
        with state.lock:
            state.rate = _next_rate(state.status, status, state.rate)
            state.status, state.read_at = status, time.time()
            state.refreshes += 1
        on_change()
        return status

    # The first read is not ridden out: an API never reached is a wrong endpoint or no network more often than an
    # outage, and there is nothing to keep watching yet, so it fails as `status` does, after its request's own
    # tries (piped, the view would otherwise print nothing for the outage's 10 minutes).
    status = refresh()
    resume: str | None = None
    watches = 0
    timeout_s = max(1, math.ceil(refresh_s))
    while status.state not in TERMINAL and (max_watches is None or watches < max_watches):
        watches += 1
        try:
            resume, status = _watch_once(kube, namespace, name, resume, status, send, refresh, state,
                                         clock=clock, timeout_s=timeout_s, min_gap_s=min_gap_s)
            if status.state not in TERMINAL:
                status = refresh()  # the watch ended: what no pod shows (Kueue, the JobSet's end)
        except NotFoundError:
            raise
        except ClusterError as exc:
            _expect(state, None)
            outage.failed(exc)
            on_change()
            continue
        outage.over()
    return status


def _watch_once(kube: Kube, namespace: str, name: str, resume: str | None, status: WorkloadStatus,
                send: Callable[[list[Incident]], None], refresh: Callable[[], WorkloadStatus], state: WatchState,
                *, clock: Callable[[], float], timeout_s: int, min_gap_s: float) -> tuple[str | None, WorkloadStatus]:
    """One pod watch from `resume`: (the resourceVersion reached, the last status)."""
    last = clock()
    changed = False
    _expect(state, clock() + timeout_s)
    for kind, pod in kube.watch_pods(namespace, f"{JOBSET_NAME}={name}", resource_version=resume,
                                     timeout_s=timeout_s):
        _expect(state, clock() + timeout_s, answered=clock())
        if kind == "ERROR":  # 410 Gone: the server no longer holds `resume`; the next watch starts afresh
            return None, status
        view = Pod.of(pod)
        resume = view.meta.version or resume
        if kind in ("ADDED", "MODIFIED", "DELETED"):
            send(pod_incidents(view, name))
            with state.lock:
                state.pod_starts[view.meta.name or ""] = None if kind == "DELETED" else pod_start(view)
            changed = True
        if changed and clock() - last >= min_gap_s:
            status = refresh()
            _expect(state, clock() + timeout_s)
            last, changed = clock(), False
            if status.state in TERMINAL:
                break
    _expect(state, None)
    return resume, status


def _is_loss(incident: Incident) -> bool:
    """What failure_summary.faults weighs: an exit with a code, a disruption, an eviction."""
    return incident.kind in LOSS_KINDS and (incident.kind != "exit" or bool(incident.exit_code))


def _expect(state: WatchState, by: float | None, answered: float | None = None, waiting_on: str | None = None) -> None:
    """The deadline of the request now in flight (None: none), when the API last answered, and (when it
    changes) whom the request waits on."""
    with state.lock:
        state.expect_by = by
        if answered is not None:
            state.answered_at = answered
        if waiting_on is not None:
            state.waiting_on = waiting_on


def _next_rate(before: WorkloadStatus | None, after: WorkloadStatus, kept: float | None) -> float | None:
    """The rate after a refresh. A new attempt's first step between the two records (a restart, an in-process
    recovery: `resumed_at` moved) starts the window afresh: the rate across the gap would count the restart's
    minutes as stepping time (0.02 steps/s for a group stepping at 1), and the old attempt's is no longer
    the pace; the next record within the attempt gives the first rate. Else the new rate, or the one kept
    while the trainer did not advance."""
    if before is not None and _resumed(after) is not None and _resumed(after) != _resumed(before):
        return None
    return _rate(before, after) or kept


def _resumed(status: WorkloadStatus | None) -> object:
    return None if status is None or status.progress is None else status.progress.get("resumed_at")


def _rate(before: WorkloadStatus | None, after: WorkloadStatus) -> float | None:
    """Steps per second between two progress records, by the trainer's own times of their last steps (not
    by when elxpk read them: a refresh under load takes a second); None when it did not advance."""
    if before is None or before.progress is None or after.progress is None:
        return None
    try:
        steps = int(after.progress["steps_done"]) - int(before.progress["steps_done"])
        span = float(after.progress["step_time"]) - float(before.progress["step_time"])
    except (KeyError, TypeError, ValueError):
        return None
    if steps <= 0 or span <= 0:
        return None
    return steps / span


__all__ = ["LATE_S", "SHOWN_INCIDENTS", "TERMINAL", "WatchState", "watch_status"]
