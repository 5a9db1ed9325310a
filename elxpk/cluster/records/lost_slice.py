"""Which slice a fault took, and how: the victim and its cause, told apart from the slices that stopped with it.

Pure (pods and Kueue Workloads in, one `Fault` out; no I/O). A multi-controller group stops together: when
one slice's pod is deleted, evicted or preempted, its trainer hears SIGTERM and exits 77, and every other
slice's trainer stops at the same step with 75 (`peer_preempted`, trainer/elastic/group_stop.py) or with
jax's peer-gone error. Those 75s are casualties, not losses. So the victim is read from the API's own
words first, strongest first:

1. a pod's DisruptionTarget condition: PreemptionByScheduler/PreemptionByKubeScheduler (preempted),
   EvictionByEvictionAPI and TerminationByKubelet (evicted), DeletionByTaintManager and DeletionByPodGC
   (lost VM: its node went away);
2. a pod the kubelet evicted (`status.reason` Evicted);
3. a pod being deleted with no grace period (`deletionGracePeriodSeconds` 0: a force delete, as when its
   VM is gone; a SIGTERM still reaches the container, so its 77 is no preemption); one deleted with a grace
   period ranks with the 75s below, earliest first. A pod deleted by its Job's deletion (a JobSet restart
   deletes the old attempt's Jobs, and the garbage collector their pods) has no fault of its own: what it did
   before that delete is all that counts, and its exit after it (77, the delete's SIGTERM) is nothing;
4. the Kueue Workload's Preempted/Evicted condition (the whole workload: no one slice);
5. a container's exit other than 0 and 75 (77: it heard SIGTERM from what the pod no longer shows; 70 user
   error, 76 stalled, 137 killed, ...);
6. only 75s: a 75 is a survivor's word for a peer's loss, so the victim is another slice. Where every
   process of the 75s' slices stopped (a group stop), the victim's pod has left the API (a force delete's
   pod goes at once): the fault is `VICTIM_GONE`, naming no slice, never a survivor, unless `remembered`
   (pods a watch saw that the API no longer lists) holds the victim. A 75 whose slice runs on (its other
   VMs' processes still running) is the only trace of that slice's loss: the first to exit is named.
Only the pods of the newest restart attempt with a fault count: an older attempt's fault is history.
"""

from __future__ import annotations

import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from elxpk.cluster.objects.labels import (
    COMPLETION_INDEX,
    HEAD,
    JOB_INDEX,
    REPLICATED_JOB,
    RESTART_ATTEMPT,
    parse_time,
)
from elxpk.cluster.objects.meta import Meta
from elxpk.cluster.objects.pods import Event, Pod
from elxpk.cluster.objects.workloads import Job, Workload
from elxpk_contract.exit_codes import BY_CODE, SLICE_LOST
from elxpk_contract.exit_codes import PREEMPTED as PREEMPTED_EXIT

PREEMPTED, EVICTED, LOST_VM, DELETED, SIGNALLED, FAILED, SLICE_GONE = (
    "preempted", "evicted", "lost its VM", "deleted", "stopped by SIGTERM", "failed", "lost")
# A slice lost whose pod is gone from the API, its group's survivors stopped with 75: which one is not known.
VICTIM_GONE = "lost, its pod gone from the API"
# Each fault's words -> the trainer's class of it (an exit code's name), for a recovery the trainer wrote no
# record of (its writer killed): a report's `cause` is always a class, the words stay in its `victim`. A pod
# given its grace hears SIGTERM (77); a pod gone at once is a slice lost (75). FAILED: its exit code's own.
_FAULT_CLASS = {PREEMPTED: PREEMPTED_EXIT.name, EVICTED: PREEMPTED_EXIT.name, DELETED: PREEMPTED_EXIT.name,
                SIGNALLED: PREEMPTED_EXIT.name, LOST_VM: SLICE_LOST.name, SLICE_GONE: SLICE_LOST.name,
                VICTIM_GONE: SLICE_LOST.name}
_DISRUPTION = {"PreemptionByScheduler": PREEMPTED, "PreemptionByKubeScheduler": PREEMPTED,
               "EvictionByEvictionAPI": EVICTED, "TerminationByKubelet": EVICTED,
               "DeletionByTaintManager": LOST_VM, "DeletionByPodGC": LOST_VM}
# The strength of each kind of evidence, as the list above orders it (lower is stronger); Kueue's condition
# (rule 4) beats what the containers did after it.
_RANK = {"disruption": 0, "evicted": 1, "deleted": 2, "kueue": 3, "exit": 4, "casualty": 5}


