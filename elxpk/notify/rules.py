"""Which alerts a watch raises, from the incidents it sees and the snapshots it takes (pure: no I/O, the
clock passed in). Each alert is raised once per occurrence, however often the same state is seen again:

- `slice-lost`: a slice's first loss incident (an exit, a disruption, an eviction) after the watch began,
  or a slice seen healthy and then not; one alert per fault, whatever the number of its pods or of the
  incidents one loss produces (an eviction is both a disruption and an exit 137). A slice that stopped
  because its group stopped is a casualty, not a loss: its exit 75, and the slices that go down once a loss
  is alerted (a JobSet restart takes every slice), raise none. Where only casualties were seen, the one
  alert names the victim as elxpk/cluster/records/lost_slice.py reads it from the pods (`Observation.fault`),
  else a slice down that did not stop with its group; never a survivor (`Observation.survivors`): where no
  slice is left to name, the alert says a slice was lost without naming one;
- `recovered`: every lost slice healthy again and, where the trainer's progress record is read, the trainer
  stepping again: timed from the first loss of that outage to its first step after it (the record's
  `resumed_at`; pods ready come before the trainer's imports, restore and compile). Each fault is its own
  outage: a loss seen after the trainer stepped again (by its record) is a new fault, so the outage before
  it is recovered then, timed to that step, even when no look came between (a look is every minute, a
  soak's kills can be closer). A loss before the trainer stepped again (a kill during the recovery)
  belongs to the outage in progress, whose recovery it interrupted;
- a Kueue preemption takes the whole workload: its `slice-lost` says `preempted by Kueue` and names the
  preemptor (Kueue's condition gives its Workload's UID; the watch looks it up among the Workloads);
- `recovery-late`: a lost slice not back within the expected time (once per outage);
- `budget-80` / `budget-spent`: a restart budget (the JobSet's maxRestarts, a slice's backoffLimit) at 80%
  and at 100%, once per budget and level;
- `failed` / `succeeded`: the JobSet's end, raised at the first look that sees it and never again, dated by
  the JobSet's own Completed/Failed condition (when within SEEN_LATE_S: a look a minute apart must not date
  it a minute late), with how long it ran in the form every alert gives a duration (`after 42m00s`);
- `checkpoint-stale`: a running trainer two checkpoint periods past its last committed save (progress.py's
  `saves_stopped`), once per last-saved step;
- `stuck`: Queued, Admitted or Restarting for longer than `--stuck-after`, with the why line, once per
  episode (an episode is the state and when it began).

History (the incidents a watch prints before it starts following) raises no incident alert: a watch
restarted by cron must not page again for last night's losses.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any

from elxpk.cluster.diagnosis.why import STUCK_STATES
from elxpk.cluster.objects.labels import parse_time
from elxpk.cluster.records import lost_slice
from elxpk.cluster.records.incidents import Incident
from elxpk.notify.flags import (
    BUDGET_80,
    BUDGET_SPENT,
    CHECKPOINT_STALE,
    FAILED,
    RECOVERED,
    RECOVERY_LATE,
    SLICE_LOST,
    STUCK,
    SUCCEEDED,
)
from elxpk.units import format_duration

LOSS_KINDS = ("exit", "disruption", "evicted")
DEFAULT_RECOVERY_S = 15 * 60.0  # without the workload's elastic timeout
BUDGET_WARN = 0.8
API_TIME_RESOLUTION_S = 1.0  # Kubernetes dates conditions, exits and deletions in whole seconds
SEEN_LATE_S = 120.0  # how much later than the API dates a loss the watch may see it and still time it from then


@dataclass(frozen=True)
class Alert:
    """One notification: what happened (`kind`), to which workload, when, a line a person reads, and the
    figures behind it; `incident` is the incident that raised it, when one did."""

    kind: str
    workload: str
    namespace: str
    time: float
    summary: str
    details: dict[str, Any] = field(default_factory=dict)
    incident: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["time"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.time))
        return data


@dataclass(frozen=True)
class Observation:
    """What one snapshot shows, as the rules need it (status.py's WorkloadStatus and progress.py's record
    reduced to plain values, so the rules can be tested without objects)."""

    state: str
    healthy: tuple[bool, ...]  # per slice index
    restarts_counted: int = 0
    max_restarts: int = 0
    slice_budgets: tuple[tuple[int, int | None], ...] = ()  # (used, limit) per slice index
    state_since: float | None = None
    why: str = ""  # the why line, when stuck
    saves_stopped: bool = False
    steps_done: int | None = None
    checkpoint_step: int | None = None
    checkpoint_age_s: float | None = None
    checkpoint_period: int | None = None
    elastic_timeout_s: float | None = None
    step_time: float | None = None  # the trainer's last completed step (its progress record), when read
    fault: str = ""  # the newest fault's cause and detail (lost_slice.py), e.g. "evicted: pod P: EvictionByEvictionAPI"
    fault_slice: int | None = None  # its victim
    chip_hours: str = ""  # a finished workload's spend (chips.finished_chip_hours), as `status` states it
    fault_time: float | None = None  # when it happened, as the API dates it
    whole_workload: bool = False  # the fault took the whole workload (a Kueue preemption or eviction)
    preemptor: str = ""  # who preempted it, as named from Kueue's UID ("" when not known)
    resumed_at: float | None = None  # the trainer's first step of its current attempt (progress record)
    trainer_state: str = ""  # the progress record's state: running, preempted, failed, ... ("" unread)
    ended_at: float | None = None  # when the JobSet finished (its Completed or Failed condition), once it has
    started_at: float | None = None  # when it began to hold its chips: Kueue's admission, else its creation
    # the slices that stopped with their group (exit 75) when the victim's pod is gone (lost_slice.VICTIM_GONE):
    # never named as the victim
    survivors: tuple[int, ...] = ()
    trainer_phase: str = ""  # the progress record's phase: restoring, compiling, stepping ("" unread or older)
    trainer_stopped_at: float | None = None  # when the trainer's record says it stopped (its state not running)



class Watchman:
    """The alert state of one watched workload. `incident` and `observe` return the new alerts."""

    def __init__(self, workload: str, namespace: str, *, stuck_after_s: float,
                 recovery_within_s: float | None = None) -> None:
        self.workload, self.namespace = workload, namespace
        self.stuck_after_s, self.recovery_within_s = stuck_after_s, recovery_within_s
        self.lost: dict[int, float] = {}  # slice -> when it was lost, during the present outage
        self.outage_since: float | None = None
        self.late_sent = False
        self.alerted = False  # a slice-lost alert went out for the present outage
        self.pending: tuple[Incident, str] | None = None  # a casualty's exit, the alert's if no victim shows
        # The present outage's faults (slice-lost details), named again by its recovered: more than one when a
        # loss came before the trainer stepped again (it interrupted the recovery).
        self.faults: list[dict[str, Any]] = []
        self.seen_healthy: set[int] = set()
        self.raised: set[tuple] = set()  # keys of once-only alerts already raised
        # When the trainer's processes last stopped in the present outage (an exit, its record's stop): the step
        # that ends the recovery comes after it, whatever the outage's own date (Kueue's is earlier)
        self.stopped_at: float | None = None

    def _alert(self, kind: str, now: float, summary: str, incident: Incident | None = None,
               **details: Any) -> Alert:
        return Alert(kind, self.workload, self.namespace, now, f"{self.workload}: {summary}", details,
                     incident.to_dict() if incident is not None else None)

    def _lose(self, index: int, when: float, now: float, why: str, incident: Incident | None, *,
              casualty: bool = False) -> list[Alert]:
        """Slice `index` is down from `when`; the alert, unless it is a casualty of a loss (or already down)."""
        if index in self.lost and (casualty or self.alerted):
            return []
        self.lost.setdefault(index, when)
        if self.outage_since is None:
            self.outage_since, self.late_sent, self.alerted = when, False, False
        elif not self.alerted:  # a casualty seen first (a survivor's 75 after the victim's SIGTERM): the fault's time
            self.outage_since = min(self.outage_since, when)
        if casualty:
            return []
        self.alerted = True
        self.faults.append({"slice": index, "cause": why})
        return [self._alert(SLICE_LOST, now, f"slice {index} lost ({why})", incident, slice=index)]

    def _taken(self, slices: list[int], when: float, cause: str) -> None:
        """`slices` down from `when` by one fault named by no one slice (`cause`), its alert raised now."""
        for index in slices:
            self.lost.setdefault(index, when)
        if self.outage_since is None:
            self.late_sent = False
        self.outage_since = when if self.outage_since is None else min(self.outage_since, when)
        self.alerted, self.pending = True, None
        self.faults.append({"slice": None, "cause": cause})

    def _lose_unnamed(self, down: list[int], when: float, now: float, why: str) -> list[Alert]:
        """A slice lost that no source names (its pod gone from the API, every slice down a survivor): one alert
        that names none, rather than a survivor; the slices down are this outage's."""
        self._taken(down, when, "a slice's loss")
        return [self._alert(SLICE_LOST, now, f"a slice lost, which one no source says ({why or 'its pod gone'}); "
                            f"slice{'s' if len(down) > 1 else ''} {', '.join(map(str, down))} stopped with it",
                            None, slice=None, survivors=list(down))]

    def _workload_lost(self, seen: Observation, now: float) -> list[Alert]:
        return self.workload_taken(seen.fault, seen.fault_time, seen.preemptor, len(seen.healthy), now)

    def workload_taken(self, fault: str, at: float | None, preemptor: str, slices: int, now: float) -> list[Alert]:
        """The whole workload taken at once (a Kueue preemption or eviction, `fault` as lost_slice.py words it,
        at `at`): one alert that says so and names the preemptor, every slice down. Nothing when this outage
        already has its alert."""
        if self.alerted:
            return []
        what = "preempted by Kueue" if fault.startswith(lost_slice.PREEMPTED) else "evicted by Kueue"
        self._taken(list(range(slices)), _dated(at, now), what)
        by = f" to admit {preemptor}" if preemptor else ""
        return [self._alert(SLICE_LOST, now, f"the workload {what}{by} ({fault})", None, slice=None,
                            slices=list(range(slices)), cause=what, preemptor=preemptor or None)]

    @property
    def waits_for_a_victim(self) -> bool:
        """Only casualties seen so far (e.g. exits of pods a Kueue eviction deleted): the fault is not named yet."""
        return self.pending is not None and not self.alerted

    def _stepped_since_outage(self, resumed: float | None) -> bool:
        """The trainer's first step of an attempt came after the fault: after the outage began and after the
        trainer's processes stopped for it (`stopped_at`: Kueue dates its eviction before the victims' last
        step, which is no recovery). The API dates a loss in whole seconds (truncated), so a step within the
        second before it may read as after it: a step counts from API_TIME_RESOLUTION_S past the fault (a
        restart takes seconds; the previous recovery's step, just before the next kill, must not close the new
        outage at once)."""
        if self.outage_since is None or resumed is None:
            return False
        return resumed > max(self.outage_since, self.stopped_at or self.outage_since) + API_TIME_RESOLUTION_S

    def _stopped(self, at: float | None) -> None:
        """The trainer's processes stopped at `at` in the present outage (an exit, its record's stop)."""
        if at is not None and self.outage_since is not None and at >= self.outage_since:
            self.stopped_at = at if self.stopped_at is None else max(self.stopped_at, at)

    def _recovered(self, resumed: float | None, now: float, slices: int, *, all_healthy: bool) -> list[Alert]:
        """The present outage is over: timed to the trainer's first step after it (else to `now`)."""
        assert self.outage_since is not None
        took = (resumed if resumed is not None else now) - self.outage_since
        first, *more = self.faults or [{"slice": None, "cause": ""}]
        head = f"all {slices} slices healthy again, " if all_healthy else "the trainer stepping again "
        summary = (head + f"{format_duration(took)} after {_whose(first)}"
                   + "".join(f" (and {_whose(f)}, which interrupted its recovery)" for f in more)
                   + (", the trainer stepping again" if all_healthy and resumed is not None else ""))
        alert = self._alert(RECOVERED, now, summary, recovery_s=round(took, 1), slice=first["slice"],
                            cause=first["cause"], faults=len(self.faults), since=self.outage_since,
                            stepped_at=resumed)
        self.outage_since, self.alerted, self.pending, self.faults, self.stopped_at = None, False, None, [], None
        self.lost.clear()
        return [alert]

    def _new_fault(self, resumed: float | None, now: float, slices: int) -> list[Alert]:
        """A loss seen after the trainer stepped again is a new fault: the outage before it recovered at that
        step (its `recovered`, before the new fault's `slice-lost`)."""
        if not self._stepped_since_outage(resumed):
            return []
        return self._recovered(resumed, now, slices, all_healthy=False)

    def incident(self, incident: Incident, now: float, resumed_at: float | None = None) -> list[Alert]:
        """A new incident, seen while following (not history). `resumed_at`: the trainer's first step of its
        current attempt, read now (its progress record), when an outage is open."""
        if incident.slice is None or incident.kind not in LOSS_KINDS:
            return []
        closed = self._new_fault(resumed_at, now, len(self.seen_healthy) or incident.slice + 1)
        # The API's own time of it (whole seconds), when the watch saw it a little later (a loaded host): the
        # outage is timed from the fault. An older date is not this moment's loss (a record replayed): now.
        when = _dated(parse_time(incident.time), now)
        what = f"exit {incident.exit_code}/{incident.reason}" if incident.exit_code is not None else incident.reason
        if incident.fault and incident.fault != lost_slice.SLICE_GONE:  # the pod's cause, as lost_slice.py reads it
            what = f"{incident.fault}: {what}"
        where = f" on pod {incident.pod}" if incident.pod else ""
        casualty = incident.stopped_with_group  # the fault is another slice's
        if casualty and self.pending is None and not self.alerted:
            self.pending = (incident, what + where)  # the loss itself, if no other slice's shows by the next look
        lost = self._lose(incident.slice, when, now, what + where, incident, casualty=casualty)
        if incident.kind == "exit":  # its process stopped then: a step before it is no recovery
            self._stopped(when)
        return closed + lost

    def observe(self, seen: Observation, now: float) -> list[Alert]:
        alerts: list[Alert] = []
        alerts += self._slices(seen, now)
        alerts += self._budgets(seen, now)
        alerts += self._end(seen, now)
        alerts += self._checkpoint(seen, now)
        alerts += self._stuck(seen, now)
        return alerts

    def _slices(self, seen: Observation, now: float) -> list[Alert]:
        alerts: list[Alert] = []
        if seen.state in ("Succeeded", "Failed"):
            return alerts
        resumed = seen.resumed_at if seen.resumed_at is not None else seen.step_time  # an older trainer's record
        # the record of a trainer stopped, or of a new process restoring or compiling, is of no step after the
        # fault: its step_time is the previous process's last (a new process's record has no resumed_at yet)
        not_stepping = seen.trainer_state not in ("", "running") or seen.trainer_phase in ("restoring", "compiling")
        newly_down = [i for i, healthy in enumerate(seen.healthy)
                      if not healthy and i in self.seen_healthy and i not in self.lost]
        # The trainer stepped after the outage began, and now a slice is down again (or the trainer stopped
        # again): a new fault, whichever look sees it first.
        if newly_down or (seen.trainer_state not in ("", "running") and not all(seen.healthy)):
            alerts += self._new_fault(resumed, now, len(seen.healthy))
        if seen.whole_workload and not all(seen.healthy) and not self.alerted and self.seen_healthy:
            alerts += self._workload_lost(seen, now)
        down = []
        for index, healthy in enumerate(seen.healthy):
            if healthy:
                self.seen_healthy.add(index)
                self.lost.pop(index, None)
            elif index in self.seen_healthy and (index not in self.lost or not self.alerted):
                down.append(index)
        if down and not self.alerted:  # one alert: the victim's, as the pods tell it
            # the pods' victim; else the slice whose exit was seen (a JobSet restart may have taken its pod), else
            # a slice down; never one that stopped with its group (a 75 is a survivor's word for another's loss)
            survivors = set(seen.survivors)
            named = [i for i in (seen.fault_slice, self.pending[0].slice if self.pending else None, *down)
                     if i is not None and 0 <= i < len(seen.healthy) and i not in survivors]
            if named:
                victim = named[0]
                incident, why = self.pending if self.pending is not None and self.pending[0].slice == victim \
                    else (None, seen.fault or "not healthy")
                when = _dated(seen.fault_time, now) if incident is None else _dated(parse_time(incident.time), now)
                alerts += self._lose(victim, when, now, why, incident)
            else:
                alerts += self._lose_unnamed(down, _dated(seen.fault_time, now), now, seen.fault)
        for index in down:  # the rest went down with it (a JobSet restart takes every slice)
            self._lose(index, now, now, "", None, casualty=True)
        if not self.lost:
            self.pending = None
        # Recovered is training again: with the trainer's record, at its first step after the loss (pods
        # ready come before its imports, restore and compile), and timed to that step
        self._stopped(seen.trainer_stopped_at)
        waiting = not_stepping or (resumed is not None and not self._stepped_since_outage(resumed))
        if self.outage_since is not None and not self.lost and not waiting:
            alerts += self._recovered(resumed, now, len(seen.healthy), all_healthy=True)
        elif self.outage_since is not None and not self.late_sent:
            expected = self.recovery_within_s or seen.elastic_timeout_s or DEFAULT_RECOVERY_S
            if now - self.outage_since >= expected:
                self.late_sent = True
                down = sorted(self.lost)
                alerts.append(self._alert(
                    RECOVERY_LATE, now, f"slice{'s' if len(down) > 1 else ''} {', '.join(map(str, down))} still "
                    f"down after {format_duration(now - self.outage_since)} (expected within "
                    f"{format_duration(expected)})", slices=down, expected_s=expected,
                    down_s=round(now - self.outage_since, 1)))
        return alerts

    def _once(self, key: tuple) -> bool:
        if key in self.raised:
            return False
        self.raised.add(key)
        return True

    def _budgets(self, seen: Observation, now: float) -> list[Alert]:
        budgets = [("the JobSet's restarts", seen.restarts_counted, seen.max_restarts)]
        budgets += [(f"slice {i}'s pod restarts", used, limit) for i, (used, limit) in enumerate(seen.slice_budgets)
                    if limit is not None]
        alerts = []
        for what, used, limit in budgets:
            if not limit:
                continue  # no budget (maxRestarts 0): nothing to spend
            for level, kind in ((1.0, BUDGET_SPENT), (BUDGET_WARN, BUDGET_80)):
                if used >= level * limit:
                    if self._once((kind, what)):
                        alerts.append(self._alert(kind, now, f"{what}: {used} of {limit} used"
                                                  + (", none left" if used >= limit else f", {limit - used} left"),
                                                  budget=what, used=used, limit=limit))
                    break  # spent implies the 80% alert: one alert for one observation
        return alerts

    def _end(self, seen: Observation, now: float) -> list[Alert]:
        kind = {"Failed": FAILED, "Succeeded": SUCCEEDED}.get(seen.state)
        if kind is None or not self._once((kind,)):
            return []
        when = _dated(seen.ended_at, now) if seen.ended_at is not None else now
        # how long it ran is the JobSet's own span, however late the look that saw its end
        ended = seen.ended_at if seen.ended_at is not None else when
        ran = None if seen.started_at is None else max(ended - seen.started_at, 0.0)
        after = "" if ran is None else f" after {format_duration(ran)}"
        return [self._alert(kind, when, f"workload {seen.state.lower()}{after}" + (f": {seen.why}" if seen.why else "")
                            + (f"; {seen.chip_hours}" if seen.chip_hours else ""),
                            ran_s=None if ran is None else round(ran, 1), seen_at=now)]

    def _checkpoint(self, seen: Observation, now: float) -> list[Alert]:
        if not seen.saves_stopped or not self._once((CHECKPOINT_STALE, seen.checkpoint_step)):
            return []
        age = "" if seen.checkpoint_age_s is None else f", {format_duration(seen.checkpoint_age_s)} old"
        saved = "no checkpoint yet" if seen.checkpoint_step is None else f"last checkpoint at step {seen.checkpoint_step}"
        return [self._alert(CHECKPOINT_STALE, now, f"{saved}{age}, the trainer at step {seen.steps_done} "
                            f"(period {seen.checkpoint_period}: two periods without a save)",
                            checkpoint_step=seen.checkpoint_step, steps_done=seen.steps_done,
                            checkpoint_age_s=seen.checkpoint_age_s, checkpoint_period=seen.checkpoint_period)]

    def _stuck(self, seen: Observation, now: float) -> list[Alert]:
        if seen.state not in STUCK_STATES or seen.state_since is None:
            return []
        age = now - seen.state_since
        if age < self.stuck_after_s or not self._once((STUCK, seen.state, seen.state_since)):
            return []
        why = seen.why or "no reason found (see `elxpk workload status --why`)"
        return [self._alert(STUCK, now, f"{seen.state} for {format_duration(age)}: {why}", state=seen.state,
                            for_s=round(age, 1), why=seen.why)]


def _whose(fault: dict[str, Any]) -> str:
    """A fault as a recovered alert names it: "slice 1's loss", or the whole workload's cause."""
    return f"slice {fault['slice']}'s loss" if fault["slice"] is not None else fault["cause"] or "the loss"


def _dated(at: float | None, now: float) -> float:
    """When a loss the watch sees at `now` happened: the API's date of it when at most SEEN_LATE_S earlier
    (a loaded watch sees it late), else `now` (an older date is not this moment's loss, e.g. a condition left)."""
    return at if at is not None and now - SEEN_LATE_S <= at < now else now
