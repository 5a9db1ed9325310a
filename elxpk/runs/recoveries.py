"""One timeline per recovery: failure detected -> slices ready -> restored -> first new step.

A live recovery (trainer.elastic.live_recovery) reads the same way with "state rebuilt" for "restored": its
restore_done says `state_source: live`, its step is the failed step, and it rewinds nothing; a live
recovery that could not be trusted says why (`live_fallback`) and restored a checkpoint instead.

Built from the typed events (and the metric times), so the same code reads in-process recoveries
(pause-resume, resize), multi-controller group restarts (where the supervisor writes the detection and
the restarted trainer the rest) and cold restarts (a new session that restores and trains on, with no
`first_step_after_recovery` of its own: the first step it records ends the recovery).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from elxpk.runs.failure_causes import cause_of
from elxpk.runs.step_columns import MetricColumns
from elxpk_contract.event_records import (
    CheckpointSkipped,
    Event,
    FailureDetected,
    FirstStepAfterRecovery,
    Preempted,
    ResizeRefused,
    RestoreDone,
    RestoreStarted,
    RunFinished,
    RunStarted,
    SlicesReady,
)
from elxpk_contract.records import Metric

_UNANNOUNCED = "session_ended_unannounced"
_PREEMPTED = "preempted"  # the writer itself heard SIGTERM and stopped (a Preempted event), and a new session followed


@dataclass(frozen=True)
class RecoveryTimeline:
    failure_step: int | None
    lost: tuple[int, ...]
    detected_at: float  # unix seconds
    slices_ready_s: float | None  # offsets from detection, seconds
    restore_started_s: float | None
    restored_s: float | None
    first_step_s: float | None
    restored_step: int | None
    first_step: int | None
    cold_restart: bool = False  # a new session (run_started) carried the recovery
    caught_up_s: float | None = None  # when the step after the failed one ended (its metric time)
    state_source: str = ""  # restore_done's: live, checkpoint or init ("" in older records)
    live_fallback: str = ""  # why a live recovery fell back to the checkpoint
    refused_widths: tuple[int, ...] = ()  # slice counts a resize was refused at (memory): the run waited instead
    interrupted: bool = False  # another failure came before its first step (e.g. a slice lost during the restore)
    undetected: bool = False  # no failure_detected: a session ended unannounced (SIGKILL) and a new one restored
    kind: str = ""  # failure_detected's kind; "preempted": the writer heard SIGTERM itself (no failure_detected)
    heard_by: int | None = None  # preempted, peer_preempted: the process that heard the signal
    # Checkpoints skipped before the failure at steps between the one restored and the failed one, with their
    # reasons: each would have shortened the rewind, so the report names them beside it.
    skipped: tuple[tuple[int, str], ...] = ()
    # The failure's class, as failures by cause count it: failure_detected's cause (slice_lost, stalled), else
    # its kind's (preempted: the writer heard SIGTERM), else the cluster's word for it, else unknown.
    cause: str = ""
    # Where the trainer's records name no lost slice (a killed session, an older trainer's `preempted`) or only
    # the writer's own (process 0 heard SIGTERM itself: Kueue's preemption reaches every slice): the victim as
    # the cluster's incident record names it, e.g. "slice 0 lost its VM" (elxpk/runs/recovery_victims.py)
    victim: str = ""
    victim_from: str = ""  # where `lost` was read: "trainer", "incidents", or "" (nowhere: not known)

    @property
    def live(self) -> bool:
        return self.state_source == "live"

    @property
    def complete(self) -> bool:
        return self.first_step_s is not None

    @property
    def restore_s(self) -> float | None:
        if self.restored_s is None or self.restore_started_s is None:
            return None
        return self.restored_s - self.restore_started_s

    @property
    def rewound_steps(self) -> int | None:
        if self.failure_step is None or self.restored_step is None:
            return None
        return max(0, self.failure_step - self.restored_step)

    def to_dict(self) -> dict:
        return {
            "failure_step": self.failure_step,
            "lost_slices": list(self.lost),
            "detected_at": self.detected_at,
            "slices_ready_s": self.slices_ready_s,
            "restore_started_s": self.restore_started_s,
            "restored_s": self.restored_s,
            "first_step_s": self.first_step_s,
            "restore_s": self.restore_s,
            "restored_step": self.restored_step,
            "first_step": self.first_step,
            "rewound_steps": self.rewound_steps,
            "cold_restart": self.cold_restart,
            "caught_up_s": self.caught_up_s,
            "state_source": self.state_source,
            "live_fallback": self.live_fallback,
            "refused_widths": list(self.refused_widths),
            "interrupted": self.interrupted,
            "undetected": self.undetected,
            "kind": self.kind,
            "heard_by": self.heard_by,
            "skipped_checkpoints": [{"step": step, "reason": reason} for step, reason in self.skipped],
            "cause": self.cause,
            "victim": self.victim or None,
            "victim_from": self.victim_from or None,
        }

    def _what(self, who: str, at: object) -> str:
        """What the fault was, by the trainer's own record of it (and the victim by the cluster's, where the
        trainer's names none)."""
        told = f"{self.victim} (the incident record): " if self.victim else ""
        if self.undetected:
            return f"{told}session ended unannounced (killed) at step {at}"
        heard = "" if self.heard_by is None else f" by process {self.heard_by}"
        if self.kind == _PREEMPTED:
            its = f" (slice {','.join(map(str, self.lost))})" if self.lost and self.victim_from == "trainer" else ""
            return f"{told}SIGTERM heard{heard}{its}, the group stopped at step {at}"
        if self.kind == "peer_preempted":
            return f"{who} lost at step {at} (SIGTERM heard{heard}; the writer stopped with its group)"
        if told:
            return f"{told}failure detected at step {at}"
        return f"{who} lost at step {at}"

    def describe(self) -> str:
        """One line, e.g. 'slice 1 lost at step 120; restored step 100 in 0.4 s; step 100 reached 2.1 s ...'."""
        who = "slice " + ",".join(map(str, self.lost)) if self.lost else "a slice"
        at = self.failure_step if self.failure_step is not None else "?"
        parts = [self._what(who, at)]
        if self.cold_restart:
            parts.append("cold restart")
        if self.restored_step is not None:
            took = f" in {self.restore_s:.1f} s" if self.restore_s is not None else ""
            if self.live:
                parts.append(f"state of step {self.restored_step} rebuilt from the surviving slices{took}, "
                             "0 steps rewound")
            else:
                parts.append(f"restored step {self.restored_step}{took}")
        for skipped_step, reason in self.skipped:
            parts.append(f"checkpoint {skipped_step} had been skipped ({reason or 'no reason given'}), so the rewind went "
                         f"back to step {self.restored_step}")
        if self.live_fallback:
            parts.append(f"live recovery not used ({self.live_fallback})")
        for width in self.refused_widths:
            parts.append(f"resize to {width} slices refused (out of device memory), waited for more")
        if self.first_step_s is not None:
            step = self.first_step if self.first_step is not None else "?"
            parts.append(f"step {step} reached {self.first_step_s:.1f} s after the failure")
            if self.caught_up_s is not None and self.failure_step is not None and self.rewound_steps:
                parts.append(f"step {self.failure_step + 1} after {self.caught_up_s:.1f} s")
        elif self.interrupted:
            parts.append("interrupted by another failure before its first step (the next recovery carries on)")
        else:
            parts.append("not recovered")
        return "; ".join(parts)


