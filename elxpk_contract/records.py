"""The run directory's records, declared once: metrics.jsonl, events.jsonl and run.json.

The trainer (trainer/metrics.py) and the local multi-controller supervisor write them through these
classes; elxpk/runs/rundir.py is the one reader, and everything after it (report, compare, recoveries,
health, `plan --from-run`, the live view) reads the typed fields. Version 0.1: there is no older format.

- `Metric`: one executed step (metrics.jsonl). A rewound step is executed, and written, again.
- one frozen dataclass per event kind (events.jsonl), each a subclass of `Event`, keyed by `EVENTS`;
- `RunInfo`: run.json, the resolved configuration and the build that ran it;
- `Progress`: CHECKPOINT_DIR/elxpk-progress.json, the trainer's last step and checkpoint for
  `workload status` (`read_progress` parses it).

`to_json()` is the exact dict written (and handed to observers); `parse_metric`, `parse_event` and
`parse_run_info` check a decoded dict field by field and raise `RecordError` (one line) on a wrong shape.
Standard library only.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from elxpk_contract.limits import MAX_INDEX

# What float.hex() writes (and nothing else: "abc" would parse as hex too).
_FLOAT_HEX = re.compile(r"-?(0x[01](\.[0-9a-f]+)?p[+-]\d+|inf)|nan", re.ASCII)


class RecordError(ValueError):
    """A decoded record does not have the declared shape; the message names the field."""


@dataclass(frozen=True, slots=True)
class Metric:
    step: int
    loss: str  # the float32 loss as float.hex(), so runs compare bit for bit ("nan", "inf" when it blew up)
    lr: float
    step_time_s: float  # the step's device time; an attempt's compile happens before its first step
    examples: tuple[int, int]  # the half-open global example-id range [first, end) the step consumed
    slices: tuple[int, ...]  # the slices in the mesh
    time: float  # unix seconds when the step ended

    @property
    def loss_value(self) -> float:
        return float.fromhex(self.loss)

    def to_json(self) -> dict:
        return _to_json(self)


@dataclass(frozen=True, slots=True)
class Event:
    """Fields every event has. `step`: the step the run was at (what each kind means by it is below)."""

    NAME: ClassVar[str] = ""
    time: float  # unix seconds when it happened (may be earlier than when it was written)
    step: int | None
    source: str = "trainer"  # or "supervisor": the local multi-controller supervisor wrote it

    def to_json(self) -> dict:
        return {"event": self.NAME, **_to_json(self)}


@dataclass(frozen=True, slots=True)
class RunStarted(Event):
    NAME: ClassVar[str] = "run_started"
    slices: tuple[int, ...] = ()
    backend: str = ""


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


EVENTS: dict[str, type[Event]] = {cls.NAME: cls for cls in (
    RunStarted, RunFinished, FailureDetected, SlicesReady, RestoreStarted, RestoreDone, ResizeRefused,
    FirstStepAfterRecovery, ScaleUp, CheckpointSaved, CheckpointCommitted, CheckpointSkipped, StallDetected,
    RejoinRefused, Preempted)}

PROGRESS_FILE = "elxpk-progress.json"  # in the checkpoint directory (local or gs://), next to the step dirs
PROGRESS_BYTES = 2**20  # the record is ~300 bytes: its writer and every reader stop at this many


@dataclass(frozen=True, slots=True)
class Progress:
    """What `workload status` shows of a running trainer: CHECKPOINT_DIR/elxpk-progress.json.

    The primary trainer process rewrites it atomically (a whole object on gs://; write then rename on a
    local disk) at most every PROGRESS_PERIOD_S seconds while steps complete, after each committed
    checkpoint, and when it stops. A trainer that hangs stops rewriting it, so the ages grow."""

    steps_done: int  # completed steps: the next step to run
    step_time: float | None  # unix seconds when the last step completed; None before the first
    checkpoint_step: int | None  # the newest committed checkpoint's step; None before the first
    checkpoint_time: float | None  # unix seconds when it committed (or was restored from)
    updated_at: float  # unix seconds when this was written
    state: str = "running"  # running, done, stalled, preempted, failed
    attempt: int = 1  # the elastic loop's attempt within this process
    # The trainer's seconds by what they went to (productive, rewound, restore, waiting, compile, checkpoint:
    # trainer/elastic/badput_meter.py), summed over the processes that wrote this record since `since`
    # (unix seconds), so `workload status` can split chip-hours by cause. Empty from an older trainer.
    badput: dict[str, float] = field(default_factory=dict)
    since: float | None = None
    # Why the trainer gave up, one line (--elastic-stop-on-repeat, the retry budget); "" when it did not.
    stopped: str = ""

    def step_age(self, now: float) -> float | None:
        """Seconds since the last step completed, at unix time `now`."""
        return None if self.step_time is None else max(0.0, now - self.step_time)

    def checkpoint_age(self, now: float) -> float | None:
        return None if self.checkpoint_time is None else max(0.0, now - self.checkpoint_time)

    def to_json(self) -> dict:
        return {"version": PROGRESS_VERSION, **_to_json(self)}


PROGRESS_VERSION = 1
# The keys of Progress.badput: the trainer's seconds by what they went to (as elxpk/runs/report.py splits them).
BADPUT_KEYS = ("productive", "rewound", "restore", "waiting", "compile", "checkpoint")
PROGRESS_STATES = ("running", "done", "stalled", "preempted", "failed")


def read_progress(text: str) -> Progress:
    """The progress record in `text` (the file's content); RecordError (one line) on anything else."""

    try:
        data = json.loads(text)
    except ValueError as exc:
        raise RecordError(f"{PROGRESS_FILE}: not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise RecordError(f"{PROGRESS_FILE}: expected a JSON object, got {type(data).__name__}")
    if data.get("version") != PROGRESS_VERSION:
        raise RecordError(f"{PROGRESS_FILE}: version {data.get('version')!r:.20}, this reader knows {PROGRESS_VERSION}")
    progress = _parse(Progress, {k: v for k, v in data.items() if k != "version"})
    if progress.state not in PROGRESS_STATES:
        raise RecordError(f"state {progress.state[:20]!r}: not one of {', '.join(PROGRESS_STATES)}")
    if progress.steps_done < 0 or (progress.checkpoint_step is not None and progress.checkpoint_step < 0):
        raise RecordError("steps_done, checkpoint_step: steps count from 0")
    return progress


@dataclass(frozen=True, slots=True)
class RunInfo:
    """run.json: written when a session starts (a resumed run rewrites it)."""

    config: dict[str, Any]  # TrainerConfig.to_dict() as resolved for the run
    fingerprint: str  # of what makes a checkpoint meaningful (TrainerConfig.fingerprint)
    fingerprint_fields: dict[str, Any]
    versions: dict[str, Any]  # python and library versions: bitwise resume holds for one exact build
    started_at: float
    slice_backend: str = ""
    model: dict[str, Any] = field(default_factory=dict)  # params, flops_per_example
    topology: dict[str, Any] = field(default_factory=dict)  # num_slices, devices_per_slice, processes
    memory: dict[str, Any] = field(default_factory=dict)  # state_bytes, state_bytes_per_device (largest)

    def setting(self, name: str, kind: type = int) -> Any:
        """One configuration value when it has the expected type, else None."""
        value = self.config.get(name)
        if kind is int and isinstance(value, bool):
            return None
        return value if isinstance(value, kind) else None

    def to_json(self) -> dict:
        return _to_json(self)


def make_event(name: str, time: float, step: int | None, **details: Any) -> Event:
    """The typed event `name`, as its reader will read it back; a detail its kind does not declare is a
    TypeError, a value its reader would refuse a RecordError (both a writer's bug, caught before writing)."""
    try:
        cls = EVENTS[name]
    except KeyError:
        raise TypeError(f"unknown event {name!r}; declare it in elxpk_contract/records.py") from None
    event = cls(time=time, step=step, **details)
    written(event)
    return event


def written(record: Metric | Event | RunInfo | Progress) -> dict:
    """The exact dict a writer writes for `record`, once its own reader has read it back from JSON: a
    writer never writes what its reader refuses (RecordError here, before anything is written)."""

    data = record.to_json()
    try:
        text = json.dumps(data)
    except (TypeError, ValueError) as exc:
        raise RecordError(f"{type(record).__name__}: not JSON: {exc}") from None
    if isinstance(record, Progress):
        read_progress(text)
    else:
        reader: Any = (parse_metric if isinstance(record, Metric) else parse_event if isinstance(record, Event)
                       else parse_run_info)
        reader(json.loads(text))
    return data


# Every step of a run names the same few slice tuples: one shared copy of each (a long run holds ~100 bytes
# less per step). Bounded: a hostile file of all-different tuples stops being interned past the limit.
_SLICES: dict[tuple[int, ...], tuple[int, ...]] = {}
_SLICES_KEPT = 4096


def parse_metric(data: object) -> Metric:
    metric = _parse(Metric, data)
    slices = _SLICES.get(metric.slices)
    if slices is None and len(_SLICES) < _SLICES_KEPT:
        slices = _SLICES[metric.slices] = metric.slices
    if slices is not None and slices is not metric.slices:
        object.__setattr__(metric, "slices", slices)  # the same value: frozen only against callers
    if not _FLOAT_HEX.fullmatch(metric.loss):
        raise RecordError(f"loss {metric.loss[:40]!r}: not a float.hex() value")
    if metric.step < 0:
        raise RecordError(f"step {metric.step}: steps count from 0")
    first, end = metric.examples
    if not 0 <= first <= end:
        raise RecordError(f"examples {list(metric.examples)}: not a range [first, end) of example ids")
    return metric


def parse_event(data: object) -> Event:
    if not isinstance(data, dict):
        raise RecordError(f"expected a JSON object, got {type(data).__name__}")
    name = data.get("event")
    if not isinstance(name, str) or name not in EVENTS:  # a list or an object is no key (and no event name)
        raise RecordError(f"event {str(name)[:40]!r}: not one of {', '.join(EVENTS)}")
    return _parse(EVENTS[name], {k: v for k, v in data.items() if k != "event"})


def parse_run_info(data: object) -> RunInfo:
    return _parse(RunInfo, data)


# ---- one generic field checker, driven by the annotations above ----------------------------------------

_HINTS: dict[type, dict[str, Any]] = {}
# Per class, its fields as (name, required, checker): built once from the annotations, so a run of millions
# of records is not checked by re-reading the annotations at every field (typing.get_origin per value).
_FIELDS: dict[type, list[tuple[str, bool, Callable[[str, object], Any]]]] = {}
_CHECKERS: dict[Any, Callable[[str, object], Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def _fields(cls: type) -> list[tuple[str, bool, Callable[[str, object], Any]]]:
    if cls not in _FIELDS:
        hints = _hints(cls)
        _FIELDS[cls] = [(f.name, f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
                         _checker(hints[f.name])) for f in dataclasses.fields(cls)]
    return _FIELDS[cls]


def _parse(cls: type, data: object):
    if not isinstance(data, dict):
        raise RecordError(f"expected a JSON object, got {type(data).__name__}")
    values = {}
    for name, required, check in _fields(cls):
        if name not in data:
            if required:
                raise RecordError(f"{name}: missing")
            continue
        values[name] = check(name, data[name])
    return cls(**values)



def _checker(hint: Any) -> Callable[[str, object], Any]:
    """The check of a value against the annotation `hint` (the value as the record holds it, or a
    RecordError naming the field), built once per annotation."""
    if hint in _CHECKERS:
        return _CHECKERS[hint]
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    check: Callable[[str, object], Any]
    if origin in (typing.Union, types.UnionType):
        optional = type(None) in args
        (inner,) = [a for a in args if a is not type(None)]
        inner_check = _checker(inner)

        def check(name: str, value: object) -> Any:
            if value is None and optional:
                return None
            return inner_check(name, value)
    elif origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            item = _checker(args[0])

            def check(name: str, value: object) -> Any:
                if not isinstance(value, list):
                    raise RecordError(f"{name}: expected a list, got {value!r:.40}")
                return tuple(item(name, v) for v in value)
        else:
            items = [_checker(a) for a in args]

            def check(name: str, value: object) -> Any:
                if not isinstance(value, list):
                    raise RecordError(f"{name}: expected a list, got {value!r:.40}")
                if len(value) != len(items):
                    raise RecordError(f"{name}: expected {len(items)} values, got {value!r:.40}")
                return tuple(c(name, v) for c, v in zip(items, value, strict=True))
    elif origin is dict:
        def check(name: str, value: object) -> Any:
            if not isinstance(value, dict):
                raise RecordError(f"{name}: expected an object, got {value!r:.40}")
            return value
    else:
        check = _SCALARS.get(hint, _any)
    _CHECKERS[hint] = check
    return check


def _bool(name: str, value: object) -> Any:
    if not isinstance(value, bool):
        raise RecordError(f"{name}: expected true or false, got {value!r:.40}")
    return value


def _int(name: str, value: object) -> Any:
    if isinstance(value, bool) or not isinstance(value, int):
        raise RecordError(f"{name}: expected a whole number, got {value!r:.40}")
    if abs(value) > MAX_INDEX:
        raise RecordError(f"{name}: {value} is out of range (at most {MAX_INDEX})")
    return value


def _float(name: str, value: object) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise RecordError(f"{name}: expected a finite number, got {value!r:.40}")
    return float(value)


def _str(name: str, value: object) -> Any:
    if not isinstance(value, str):
        raise RecordError(f"{name}: expected a string, got {value!r:.40}")
    return value


def _any(name: str, value: object) -> Any:
    return value


_SCALARS: dict[Any, Callable[[str, object], Any]] = {bool: _bool, int: _int, float: _float, str: _str}


def _to_json(record: object) -> dict:
    out = {}
    for f in dataclasses.fields(record):  # type: ignore[arg-type]
        value = getattr(record, f.name)
        out[f.name] = list(value) if isinstance(value, tuple) else value
    return out
