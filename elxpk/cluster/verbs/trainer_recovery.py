"""A kill's recovery as the trainer tells it, for every kill-slice mode (delete, evict, exit; once or in soak
rounds): the slice's pods back, then the trainer's next step after the kill, and the steps the kill rewound.

Pods ready is not training: the trainer imports, restores and compiles after its pods are ready, so the
recovery ends at its next step, read from its own records (the progress record, CHECKPOINT_DIR/elxpk-progress.json:
a restarted trainer writes it at its first step, an in-process recovery at the first step of its new attempt;
else the `first_step_after_recovery` event in a Pathways head's log). The rewind is what the trainer recorded
at the stop (`drain_steps_lost`: the steps its restart repeats, written with its stop on SIGTERM), read from the
record while the stop is the newest thing in it (the new process overwrites it); never an estimate: where
no stop record was seen, the rewind is unknown.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from elxpk.cluster.api.kube import Kube
from elxpk.cluster.objects.labels import is_pathways, parse_time
from elxpk.cluster.objects.pods import Pod
from elxpk.cluster.records.progress import checkpoint_dir, progress_of
from elxpk.cluster.records.trainer_phase import startup_words
from elxpk.cluster.verbs.observe import get_workload
from elxpk.cluster.verbs.ops import KillPlan, jobset_ended, log_source
from elxpk.errors import ClusterError, NotFoundError, Timeout, UsageError
from elxpk.units import format_duration

RECOVERY_EVENT = "first_step_after_recovery"
PROGRESS_SOURCE = "the trainer's progress record"
_STOPPED = ("preempted", "failed", "stalled")


@dataclass(frozen=True)
class Recovery:
    slice_back_s: float  # kill -> every pod of the slice new or restarted, Running and Ready
    next_step_s: float | None  # kill -> the trainer's first step after it (its records), if seen
    next_step: int | None = None  # that step's number (steps done), when the progress record gave it
    source: str = ""  # where next_step_s was read: "progress record", "head's log", or why it was not
    startup: str = ""  # the new process's start-up, phase by phase, as its progress record gives it ("": none)
    steps_lost: int | None = None  # the trainer's recorded rewind of the stop after the kill (None: not seen)
    stepped_at: float | None = None  # the unix time of that next step, as the trainer recorded it


class _Stop:
    """The trainer's stop after the kill, as its progress record said it while it was the newest write."""

    def __init__(self, killed_at: float) -> None:
        self.killed_at = killed_at
        self.steps_lost: int | None = None

    def note(self, progress: dict | None) -> None:
        if progress is None or progress.get("state") not in _STOPPED:
            return
        lost, written = progress.get("drain_steps_lost"), progress.get("updated_at")
        if isinstance(lost, int) and isinstance(written, (int, float)) and written >= self.killed_at:
            self.steps_lost = lost


def _back(pod: dict, plan: KillPlan, before: dict[str, int]) -> bool:
    """A pod of the slice that replaced a killed one, or a killed one's container restarted, Running and Ready."""
    view = Pod.of(pod)
    if not view.ready or view.meta.deleting:
        return False
    uid = view.meta.uid or ""
    return uid not in plan.uids or sum(c.restarts for c in view.containers) > before.get(uid, 0)


def watch_recovery(kube: Kube, namespace: str, name: str, plan: KillPlan, *, killed_at: float,
                   clock: Callable[[], float], sleep: Callable[[float], None], timeout_s: float,
                   poll_s: float = 2.0, on_tick: Callable[[str], None] = lambda s: None,
                   before: dict[str, int] | None = None, unread: str = "") -> Recovery:
    """The slice back (every pod of the plan new or restarted, ready), then the trainer's next step after the
    kill. `before`: each killed pod's container restarts at the kill (an exit restarts in place). `unread`:
    why the trainer's record could not be read before the kill (a soak round's look): its next step is then
    not waited for. Timeout when the pods are not back within `timeout_s`; ClusterError when the workload
    finished first."""
    stop = _Stop(killed_at)
    while True:
        pods = kube.list_pods(namespace, plan.selector)
        fresh = [p for p in pods if _back(p, plan, before or {})]
        on_tick(f"{len(fresh)}/{plan.expected} replacement pods ready")
        if len(fresh) >= plan.expected:
            back = clock() - killed_at
            started = max([killed_at, *(_started(p) for p in fresh)])
            break
        jobset = get_workload(kube, namespace, name)
        ended = jobset_ended(jobset)
        if ended:  # no controller replaces a finished workload's pods: waiting would last the whole timeout
            raise ClusterError(f"{name} {ended} before its killed pods were replaced: the kill came too late to "
                               "test a recovery; kill a slice while `status` shows it training")
        stop.note(progress_of(jobset, clock())[0])
        if clock() - killed_at >= timeout_s:
            raise Timeout(f"slice pods of {name} not running again after {format_duration(timeout_s)}")
        sleep(poll_s)
    if unread:
        return Recovery(back, None, None, unread, "", stop.steps_lost)
    # A step of the old processes (their last write, as their group stopped) can come after the kill: only a
    # step after the replacement containers started is the recovered trainer's.
    next_step = _next_step_after(kube, namespace, name, killed_at, started, clock(), stop)
    while next_step.seconds is None and next_step.readable and clock() - killed_at < timeout_s:
        on_tick("slice back; waiting for the trainer's first step after recovery")
        sleep(poll_s)
        next_step = _next_step_after(kube, namespace, name, killed_at, started, clock(), stop)
    return Recovery(back, next_step.seconds, next_step.step, next_step.source, next_step.startup, stop.steps_lost,
                    None if next_step.seconds is None else killed_at + next_step.seconds)