def recoveries(events: Sequence[Event], metrics: Sequence[Metric] = ()) -> list[RecoveryTimeline]:
    """Pair each failure_detected with the first of each later phase before the next failure.

    The recovery ends at its `first_step_after_recovery`; a cold restart writes none, so there the first
    metric record after the detection (and after the restore) ends it.
    """
    columns = MetricColumns.of(metrics)
    found: list[RecoveryTimeline] = []
    # By time, not file order: a supervisor writes its events once the group it watched is down.
    timed = sorted([*events, *_unannounced_ends(events, columns), *_preemptions_restarted(events)],
                   key=lambda e: e.time)
    starts = [i for i, e in enumerate(timed) if isinstance(e, FailureDetected)]
    for n, i in enumerate(starts):
        detect = timed[i]
        assert isinstance(detect, FailureDetected)
        t0 = detect.time
        end = starts[n + 1] if n + 1 < len(starts) else len(timed)
        first: dict[type, Event] = {}
        refused: list[int] = []
        for e in timed[i + 1 : end]:
            kind = type(e)
            if isinstance(e, ResizeRefused):  # that attempt never restored: its phases start again
                refused.append(len(e.slices))
                first.pop(SlicesReady, None)
                first.pop(RestoreStarted, None)
            if kind in (SlicesReady, RestoreStarted, RestoreDone, FirstStepAfterRecovery, RunStarted):
                first.setdefault(kind, e)
            if kind is FirstStepAfterRecovery:
                break
        until = timed[end].time if end < len(timed) else float("inf")

        def offset(kind: type, first: dict[type, Event] = first, t0: float = t0) -> float | None:
            return first[kind].time - t0 if kind in first else None

        done = first.get(RestoreDone)
        step_event = first.get(FirstStepAfterRecovery)
        first_step = step_event.step if step_event is not None else None
        first_step_s = offset(FirstStepAfterRecovery)
        if step_event is None and done is not None:  # a cold restart: the first step it records
            after = columns.first_index(done.time, until=until)
            if after is not None:
                first_step, first_step_s = columns.step[after], columns.time[after] - t0
        found.append(
            RecoveryTimeline(
                failure_step=detect.step,
                lost=detect.slices_lost,
                detected_at=t0,
                slices_ready_s=offset(SlicesReady),
                restore_started_s=offset(RestoreStarted),
                restored_s=offset(RestoreDone),
                first_step_s=first_step_s,
                restored_step=done.step if done is not None else None,
                first_step=first_step,
                cold_restart=RunStarted in first,
                state_source=_state_source(done),
                live_fallback=done.live_fallback if isinstance(done, RestoreDone) else "",
                refused_widths=tuple(refused),
                interrupted=first_step_s is None and n + 1 < len(starts),
                undetected=detect.kind == _UNANNOUNCED,
                kind=detect.kind,
                heard_by=detect.heard_by,
                skipped=_skipped_before(timed[:i], done.step if done is not None else None, detect.step),
                cause=cause_of(detect),
                victim_from="trainer" if detect.slices_lost else "",
            )
        )
    return found