@dataclass(frozen=True)
class Fault:
    cause: str  # preempted, evicted, lost its VM, deleted, stopped by SIGTERM, failed, lost
    slice: int | None  # the victim's slice (None: the whole workload, as a Kueue preemption)
    time: float | None  # unix seconds when it happened, as the API dates it
    detail: str  # what the API says of it, one short phrase
    pod: str | None = None
    attempt: int = 0  # the JobSet restart attempt it happened in
    # VICTIM_GONE: the slices that stopped with the group (exit 75), which are not the victim
    survivors: tuple[int, ...] = ()

    @property
    def victim_known(self) -> bool:
        """False for VICTIM_GONE: a slice was lost, and no source says which."""
        return self.cause != VICTIM_GONE

    @property
    def whole_workload(self) -> bool:
        """The fault took the whole workload (Kueue's): no one slice, and not for want of knowing which."""
        return self.slice is None and self.victim_known

    def text(self) -> str:
        where = "a slice" if not self.victim_known else "the workload" if self.slice is None else f"slice {self.slice}"
        return f"{where} {self.cause}" + (f" ({self.detail})" if self.detail else "")


def fault_class(fault: str, exit_code: int | None = None) -> str:
    """The trainer's class (an exit code's name) of a fault in this module's words; "unknown" for a failure
    whose code the trainer does not give."""
    known = _FAULT_CLASS.get(fault) or (BY_CODE[exit_code].name if exit_code in BY_CODE else None)
    return known or "unknown"


def exit_meaning(code: int) -> str:
    """The trainer's name for its own code, or the signal that killed the process; "" for another code."""
    known = BY_CODE.get(code)
    if known is not None:
        return known.name
    if 128 < code < 160:
        try:
            return f"killed by {signal.Signals(code - 128).name}"
        except ValueError:
            return f"killed by signal {code - 128}"
    return ""


def restart_attempt(obj: dict | Job | Pod) -> int:
    """The JobSet restart attempt a Job or pod belongs to (its label; 0 without one)."""
    meta = obj.meta if isinstance(obj, (Job, Pod)) else Meta.of(obj)
    try:
        return int(meta.labels.get(RESTART_ATTEMPT, 0))
    except ValueError:
        return 0


def slice_of(labels: Mapping[str, str]) -> int | None:
    """The slice index a Job's or pod's labels name (None for the Pathways head or without one)."""
    if labels.get(REPLICATED_JOB) in (None, HEAD):
        return None
    try:
        return int(labels[JOB_INDEX])
    except (KeyError, ValueError):
        return None


def first_exit(pod: dict | Pod) -> tuple[int, float | None] | None:
    """The first non-zero exit of the pod's containers (code, finish time), if any."""
    found = []
    for cs in Pod.of(pod).containers:
        for term in (cs.terminated, cs.last_terminated):
            code = term.exit_code if term else None
            if term and isinstance(code, int) and code != 0:
                found.append((code, parse_time(term.finished)))
    return min(found, key=lambda item: item[1] or 0.0) if found else None


def pod_fault(pod: dict | Pod, by_its_job: bool = False) -> tuple[str, Fault] | None:
    """(evidence kind, Fault) of one pod, or None when nothing went wrong with it. `by_its_job`: its delete
    came from its Job's deletion (deleted_by_its_job): no fault, and its exit after that delete none either."""
    pod = Pod.of(pod)
    meta = pod.meta
    name, index, attempt = meta.name, slice_of(meta.labels), restart_attempt(pod)
    vm = meta.labels.get(COMPLETION_INDEX)
    on = f"pod {name}" + (f", vm {vm}" if vm is not None else "")
    exited = first_exit(pod)
    deleted = parse_time(meta.deletion)
    if by_its_job and deleted is not None:
        asked = deleted - meta.grace_s
        # a 75 stays a survivor's word whenever it came; any other exit from the delete on is the delete's
        if exited is not None and exited[0] != SLICE_LOST.code and (exited[1] is None or exited[1] >= asked):
            exited = None
        deleted = None
    then = "" if exited is None else f"; exit {exited[0]}" + (f" {exit_meaning(exited[0])}" if exit_meaning(exited[0]) else "")
    target = pod.disruption
    if target is not None:
        reason = target.reason or "DisruptionTarget"
        return "disruption", Fault(_DISRUPTION.get(reason, EVICTED), index, target.at, f"{on}: {reason}{then}",
                                   name, attempt)
    if pod.reason == "Evicted":
        return "evicted", Fault(EVICTED, index, exited[1] if exited else parse_time(pod.started),
                                f"{on}: the kubelet evicted it{then}", name, attempt)
    if deleted is not None and (exited is None or exited[0] != SLICE_LOST.code):
        grace = meta.grace_s
        forced = grace == 0
        # A graceful delete is mostly a controller's (a JobSet restart deletes every Job's pods after a failure):
        # it ranks with the casualties, and the earliest of them is the fault; a force delete is a lost VM.
        return "deleted" if forced else "casualty", Fault(LOST_VM if forced else DELETED, index, deleted - grace,
                                f"{on}: " + ("force-deleted" if forced else f"deleted, grace {grace:g}s") + then,
                                name, attempt)
    if exited is None:
        return None
    code, finished = exited
    kind = "casualty" if code == SLICE_LOST.code else "exit"
    # 77: the trainer heard SIGTERM, from a delete or a drain the pod no longer shows
    cause = SLICE_GONE if kind == "casualty" else SIGNALLED if code == PREEMPTED_EXIT.code else FAILED
    return kind, Fault(cause, index, finished, f"{on}{then}", name, attempt)