class _NextStep(NamedTuple):
    seconds: float | None  # kill -> the first step completed after it
    step: int | None
    source: str  # where it was read, or why not
    readable: bool  # whether waiting may still see it (a record or a log to read)
    startup: str = ""  # the writer's start-up (trainer_phase.startup_words), when it was a new process


def _next_step_after(kube: Kube, namespace: str, name: str, killed_at: float, started: float,
                     now: float, stop: _Stop) -> _NextStep:
    """The trainer's first step after the kill: from its progress record, a running trainer's step after
    `started` (when the replacement containers started), else the `first_step_after_recovery` event in a
    Pathways head's log. The record's stop, when it is one, goes to `stop`."""
    jobset = get_workload(kube, namespace, name)
    progress, problem = progress_of(jobset, now)
    stop.note(progress)
    first = _first_step(progress, started)
    if progress is not None and first is not None:
        began = progress.get("process_started_at")  # a process that recovered in place started before the kill
        fresh = isinstance(began, (int, float)) and began >= killed_at
        # steps_done is the newest step's: that step's number only where the newest step is the first
        step = int(progress["steps_done"]) if progress.get("step_time") == first else None
        return _NextStep(first - killed_at, step, PROGRESS_SOURCE, True, startup_words(progress) if fresh else "")
    ended = jobset_ended(jobset)  # it finished (failed) with no step after the kill: none will come
    if is_pathways(jobset):
        seconds = _head_log_step_after(kube, namespace, name, killed_at)
        return _NextStep(seconds, None, "head's log", not ended)
    if ended:
        return _NextStep(None, None, f"the workload {ended} first", False)
    if checkpoint_dir(jobset) is None:
        return _NextStep(None, None, "the workload names no checkpoint directory, so no progress record", False)
    return _NextStep(None, None, PROGRESS_SOURCE if not problem else problem, True)


def _first_step(progress: dict | None, started: float) -> float | None:
    """The unix time of a running trainer's first step after `started`: its record's `resumed_at` (the first
    step of its current attempt), else, from an older trainer, its newest `step_time`. The newest step is
    later than the first wherever the record was written again since (a checkpoint's commit, the period):
    read as the recovery, it would make the recovery look longer than the trainer's own records say."""
    if progress is None or progress.get("state") != "running":
        return None
    for key in ("resumed_at", "step_time"):
        at = progress.get(key)
        if isinstance(at, (int, float)):
            return float(at) if at > started else None
    return None


def _head_log_step_after(kube: Kube, namespace: str, name: str, killed_at: float) -> float | None:
    """Seconds from the kill to the trainer's `first_step_after_recovery` event in the head's log, if any."""
    try:
        source = log_source(kube, namespace, name, head=False, slice_index=None, vm=None)
    except (NotFoundError, UsageError):
        return None
    if source.what != "head":
        return None
    for line in kube.pod_log(namespace, source.pod, source.container, tail_lines=2000).splitlines():
        record = event_record(line)
        if record and record.get("event") == RECOVERY_EVENT and float(record.get("time", 0)) >= killed_at:
            return float(record["time"]) - killed_at
    return None


def event_record(line: str) -> dict | None:
    """A trainer event (an events.jsonl record) embedded in a log line, possibly after a log prefix."""
    start = line.find("{")
    if start < 0:
        return None
    try:
        record = json.loads(line[start:])
    except ValueError:
        return None
    return record if isinstance(record, dict) and "event" in record else None


def _started(pod: dict) -> float:
    """When the pod's containers last started (the API's seconds, rounded down); 0 when none says."""
    times = [parse_time(cs.running_since) for cs in Pod.of(pod).containers]
    return max([t for t in times if t is not None], default=0.0)
