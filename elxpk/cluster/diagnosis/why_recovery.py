"""`status --why` while the system handles a failure itself, and when the trainer gave up for good.

Pure (objects and the progress record in, reasons out; the clock passed in). A JobSet that restarts its
group after a lost slice is recovering: the reason says so, from what (elxpk/cluster/records/lost_slice.py: which
slice, how, when) and how much of its restart budget is left, and suggests no fix. `trainer-stopped` is
only the trainer's own final verdict: its progress record's exit code is one the Job fails at once
(--elastic-stop-on-repeat's 70), never a stop that the group restart retries (75, 76, 77).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime, timezone

from elxpk.cluster.diagnosis.why_reason import Reason
from elxpk.cluster.objects.labels import COMPLETION_INDEX, JOB_INDEX, parse_time
from elxpk.cluster.objects.pods import Pod
from elxpk.cluster.objects.workloads import Job, JobSet, Workload
from elxpk.cluster.records.lost_slice import Fault, first_exit, lost_slice
from elxpk.cluster.records.status import WorkloadStatus
from elxpk.units import format_duration
from elxpk_contract.exit_codes import BY_CODE

# Causes that no restart cures: a container that keeps exiting, an image that cannot be pulled. Where one is
# found, the workload is not "recovering by itself", whatever its state says.
NOT_SELF_HEALING = frozenset({"crash-loop", "image-pull"})


def readmitted_at(jobset: JobSet, jobs: Sequence[Job], workloads: Sequence[Workload]) -> float | None:
    """When Kueue last admitted the workload again after evicting it, where that is the newest thing to have
    restarted its pods; else None. The JobSet controller marks a resume (Suspended False, ResumeJobs) and
    creates no Jobs for it, so a restart since has Jobs newer than it; Kueue's Requeued condition tells a
    readmission from the first admission (which resumes the JobSet too)."""
    resumed = next((c for c in jobset.conditions if c.type == "Suspended" and not c.true
                    and c.reason == RESUMED), None)
    at = None if resumed is None else parse_time(resumed.time)
    if at is None or not any(c.type == "Requeued" for w in workloads for c in w.conditions):
        return None
    created = [parse_time(j.meta.created) for j in jobs if j.attempt >= jobset.restarts]
    return None if any(t is not None and t > at for t in created) else at


RESUMED = "ResumeJobs"  # the JobSet controller's reason on its Suspended condition when it resumes the Jobs


# How long before the trainer's last step Kueue may date the eviction that stopped it (it dates it before the
# victims' last step; their grace period is at most this): an older eviction Event is an earlier recovery's.
EVICTION_LEAD_S = 120.0
EVICTION_RECENT_S = 600.0  # with no step recorded: how old an eviction Event may be and still be this recovery's


def recovering(status: WorkloadStatus, pods: Sequence[dict | Pod], workloads: Sequence[dict | Workload],
               progress: dict | None,
               now: float, readmitted: float | None = None, preemptor: str = "",
               evictions: Sequence[Fault] = (), jobs: Sequence[dict | Job] = ()) -> list[Reason]:
    """One `recovering` reason when the workload restarts (or runs on fewer slices) after a failure that the
    JobSet's restart budget covers, or starts again after Kueue readmitted it (`readmitted`: readmitted_at;
    `preemptor`: the Workload that preempted it, named; `evictions`: Kueue's eviction Events as faults, which
    name the whole workload's fault once Kueue's conditions and the pods are gone; `jobs`: the JobSet's Jobs,
    which tell the pods that a JobSet restart deleted from the victim's); none otherwise."""
    trainer_down = (progress or {}).get("state") in ("failed", "stalled", "preempted") \
        and not (progress or {}).get("gave_up")
    # after a restart, the new processes write `restoring` and `compiling` before their first step: still the
    # recovery (the record's stop is overwritten by then)
    restarted = status.restarts > 0 or readmitted is not None
    resuming = restarted and (progress or {}).get("state") == "running" \
        and (progress or {}).get("phase") in ("restoring", "compiling")
    if status.state in ("Restarting", "Degraded"):
        pass
    elif status.state not in ("Admitted", "Running") or not (trainer_down or resuming or status.state == "Admitted"
                                                            and restarted):
        return []  # Running with the trainer's record not stopped: nothing is being recovered
    fault = lost_slice(pods, workloads, jobs=jobs) or _this_eviction(evictions, progress, now)
    retrying = [s for s in status.slices if s.state == "Restarting"]
    if readmitted is not None:  # a resume, no JobSet restart: the restart count is not this recovery's
        restart = (f"Kueue admitted the workload again at {_utc(readmitted)} after evicting it (a resume, not a "
                   f"JobSet restart: {status.restarts} of at most {status.max_restarts} so far)")
    elif status.restarts:
        restart = f"JobSet restart {status.restarts} of at most {status.max_restarts} ({status.restarts_left} left)"
    elif retrying:  # a Job with a pod-failure budget of its own replaces the pod; the JobSet has not restarted
        s = retrying[0]
        restart = f"slice {s.index}'s Job replaces its failed pod (backoffLimit {s.budget_used}/{s.backoff_limit} used)"
    else:
        restart = f"the JobSet restarts the group (maxRestarts {status.max_restarts})"
    code = (progress or {}).get("exit_code")
    known = BY_CODE.get(code) if trainer_down and isinstance(code, int) else None
    # Once the JobSet restart deleted the pods, the fault is in the trainer's record alone: its own words
    # name the victim ("process 1 (slice 1) was preempted (SIGTERM); ..."), never a survivor (#52)
    said = (progress or {}).get("stopped") if known is not None else ""
    what = fault.text() if fault is not None else \
        f"the trainer's stop (exit {code} {known.name}: retryable" + (f", in its words: {said})" if said else ")") \
        if known is not None else "its eviction by Kueue" if readmitted is not None else "a failure whose pod is gone"
    if preemptor and (fault is None or fault.whole_workload):  # Kueue names it by UID only
        what += f"; preempted to admit {preemptor}"
    if status.state == "Running":  # the new pods are up; the trainer imports, restores and compiles before it steps
        restart += ", its pods running again and the trainer " + (
            f"{progress['phase']}, not stepping yet" if resuming and progress else "not stepping yet")
    since = ""
    if fault is not None and fault.time is not None:
        since = f", since {_utc(fault.time)} ({format_duration(max(now - fault.time, 0.0))} ago)"
    step = ""
    if progress is not None:
        step = f"; the trainer's last step: {progress.get('steps_done')}" + (
            f", {format_duration(progress['step_age_s'])} ago" if progress.get("step_age_s") is not None else "")
    who = "Kueue admitted it again" if readmitted is not None else "the JobSet controller restarts the group"
    return [Reason("recovering", f"recovering by itself: {restart}, after {what}{since}{step}",
                   f"nothing to do: {who} and the trainer resumes from its newest "
                   f"checkpoint; `elxpk workload events {status.name}` lists what happened")]