def lost_slice(pods: Sequence[dict | Pod], workloads: Sequence[dict | Workload] = (),
               remembered: Sequence[dict | Pod] = (), jobs: Sequence[dict | Job] = ()) -> Fault | None:
    """The fault of the newest restart attempt that had one: its victim and cause (see the module's list).
    `remembered`: pods a watch saw before that the API no longer lists (the victim's, a force delete's);
    `jobs`: the pods' Jobs, which tell a pod deleted by its Job's deletion (rule 3)."""
    listed = [Pod.of(p) for p in pods]
    names = {p.meta.name for p in listed}
    every = listed + [p for p in map(Pod.of, remembered) if p.meta.name not in names]
    job_views = [Job.of(j) for j in jobs]
    found = [(said[0], said[1], p) for said, p in ((pod_fault(p, deleted_by_its_job(p, job_views)), p)
                                                   for p in every) if said is not None]
    kueue = kueue_fault(workloads)
    if not found:
        return kueue
    newest = max(f.attempt for _, f, _ in found)
    mine = [(kind, f, p) for kind, f, p in found if f.attempt == newest]
    # 75s of a stopped group are its survivors: never the victim (rule 6)
    stopped = _stopped_group([p for _, f, p in mine if _slice_lost_exit(p)],
                             [p for p in every if restart_attempt(p) == newest])
    survivors = tuple(sorted({f.slice for _, f, p in mine if p in stopped and f.slice is not None}))
    mine = [(kind, f, p) for kind, f, p in mine if p not in stopped]
    if not mine:  # only survivors left: the victim's pod is gone (dated by the first survivor's stop)
        gone = Fault(VICTIM_GONE, None, _first_stop(stopped), "the rest of its group stopped with it, exit 75",
                     None, newest, survivors)
        return kueue if kueue is not None else gone
    strongest = min(_RANK[kind] for kind, _, _ in mine)
    if kueue is not None and strongest >= _RANK["exit"]:  # Kueue's word beats what the containers did after
        return kueue
    return min((f for kind, f, _ in mine if _RANK[kind] == strongest), key=lambda f: (f.time or 0.0, f.slice or 0))


def deleted_by_its_job(pod: dict | Pod, jobs: Sequence[Job]) -> bool:
    """Whether the pod's delete was asked at or after its own Job's: the garbage collector's, once the Job was
    deleted (the JobSet deletes an old attempt's Jobs in the foreground, so they stay listed, deleting, until
    their pods are gone). A pod deleted before its Job (kill-slice, an eviction, a preemption) is not. Both
    times are whole seconds, and the collector follows the Job's delete within one."""
    view = Pod.of(pod)
    deleted = parse_time(view.meta.deletion)
    if deleted is None:
        return False
    owner = next((j for j in jobs if j.meta.uid is not None and view.meta.owned_by(j.meta.uid)), None)
    job_deleted = None if owner is None else parse_time(owner.meta.deletion)
    return job_deleted is not None and deleted - view.meta.grace_s >= job_deleted


def _slice_lost_exit(pod: Pod) -> bool:
    exited = first_exit(pod)
    return exited is not None and exited[0] == SLICE_LOST.code


