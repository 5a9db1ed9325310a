"""What a workload is doing now, as the live view (`status --watch`) names it: restarting, pods starting,
restoring, compiling, stepping, not stepping, or unknown (pure: objects and the progress record in, the
clock passed in).

The JobSet says Running as soon as every pod is ready, but a restarted group's new processes then import,
restore and compile for tens of seconds before their first step, and the progress record on disk is still
the previous process's (its last step aging, its rate old). So the phase comes from both sides:
- the JobSet's state: Restarting (or Degraded after a failure) is `restarting`, Admitted is `pods starting`;
- Running: a record written before the newest running container started is the previous process's, so the
  new one has not reported yet (`pods starting`); else the record's own `phase` (the trainer writes
  `restoring` and `compiling` as it begins them, `stepping` at its first step);
- `stepping` only while the record's last step is fresh: the trainer publishes at most every
  PROGRESS_PERIOD_S while it steps, so a step older than that period and two steps' time is `not stepping`,
  and no rate is shown as current;
- `unknown` while the watch cannot read (an API or storage pause): the last read's phase, said as such and
  aged from that read, never `stepping` as the pace now.
"""

from __future__ import annotations

from typing import NamedTuple

from elxpk.cluster.objects.labels import parse_time
from elxpk.cluster.objects.pods import Pod
from elxpk.cluster.records.status import WorkloadStatus
from elxpk.units import format_duration
from elxpk_contract.event_records import STARTUP_PHASES, describe_startup
from elxpk_contract.progress_record import PROGRESS_PERIOD_S

RESTARTING, PODS_STARTING, RESTORING, COMPILING = "restarting", "pods starting", "restoring", "compiling"
STEPPING, NOT_STEPPING = "stepping", "not stepping"
# The watch cannot read now (an API or storage pause): what its last read said is no longer the phase now
UNREAD = "unknown"
PHASES = (RESTARTING, PODS_STARTING, RESTORING, COMPILING, STEPPING, NOT_STEPPING, UNREAD)
# A record's step this much past the publication period (plus two steps' time) is no current step: the
# period's write, a slow read of gs:// and a refresh under load fit within it.
FRESH_SLACK_S = 10.0


_REPLACED = "the group's pods are being replaced"


class Phase(NamedTuple):
    name: str | None  # one of PHASES; None while queued, after the end, or with no progress record to read
    detail: str  # the words after the name ("" when none)
    step_fresh: bool  # the record's last step is current: its rate may be shown as the rate now


def pod_start(pod: dict | Pod) -> float | None:
    """Unix seconds when a running pod's newest container started (else the pod itself); None when it does
    not run. The watch keeps one per pod: the newest of them is the group's newest process, which a progress
    record written before it did not come from."""
    view = Pod.of(pod)
    if view.phase != "Running" or view.meta.deleting:
        return None
    times = [t for t in (parse_time(c.running_since) for c in view.containers if c.running_since) if t is not None]
    return max(times) if times else parse_time(view.started)


def step_fresh(progress: dict, step_age_s: float | None, rate: float | None) -> bool:
    """The record's last step is recent enough to be the trainer's current pace."""
    if step_age_s is None or progress.get("state", "running") != "running":
        return False
    step_s = 1.0 / rate if rate else 0.0
    return step_age_s <= PROGRESS_PERIOD_S + 2 * step_s + FRESH_SLACK_S


def phase_of(status: WorkloadStatus, progress: dict | None, started_at: float | None, step_age_s: float | None,
             rate: float | None, now: float) -> Phase:
    """The phase at unix time `now`; `started_at`: the newest pod_start() of the pods; `step_age_s`: the record's
    step age at `now`."""
    state = status.state
    if state in ("Queued", "Succeeded", "Failed"):
        return Phase(None, "", False)
    if state == "Admitted":
        return Phase(PODS_STARTING, "the pods are being scheduled and started", False)
    if state == "Restarting":
        return Phase(RESTARTING, _REPLACED, False)
    found = _from_record(progress, started_at, step_age_s, rate, now)
    if state == "Degraded" and found.name in (None, PODS_STARTING, NOT_STEPPING):
        # fewer slices and no step: the group is down (a Pathways trainer steps on in Degraded)
        return Phase(RESTARTING, _REPLACED, False)
    return found


def _from_record(progress: dict | None, started_at: float | None, step_age_s: float | None, rate: float | None,
                 now: float) -> Phase:
    """Every pod up: the phase the trainer's record tells, when the record is the current processes'."""
    if progress is None:
        return Phase(None, "", False)
    updated = _number(progress.get("updated_at"))
    if started_at is not None and updated is not None and updated < started_at:
        return Phase(PODS_STARTING, "pods ready, the trainer's new processes importing (no record from them yet)",
                     False)
    stopped = progress.get("state", "running")
    if stopped != "running":  # this process's own last word: it stops, its pod exits
        return Phase(NOT_STEPPING, f"the trainer stopped ({stopped}), its pods exit", False)
    written = progress.get("phase") or STEPPING  # a trainer older than the field writes no phase
    if written in (RESTORING, COMPILING):
        since = "" if updated is None else f"for {format_duration(max(now - updated, 0.0))}"
        started = startup_words(progress)
        return Phase(written, ", ".join(w for w in (since, started and f"this process's start: {started}") if w), False)
    if step_fresh(progress, step_age_s, rate):
        return Phase(STEPPING, "", True)
    return Phase(NOT_STEPPING, "no step within the record's publication period", False)


def startup_words(progress: dict) -> str:
    """The new process's start-up so far, from its own record (trainer/startup.py): "" from an older trainer."""
    phases = progress.get("startup")
    if not isinstance(phases, dict) or not phases:
        return ""
    known = {k: float(v) for k, v in phases.items() if k in STARTUP_PHASES and _number(v) is not None}
    how = progress.get("startup_how")
    return describe_startup(known, how if isinstance(how, str) else "") if known else ""


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def unread(last: Phase, read_age_s: float) -> Phase:
    """The phase while the watch cannot read: `last` (its last read's) said as such, aged from that read,
    never `stepping` as the pace now (no rate)."""
    if last.name is None:
        return last
    said = f"{last.name}" + (f" ({last.detail})" if last.detail else "")
    return Phase(UNREAD, f"cannot read now; the last read, {format_duration(max(read_age_s, 0.0))} ago, said {said}",
                 False)


__all__ = ["PHASES", "Phase", "pod_start", "phase_of", "startup_words", "step_fresh", "unread"]