def _this_eviction(evictions: Sequence[Fault], progress: dict | None, now: float) -> Fault | None:
    """The newest of Kueue's evictions dated no earlier than EVICTION_LEAD_S before the trainer's last step (its
    stop), else None: the eviction that stopped the trainer, not one of an earlier recovery."""
    age = (progress or {}).get("step_age_s")
    since = now - age - EVICTION_LEAD_S if isinstance(age, (int, float)) else now - EVICTION_RECENT_S
    mine = [f for f in evictions if f.time is not None and since <= f.time <= now + 1]
    return max(mine, key=lambda f: f.time or 0.0, default=None)


def _utc(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# Reasons that are steps of the same self-healing (the Job controller waiting out its back-off before the next
# pod): under a `recovering` reason they keep their text but not their fix, so --why says "nothing to do" and
# names the command that lists what happened once.
PART_OF_RECOVERY = frozenset({"backoff"})


def with_recovery(healing: list[Reason], reasons: list[Reason]) -> list[Reason]:
    """`healing` (recovering()'s answer) first, then `reasons`, the ones that are part of that recovery
    without a fix of their own."""
    if not healing:
        return reasons
    return healing + [dataclasses.replace(r, fix="") if r.cause in PART_OF_RECOVERY else r for r in reasons]


def trainer_stopped(progress: dict | None, name: str, pods: Sequence[dict | Pod] = ()) -> list[Reason]:
    """The trainer gave up for good, from its progress record (CHECKPOINT_DIR/elxpk-progress.json): a stop
    whose exit code the Job fails at once. A stop that the group restart retries is no reason of its own."""
    if not progress or not progress.get("gave_up"):
        return []
    code = progress.get("exit_code")
    known = BY_CODE.get(code) if isinstance(code, int) else None
    said = progress.get("stopped") or (known.meaning if known else "")
    where = _logs_flags([p for p in pods if (first_exit(p) or (None, None))[0] == code])
    logs = (f"`elxpk workload logs {name}{where}` shows the output of the attempt that gave up" if where else
            f"`elxpk workload events {name}` lists the failed pods and their exits")
    return [Reason("trainer-stopped", f"the trainer gave up for good (exit {code}"
                   + (f" {known.name}" if known else "") + f"): {said}",
                   f"{logs}; fix the cause before creating the workload again: a restart reproduces it")]


def _logs_flags(pods: Sequence[dict | Pod]) -> str:
    """`--slice K --vm I` of the first of `pods` to exit ("" when none: its pods are gone)."""
    if not pods:
        return ""
    first = min(pods, key=lambda p: (first_exit(p) or (0, 0.0))[1] or 0.0)
    labels = Pod.of(first).meta.labels
    if JOB_INDEX not in labels or COMPLETION_INDEX not in labels:
        return ""
    return f" --slice {labels[JOB_INDEX]} --vm {labels[COMPLETION_INDEX]}"
