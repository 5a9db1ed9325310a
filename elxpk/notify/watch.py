"""The notifications of one `events --watch`: the rules (rules.py) fed from what the watch already reads,
and the alerts they raise handed to the sender (delivery.py).

Incidents come from the watch as it emits them; snapshots (the JobSet, its Jobs, Pods and Kueue Workloads)
from events_feed's `on_objects`, so the rules cost no API call of their own. The one read besides is the
trainer's progress record (for `checkpoint-stale`), at most once per `progress_every_s` and only when that
alert is wanted. Everything here runs on the watch loop and only enqueues: sending is the worker's.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable

from elxpk.cluster.diagnosis import why
from elxpk.cluster.objects.labels import parse_time
from elxpk.cluster.objects.pods import Pod
from elxpk.cluster.objects.workloads import JobSet, Workload
from elxpk.cluster.records import preemptor
from elxpk.cluster.records.chips import finished_chip_hours
from elxpk.cluster.records.incidents import Incident
from elxpk.cluster.records.lost_slice import Fault, kueue_event_faults, kueue_fault, lost_slice
from elxpk.cluster.records.progress import progress_of, setting_value
from elxpk.cluster.records.status import WorkloadStatus, compute_status
from elxpk.errors import ElxpkError
from elxpk.notify.delivery import DeliveryFailed, Notifier, Policy, payload, run_command, senders
from elxpk.notify.flags import CHECKPOINT_STALE, RECOVERED, TEST, NotifySettings
from elxpk.notify.rules import SEEN_LATE_S, STUCK_STATES, Alert, Observation, Watchman
from elxpk_contract.settings import check_setting

REFRESH_S = 60.0  # the feed's snapshot when nothing is awaited: a finished workload is noticed within it
AWAITING_REFRESH_S = 5.0  # while a recovery is awaited: `recovered` is sent within this of the trainer's step


class NotifyingWatch:
    def __init__(self, settings: NotifySettings, workload: str, namespace: str, note: Callable[[str], None], *,
                 policy: Policy = Policy(), clock: Callable[[], float] = time.time,
                 progress_every_s: float = 60.0, list_workloads: Callable[[], list[dict]] | None = None,
                 list_events: Callable[[str], list[dict]] | None = None) -> None:
        self.settings, self.clock, self.progress_every_s = settings, clock, progress_every_s
        self.watchman = Watchman(workload, namespace, stuck_after_s=settings.stuck_after_s,
                                 recovery_within_s=settings.recovery_within_s)
        self.notifier = Notifier(senders(settings.url, settings.format, settings.command), note, policy)
        self.policy = policy
        self.following = False
        self._progress: tuple[float, dict | None] | None = None  # (when read, the record)
        self._jobset: dict | None = None  # the newest snapshot's, for the progress record's directory
        # Kueue's Workloads, listed when a preemption names its preemptor by UID (one listing per UID)
        self.list_workloads = list_workloads
        self.list_events = list_events  # the Events of one object (a Kueue Workload), by its name
        self._preemptors: dict[str, str] = {}
        self._kueue_looked: float | None = None  # the outage (its start) whose Kueue Workloads were looked at
        # The watch's memory of pods (lost_slice's `remembered`): the previous snapshot's, by name, and those a
        # snapshot showed that the API no longer lists, kept while an outage is open. A force-deleted pod leaves
        # the API at once: without it the pods left show only the survivors' 75s.
        self._pods_before: dict[str, Pod] = {}
        self._gone: dict[str, Pod] = {}

    def refresh_s(self) -> float:
        """How often the feed should take its snapshot (events_feed.follow's `refresh_s`): every
        AWAITING_REFRESH_S while an outage waits for its `recovered` (the trainer's first step is in its
        progress record, which no pod change shows), else REFRESH_S."""
        awaiting = self.watchman.outage_since is not None and RECOVERED in self.settings.on
        return AWAITING_REFRESH_S if awaiting else REFRESH_S

    def test_command(self) -> str | None:
        """Run --notify-command once with a `test` alert before the watch starts, so a program that fails
        (exits non-zero, hangs, cannot start) is said at once, not at the first fault: the failure's line, or
        None when it took the test (or there is no command). The command sees ELXPK_ALERT_KIND=test."""
        command = self.settings.command
        if command is None:
            return None
        watchman = self.watchman
        alert = Alert(TEST, watchman.workload, watchman.namespace, self.clock(),
                      f"{watchman.workload}: notifications start (a test delivery: each alert comes this way)")
        try:
            run_command(command, payload(alert, "json") + b"\n", self.policy.timeout_s, alert)
        except DeliveryFailed as exc:
            return (f"notify: --notify-command {shlex.join(command)!r} failed its test delivery: {exc}; "
                    "alerts will be tried all the same, fix the command")
        return None

    def started(self) -> None:
        """The history is out: incidents from now on are new."""
        self.following = True

    def incident(self, incident: Incident) -> None:
        if self.following:
            now = self.clock()
            # During an outage a loss may be the next fault: the record says whether the trainer stepped since
            resumed = None
            if self.watchman.outage_since is not None and self._jobset is not None:
                resumed = (self._progress_of(self._jobset, now) or {}).get("resumed_at")
            self._send(self.watchman.incident(incident, now, resumed_at=resumed))
            if self.watchman.waits_for_a_victim:
                self._send(self._kueue_took_it(now))

    def _kueue_took_it(self, now: float) -> list[Alert]:
        """Casualties with no victim (pods deleted with a grace period): Kueue may have taken the whole workload,
        which the pod watch cannot show (its conditions are on the Workload). One look at this workload's Kueue
        Workloads, at the first such casualty of an outage, instead of waiting for the next snapshot (a
        minute): the alert then says `preempted by Kueue` at once, with the preemptor named."""
        if self.list_workloads is None or self._kueue_looked == self.watchman.outage_since:
            return []
        self._kueue_looked = self.watchman.outage_since
        try:
            mine = [w for w in map(Workload.of, self.list_workloads()) if any(
                o.kind == "JobSet" and o.name == self.watchman.workload for o in w.meta.owners)]
        except ElxpkError:
            return []
        fault = kueue_fault(mine)
        if not _recent(fault, now):
            # Readmitted already (a preemptor that ran a few seconds, a loaded watch): the conditions say so no
            # more, but Kueue's Event of the eviction stays (an hour)
            fault = self._kueue_event(mine, now)
        if fault is None:
            return []
        slices = len(self.watchman.seen_healthy) or 1
        return self.watchman.workload_taken(f"{fault.cause}: {fault.detail}", fault.time, self._preemptor(fault),
                                            slices, now)

    def objects(self, jobset: dict, jobs: list, pods: list, workloads: list) -> None:
        now = self.clock()
        self._jobset = jobset
        listed = {view.meta.name: view for view in map(Pod.of, pods)}
        self._gone.update((name, pod) for name, pod in self._pods_before.items() if name not in listed)
        self._send(self.watchman.observe(self._observation(jobset, jobs, pods, workloads, now), now))
        self._pods_before = {str(name): view for name, view in listed.items()}
        if self.watchman.outage_since is None:  # the memory is of the outage a victim left in
            self._gone.clear()

    def close(self) -> int:
        """Wait (bounded) for what is queued; the number of alerts not delivered."""
        return self.notifier.close()

    def _send(self, alerts: list[Alert]) -> None:
        for alert in alerts:
            if alert.kind in self.settings.on:
                self.notifier.send(alert)

    def _observation(self, jobset: dict, jobs: list, pods: list, workloads: list, now: float) -> Observation:
        status = compute_status(jobset, jobs, pods, workloads, now)
        since = why.state_since(jobset, jobs, workloads)
        line = status.message if status.state == "Failed" else ""
        if status.state in STUCK_STATES and since is not None and now - since >= self.settings.stuck_after_s:
            reasons = why.explain(jobset, jobs, pods, workloads, now, None,
                                  pending_after_s=self.settings.stuck_after_s)
            line = reasons[0].text if reasons else ""
        progress = self._progress_of(jobset, now) or {}
        fault = lost_slice(pods, workloads, remembered=list(self._gone.values()), jobs=jobs)
        return Observation(
            state=status.state, healthy=tuple(s.healthy for s in status.slices),
            restarts_counted=status.restarts_counted, max_restarts=status.max_restarts,
            slice_budgets=tuple((s.budget_used, s.backoff_limit) for s in status.slices), state_since=since,
            why=line, saves_stopped=bool(progress.get("saves_stopped")), steps_done=progress.get("steps_done"),
            checkpoint_step=progress.get("checkpoint_step"), checkpoint_age_s=progress.get("checkpoint_age_s"),
            checkpoint_period=progress.get("checkpoint_period"), elastic_timeout_s=_elastic_timeout(jobset),
            step_time=progress.get("step_time"), fault="" if fault is None else f"{fault.cause}: {fault.detail}",
            fault_slice=None if fault is None else fault.slice, fault_time=None if fault is None else fault.time,
            whole_workload=fault is not None and fault.whole_workload, preemptor=self._preemptor(fault),
            survivors=() if fault is None else fault.survivors, trainer_phase=progress.get("phase") or "",
            trainer_stopped_at=progress.get("updated_at") if progress.get("state") not in (None, "running") else None,
            resumed_at=progress.get("resumed_at"), trainer_state=progress.get("state") or "",
            ended_at=status.ended_at, started_at=_held_since(jobset, status),
            chip_hours=finished_chip_hours(jobset, status, now)[0] if status.state in ("Succeeded", "Failed") else "")

    def _kueue_event(self, mine: list[Workload], now: float) -> Fault | None:
        """The newest recent eviction Event (EvictedDueTo..., Preempted) of these Kueue Workloads, as a fault."""
        if self.list_events is None:
            return None
        found = []
        for w in mine:
            try:
                events = self.list_events(str(w.meta.name))
            except ElxpkError:
                return None
            found += [fault for fault in kueue_event_faults(events) if _recent(fault, now)]
        return max(found, key=lambda f: f.time or 0.0, default=None)

    def _preemptor(self, fault: Fault | None) -> str:
        """Who preempted the workload, named from the UID Kueue gives ("" when not a preemption, or unknown)."""
        uid = None if fault is None or not fault.whole_workload else preemptor.preemptor_uid(fault.detail)
        if uid is None:
            return ""
        if uid not in self._preemptors:
            found = None
            if self.list_workloads is not None:
                try:
                    found = preemptor.describe(self.list_workloads(), uid)
                except ElxpkError:  # a listing refused (RBAC) or failed: the UID is what is known
                    found = None
            self._preemptors[uid] = found or f"the Workload of UID {uid} (not among the Workloads listed)"
        return self._preemptors[uid]

    def _progress_of(self, jobset: dict, now: float) -> dict | None:
        if CHECKPOINT_STALE not in self.settings.on and RECOVERED not in self.settings.on:
            return None
        # during an outage every look reads it: `recovered` is the trainer's first step after the loss
        outage = self.watchman.outage_since is not None and RECOVERED in self.settings.on
        if self._progress is None or outage or now - self._progress[0] >= self.progress_every_s:
            self._progress = (now, progress_of(jobset, now)[0])
        return self._progress[1]


def _held_since(jobset: dict, status: WorkloadStatus) -> float | None:
    """When the workload began to hold its chips: Kueue's one admission, else its creation (as chip-hours
    count it)."""
    return status.admitted_at if status.admitted_at is not None else parse_time(JobSet.of(jobset).meta.created)


def _elastic_timeout(jobset: dict) -> float | None:
    """The wait for a lost slice the workload gives its trainer (ELXPK_ELASTIC_TIMEOUT_SECONDS or its flag)."""
    value = setting_value(jobset, "elastic_timeout_seconds")
    if value is None:
        return None
    seconds, problem = check_setting("elastic_timeout_seconds", value)
    return float(seconds) if problem is None and isinstance(seconds, (int, float)) and seconds > 0 else None


def _recent(fault: Fault | None, now: float) -> bool:
    """A whole-workload fault of this outage: dated within SEEN_LATE_S (an older one is left from an earlier)."""
    return fault is not None and fault.time is not None and now - SEEN_LATE_S <= fault.time <= now + 1