def _stopped_group(slice_lost: list[Pod], attempt: list[Pod]) -> list[Pod]:
    """The 75s (`slice_lost`, pods of one attempt) when they are a stopped group's: no process of their slices
    runs on (a pod of another VM of such a slice still running means the slice went on: its 75 is no group
    stop, but the only trace of that slice's loss). A VM's replacement pod is not its process running on."""
    stopped_vms = {(slice_of(p.meta.labels), p.meta.labels.get(COMPLETION_INDEX)) for p in slice_lost}
    slices = {index for index, _ in stopped_vms}
    for pod in attempt:
        vm = (slice_of(pod.meta.labels), pod.meta.labels.get(COMPLETION_INDEX))
        if vm[0] in slices and vm not in stopped_vms and pod.phase == "Running" and not pod.meta.deleting:
            return []
    # Nor is it a group's stop while another slice still ran at the first 75: a group stops together, every
    # survivor with 75, so a slice that went on (running still, or stopped only later, by the JobSet
    # restart's delete) says the 75s were their own slice's failure (a transient one: out of memory, storage),
    # and that slice is the victim, not a survivor.
    first = _first_stop(slice_lost)
    if first is not None and any(_ran_after(pod, first) for pod in attempt
                                 if slice_of(pod.meta.labels) not in slices and slice_of(pod.meta.labels) is not None):
        return []
    return slice_lost


def _first_stop(pods: list[Pod]) -> float | None:
    """When the first of `pods` exited (its container's finish time), None where none says."""
    return min((t for t in ((first_exit(p) or (0, None))[1] for p in pods) if t is not None), default=None)


def _ran_after(pod: Pod, when: float) -> bool:
    """Whether the pod's process still ran at `when`: running and not being deleted, or ended after it."""
    exited = first_exit(pod)
    if exited is not None:
        return exited[1] is not None and exited[1] > when
    deleted = parse_time(pod.meta.deletion)
    if deleted is not None:
        return deleted - (pod.meta.grace_s or 0.0) > when
    return pod.phase == "Running"


# Kueue's Event of an eviction of the Workload (EvictedDueToPreempted, ...DueToPodsReadyTimeout, ...): the
# same word as its Evicted condition, and the one kept where the condition was True too briefly to be seen.
KUEUE_EVICTED_EVENT = "EvictedDueTo"


def incident_rank(kind: str, fault: str, exit_code: int | None, reason: str = "") -> int | None:
    """The strength of an incident record's evidence (elxpk/cluster/records/incidents.py: its kind, the pod's
    fault as pod_fault read it, its exit code, its reason) in this module's order, lower stronger; None for a
    casualty (a 75, a graceful delete's exit) or what names no victim: the record's readers (`report
    --incidents`) rank the incidents as `lost_slice` ranks the pods. Kueue's eviction Event ranks as its
    condition: a workload preempted and admitted again within a second or two (its pods drain fast) shows the
    condition True to no watch, and the Event is then the record's only word of Kueue's."""
    if kind in ("disruption", "evicted"):
        return _RANK[kind]
    if kind == "kueue_eviction" or (kind == "event" and reason.startswith(KUEUE_EVICTED_EVENT)):
        return _RANK["kueue"]
    if kind != "exit" or exit_code is None or exit_code == SLICE_LOST.code or fault in (DELETED, SLICE_GONE):
        return None
    # an exit of a pod the API said was force-deleted (its VM gone), evicted or preempted: that pod's word
    return _RANK["deleted"] if fault == LOST_VM else _RANK["evicted"] if fault in (EVICTED, PREEMPTED) else _RANK["exit"]


KUEUE_RANK = _RANK["kueue"]


def kueue_event_faults(events: Sequence[dict | Event]) -> list[Fault]:
    """Kueue's eviction Events of a Workload (Preempted, EvictedDueTo...), each as the whole workload's fault.
    Kueue clears its conditions once it admits the workload again; its Events stay about an hour, so they are
    what names Kueue as the cause of a recovery still under way (the notify watch, `status --why`)."""
    found = []
    for e in map(Event.of, events):
        reason = e.reason or ""
        if reason != "Preempted" and not reason.startswith(KUEUE_EVICTED_EVENT):
            continue
        cause = PREEMPTED if "Preempt" in reason else EVICTED
        found.append(Fault(cause, None, parse_time(e.time), f"by Kueue: {reason}: {e.message or ''}".rstrip(": ")))
    return found


def kueue_fault(workloads: Sequence[dict | Workload]) -> Fault | None:
    """The Kueue Workload's Preempted/Evicted condition, as the whole workload's fault (None: none is True)."""
    for w in map(Workload.of, workloads):
        for c in w.conditions:
            if c.type in ("Preempted", "Evicted") and c.true:
                cause = PREEMPTED if c.type == "Preempted" or c.reason == "Preempted" else EVICTED
                return Fault(cause, None, c.at, f"by Kueue: {c.reason}: {c.message or ''}".rstrip(": "))
    return None