def _skipped_before(earlier: Sequence[Event], restored: int | None, failed: int | None
                    ) -> tuple[tuple[int, str], ...]:
    """The checkpoints skipped before a failure at steps after the one restored, up to the failed one."""
    if restored is None or failed is None or failed <= restored:
        return ()
    return tuple((e.step, e.reason) for e in earlier
                 if isinstance(e, CheckpointSkipped) and e.step is not None and restored < e.step <= failed)




def _preemptions_restarted(events: Sequence[Event]) -> list[FailureDetected]:
    """A failure for each `preempted` that a new session followed: the process that writes the records
    (process 0) heard SIGTERM itself, so nobody wrote failure_detected, yet the group was restarted and
    the new session restored (a kill of process 0's slice, a Kueue preemption of the whole workload).
    Without it such a fault has no recovery at all (a peer's SIGTERM is failure_detected `peer_preempted`).
    Dated at the stop, at the step the group stopped at."""
    sessions = sorted(e.time for e in events if isinstance(e, RunStarted))
    found = []
    for e in events:
        if isinstance(e, Preempted) and any(began > e.time for began in sessions):
            heard = "" if e.heard_by is None else f" by process {e.heard_by}"
            # its process's slice is a victim (a kill of slice 0; with Kueue's preemption, one of every slice)
            found.append(FailureDetected(time=e.time, step=e.step, kind=_PREEMPTED, source="report",
                                         error=f"{e.signal} heard{heard}; the run stopped at step {e.step}",
                                         heard_by=e.heard_by,
                                         slices_lost=() if e.heard_slice is None else (e.heard_slice,)))
    return found


def _unannounced_ends(events: Sequence[Event], metrics: MetricColumns) -> list[FailureDetected]:
    """A failure for each session that ended with no record of why (a SIGKILL, an OOM kill, a stall exit)
    and was followed by a new session: nobody wrote failure_detected, yet the new session restores and
    re-executes what the old one had done. Dated at the old session's last record, at the step it was on."""
    sessions = sorted(e.time for e in events if isinstance(e, RunStarted))
    ends = []
    for began, restarted in zip(sessions, sessions[1:], strict=False):
        inside = [e for e in events if began <= e.time < restarted]
        if any(isinstance(e, (FailureDetected, RunFinished, Preempted)) for e in inside):
            continue  # announced: a detected failure, a finished session (then extended) or a preemption
        done = metrics.between(began, restarted)  # (latest time, highest step) of the steps it recorded
        last = max([*(e.time for e in inside), *((done[0],) if done else ())])
        step = (done[1] if done else -1) + 1
        ends.append(FailureDetected(time=last, step=step, kind=_UNANNOUNCED, source="report",
                                    error="the session ended without a record (killed); its restart found it"))
    return ends


def _state_source(done: Event | None) -> str:
    if not isinstance(done, RestoreDone):
        return ""
    if done.state_source:
        return done.state_source
    return "checkpoint" if done.from_checkpoint else "init"  # written before state_source existed


def with_catch_up(found: list[RecoveryTimeline], metrics: Sequence[Metric]) -> list[RecoveryTimeline]:
    """Add when each recovery regained its lost progress: when the step after the failed one ended."""
    columns = MetricColumns.of(metrics)
    out = []
    for rec in found:
        if rec.first_step_s is None or rec.failure_step is None:
            out.append(rec)
            continue
        start = rec.detected_at + rec.first_step_s
        back = columns.first_index(start, above_step=rec.failure_step)
        out.append(replace(rec, caught_up_s=columns.time[back] - rec.detected_at) if back is not None else rec)
    return out
