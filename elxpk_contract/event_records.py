"""events.jsonl's records: one frozen dataclass per event kind, each a subclass of `Event`, keyed by `EVENTS`.

`Event.to_json()` is the exact dict written (its kind under "event"); `parse_event` reads one back, or raises
`RecordError` (one line). Writers build them through `records.make_event`, which checks what they write.
Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from elxpk_contract.record_fields import RecordError, parse_fields, to_json
from elxpk_contract.speed import SpeedBasis


@dataclass(frozen=True, slots=True)
class Event:
    """Fields every event has. `step`: the step the run was at (what each kind means by it is below)."""

    NAME: ClassVar[str] = ""
    time: float  # unix seconds when it happened (may be earlier than when it was written)
    step: int | None
    source: str = "trainer"  # or "supervisor": the local multi-controller supervisor wrote it

    def to_json(self) -> dict:
        return {"event": self.NAME, **to_json(self)}


@dataclass(frozen=True, slots=True)
class RunStarted(Event):
    NAME: ClassVar[str] = "run_started"
    slices: tuple[int, ...] = ()
    backend: str = ""
    # The run's identity (--run-id: on a cluster the JobSet's UID, the same in every group restart): `report`
    # keeps the sessions of one workload apart from another's in the same run directory. "" when unset.
    run_id: str = ""
    # What the session's step speed is reckoned from (elxpk_contract/speed.py): an example's tokens and model
    # FLOPs, the devices per slice, jax's device kind and its bf16 peak (None: unknown, so no MFU). 0 and ""
    # from the supervisor, and from a trainer older than the fields: no speed then.
    tokens_per_example: int = 0
    flops_per_example: float = 0.0
    devices_per_slice: int = 0
    device_kind: str = ""
    peak_tflops: float | None = None

    def speed_basis(self) -> SpeedBasis | None:
        if self.tokens_per_example <= 0 or self.flops_per_example <= 0 or self.devices_per_slice <= 0:
            return None
        return SpeedBasis(self.tokens_per_example, self.flops_per_example, self.devices_per_slice,
                          self.device_kind, self.peak_tflops if self.peak_tflops and self.peak_tflops > 0 else None)


@dataclass(frozen=True, slots=True)
class RunFinished(Event):
    NAME: ClassVar[str] = "run_finished"  # step: the number of steps done
    attempts: int = 1
    recoveries: int = 0


@dataclass(frozen=True, slots=True)
class FailureDetected(Event):
    NAME: ClassVar[str] = "failure_detected"  # step: the step that failed
    slices_lost: tuple[int, ...] = ()  # empty: the writer could not tell which
    error: str = ""  # first line of what was seen, e.g. "DATA_LOSS: ..." or "process 1 SIGKILLed"
    kind: str = ""  # the trainer's classification, e.g. slice_down, maybe_slice_down; process_killed
    attempt: int | None = None
    warning: str = ""
    # The failure's class: the name of the exit code it ends the run with when it is not retried
    # (elxpk_contract.exit_codes: slice_lost, stalled); "" in records written before it existed.
    # `--elastic-stop-on-repeat N` stops after N in a row of one cause with no step past the first's.
    cause: str = ""
    stopped: str = ""  # why the trainer stopped retrying after this failure ("" when it retried)
    # kind peer_preempted: the process that heard the signal; the writer (process 0) stopped with its group
    heard_by: int | None = None
    # kind peer_preempted: the drain (trainer/elastic/drain.py), as in `preempted`; None for other kinds
    saved: bool | None = None
    drain_steps_lost: int | None = None
    save_skipped: str = ""


@dataclass(frozen=True, slots=True)
class SlicesReady(Event):
    NAME: ClassVar[str] = "slices_ready"
    slices: tuple[int, ...] = ()  # the slices the next attempt uses
    wait_s: float | None = None
    attempt: int | None = None


@dataclass(frozen=True, slots=True)
class RestoreStarted(Event):
    NAME: ClassVar[str] = "restore_started"
    slices: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class RestoreDone(Event):
    NAME: ClassVar[str] = "restore_done"  # step: the restored step (0 when nothing was restored)
    from_checkpoint: bool = True
    slices: tuple[int, ...] = ()
    compile_needed: bool = False
    compile_s: float = 0.0  # the attempt compiles right after restoring, before its first step
    # Where the state came from: "live" (rebuilt from the surviving slices' copy of the last completed step,
    # nothing read from storage), "checkpoint" (from_checkpoint true) or "init"; "" in records written before
    # it existed (from_checkpoint tells). Not named `source`: every event's `source` is its writer.
    state_source: str = ""
    live_fallback: str = ""  # why a live recovery was not used and the checkpoint was, e.g. "every slice lost"
    rebuild_s: float | None = None  # live: survivors' shards -> the new mesh, fingerprint checked
    live_prepare_s: float = 0.0  # the live checks' compile, in the background from the session's start
    compiled_bytes_per_device: int | None = None  # XLA's memory analysis of this attempt's compiled step
    # How the attempt's step was made (EXECUTABLE_SOURCES): "compiled", "cache_hit" (jax's persistent cache),
    # "deserialized" (the run's executable store, no trace) or "reused" (this process had it); "" in records
    # written before it existed. `executable_store`: why the store's entry was not loaded ("" when it was).
    executable: str = ""
    executable_store: str = ""
    # A checkpoint's restore in its two phases: orbax's read into the devices, and the fingerprint check of
    # what was read (None: no checkpoint was read, or records written before they existed).
    read_s: float | None = None
    verify_s: float | None = None


# A process's start-up, phase by phase, each at most once per process and timed from the process's start
# (trainer/startup.py): what a restart spent its seconds on before its first step.
STARTUP_PHASES = ("imports_done", "devices_open", "slices_joined", "restore_started", "restore_done",
                  "executable_ready", "first_step_done")
EXECUTABLE_SOURCES = ("compiled", "cache_hit", "deserialized", "reused")
# What a reader calls each phase (its end, from the process's start): `report`, `status`, `kill-slice --watch`
_STARTUP_WORDS = {"imports_done": "imports", "devices_open": "devices", "slices_joined": "slices",
                  "restore_started": "restore from", "restore_done": "restored", "executable_ready": "step",
                  "first_step_done": "first step"}


def describe_startup(phases: dict[str, float], how: str) -> str:
    """A start-up's phases so far as one line, in phase order: `imports 2.70 s -> ... -> step (deserialized)
    6.04 s -> first step 7.26 s`, each from the process's start."""
    marks = []
    for phase in (p for p in STARTUP_PHASES if p in phases):
        label = _STARTUP_WORDS[phase] + (f" ({how})" if phase == "executable_ready" and how else "")
        marks.append(f"{label} {phases[phase]:.2f} s")
    return " -> ".join(marks)


@dataclass(frozen=True, slots=True)
class Startup(Event):
    NAME: ClassVar[str] = "startup"  # step: the step the process was at
    phase: str = ""  # one of STARTUP_PHASES
    since_start_s: float = 0.0  # seconds from the process's start to this phase's end
    process: int = 0  # the jax process that wrote it
    how: str = ""  # executable_ready: one of EXECUTABLE_SOURCES; "" for the other phases

    def __post_init__(self) -> None:
        if self.phase not in STARTUP_PHASES:
            raise RecordError(f"startup phase {self.phase[:40]!r}: not one of {', '.join(STARTUP_PHASES)}")
        if self.how and self.how not in EXECUTABLE_SOURCES:
            raise RecordError(f"startup how {self.how[:40]!r}: not one of {', '.join(EXECUTABLE_SOURCES)}")


@dataclass(frozen=True, slots=True)
class ResizeRefused(Event):
    NAME: ClassVar[str] = "resize_refused"  # step: the step the run was about to resume at
    slices: tuple[int, ...] = ()  # the survivors the step was compiled for
    needed_bytes: int = 0  # XLA's memory analysis of that step, per device
    limit_bytes: int = 0  # what a device may use
    min_slices: int = 0  # the run now waits for at least this many slices


@dataclass(frozen=True, slots=True)
class FirstStepAfterRecovery(Event):
    NAME: ClassVar[str] = "first_step_after_recovery"  # step: the first step executed again
    reason: str = "failure"  # failure, scale_up, group_restart
    recompiled: bool = False
    recovery_s: float | None = None


@dataclass(frozen=True, slots=True)
class ScaleUp(Event):
    NAME: ClassVar[str] = "scale_up"
    slices: tuple[int, ...] = ()  # the survivors in use until now
    returning: tuple[int, ...] = ()  # the slices that came back


@dataclass(frozen=True, slots=True)
class CheckpointSaved(Event):
    NAME: ClassVar[str] = "checkpoint_saved"  # step: the checkpoint's step
    blocking_s: float = 0.0  # how long the save blocked training


@dataclass(frozen=True, slots=True)
class CheckpointCommitted(Event):
    NAME: ClassVar[str] = "checkpoint_committed"
    commit_s: float | None = None


@dataclass(frozen=True, slots=True)
class CheckpointSkipped(Event):
    NAME: ClassVar[str] = "checkpoint_skipped"
    reason: str = ""


@dataclass(frozen=True, slots=True)
class StallDetected(Event):
    NAME: ClassVar[str] = "stall_detected"  # step: the step that did not complete
    slices: tuple[int, ...] = ()  # the slices that stopped making progress; empty: the trainer cannot tell
    timeout_s: float = 0.0  # the stall timeout in force (elxpk_contract/stall.py)
    since_s: float = 0.0  # seconds since the last step completed (or the attempt's first step began)
    stacks: str = ""  # the file with every thread's stack, relative to the run directory
    action: str = ""  # "recover": treated as a lost slice in process; "exit": the process exits 76 (STALLED),
    # also after a "recover" whose hung step did not return within one more stall timeout (a second event)


@dataclass(frozen=True, slots=True)
class RejoinRefused(Event):
    NAME: ClassVar[str] = "rejoin_refused"  # step: the step the run was at
    slices: tuple[int, ...] = ()  # the returning slice that failed its health check: treated as still lost
    reason: str = ""  # what the check found, e.g. "matmul on device 2 gave a wrong result (...)"


@dataclass(frozen=True, slots=True)
class Preempted(Event):
    NAME: ClassVar[str] = "preempted"  # step: the step the run had reached
    signal: str = "SIGTERM"
    checkpoint_step: int | None = None  # the newest committed checkpoint when the trainer stopped
    saved: bool = False  # whether it saved the current step on the way out
    heard_by: int | None = None  # the process that heard the signal (this one: a peer's is peer_preempted)
    # Its slice (None where the backend has no per-process slice, and in older records): process 0, the only
    # writer, hearing SIGTERM is a victim too, and `report` names its slice as the one lost.
    heard_slice: int | None = None
    # The drain (trainer/elastic/drain.py): steps the stop lost, the stop step less the newest committed
    # checkpoint (0 when it saved the stop step; None in records written before the field), and why it did
    # not save where it did not ("" when it saved).
    drain_steps_lost: int | None = None
    save_skipped: str = ""


EVENTS: dict[str, type[Event]] = {cls.NAME: cls for cls in (
    RunStarted, RunFinished, FailureDetected, SlicesReady, RestoreStarted, RestoreDone, ResizeRefused,
    FirstStepAfterRecovery, ScaleUp, CheckpointSaved, CheckpointCommitted, CheckpointSkipped, StallDetected,
    RejoinRefused, Preempted, Startup)}


def parse_event(data: object) -> Event:
    if not isinstance(data, dict):
        raise RecordError(f"expected a JSON object, got {type(data).__name__}")
    name = data.get("event")
    if not isinstance(name, str) or name not in EVENTS:  # a list or an object is no key (and no event name)
        raise RecordError(f"event {str(name)[:40]!r}: not one of {', '.join(EVENTS)}")
    return parse_fields(EVENTS[name], {k: v for k, v in data.items() if k != "event"})
