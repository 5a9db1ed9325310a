"""One incident, one line: the Events that restate what the objects already say, dropped or used as a date.

Pure. The components report one thing in several places: Kueue's preemption is the Workload's Evicted and
Preempted conditions and the Events Preempted and EvictedDueToPreempted (4 lines for one preemption); a
JobSet restart is `status.restarts` and two Events (the rule's and the action's); a failed Job is its
Failed condition and an Event of the same reason. And the Events of a name outlive the object: a JobSet
deleted and created again under the same name inherits its predecessor's Events for the hour the API server
keeps them. So, before Events become incidents:
- an Event older than the JobSet, or about an object of that name with another uid, is another incarnation's;
- a JobSet restart Event ("applying RestartJobSet...") dates the restart instead of being a line of its own
  (the Jobs of an old restart attempt are gone, and with them its date);
- an Event on a Kueue Workload or a Job that restates one of their conditions, within SAME_S of it, is that
  condition's incident already; Kueue's own Events of one eviction are one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from elxpk.cluster.objects.labels import parse_time
from elxpk.cluster.objects.meta import Meta
from elxpk.cluster.objects.pods import Event

SAME_S = 30.0  # an Event this close to the condition it restates is the same incident
RESTART_MESSAGE = "applying RestartJobSet"  # RestartJobSet and RestartJobSetAndIgnoreMaxRestarts actions


def event_time(event: Event) -> float | None:
    return parse_time(event.time)


def own_events(events: Iterable[Event], jobset: Meta, objects: Iterable[tuple[str, Meta]]) -> list[Event]:
    """The Events about this incarnation of the workload: none from before the JobSet was created, none about
    an object of one of its names but another uid. `objects`: (kind, metadata) of each of its objects."""
    born = parse_time(jobset.created)
    uids = {(kind, meta.name): meta.uid for kind, meta in objects}
    out = []
    for e in events:
        when = event_time(e)
        if born is not None and when is not None and when < born:
            continue
        known = uids.get((e.involved.kind or "", e.involved.name))
        if known and e.involved.uid and e.involved.uid != known:
            continue
        out.append(e)
    return out


def restart_times(events: Iterable[Event], jobset_name: str) -> list[float]:
    """When the JobSet controller restarted the JobSet, oldest first: its Events of one restart (the rule's
    and the action's, microseconds apart) are one time."""
    times = sorted(t for e in events if _is_restart(e, jobset_name) and (t := event_time(e)) is not None)
    grouped: list[float] = []
    for t in times:
        if not grouped or t - grouped[-1] > 2.0:
            grouped.append(t)
    return grouped


def _is_restart(event: Event, jobset_name: str) -> bool:
    return event.involved.kind == "JobSet" and event.involved.name == jobset_name \
        and str(event.message or "").startswith(RESTART_MESSAGE)


def not_restated(events: Iterable[Event], jobset_name: str, conditions: dict[tuple[str, str], list[float]],
                 reports: Callable[[str], bool]) -> list[Event]:
    """`events` less those that restate a condition already an incident. `conditions`: (kind, name) of a Job
    or Workload -> the times of its Failed / Evicted / Preempted conditions; `reports`: the reasons of
    Workload Events that report an eviction (incidents.reports_incident)."""
    out: list[Event] = []
    shown: dict[str, list[float]] = {}  # Workload -> times of its eviction Events kept
    for e in sorted(events, key=lambda e: event_time(e) or 0.0):
        kind, name = e.involved.kind or "", e.involved.name or ""
        when = event_time(e)
        if _is_restart(e, jobset_name):
            continue  # the jobset_restart incident, dated by it
        near = when is not None and any(abs(when - t) <= SAME_S for t in conditions.get((kind, name), ()))
        if near and (kind == "Job" or reports(e.reason or "")):
            continue
        if kind == "Workload" and reports(e.reason or "") and when is not None:
            if any(abs(when - t) <= SAME_S for t in shown.get(name, ())):
                continue  # Kueue's second Event of one eviction (Preempted, then EvictedDueToPreempted)
            shown.setdefault(name, []).append(when)
        out.append(e)
    return out
