"""The run directory's records, declared once: metrics.jsonl, events.jsonl and run.json.

The trainer (trainer/metrics.py) and the local multi-controller supervisor write them through these
classes; elxpk/runs/rundir.py is the one reader, and everything after it (report, compare, recoveries,
health, `plan --from-run`, the live view) reads the typed fields. Version 0.1: there is no older format.

- `Metric`: one executed step (metrics.jsonl). A rewound step is executed, and written, again.
- one frozen dataclass per event kind (events.jsonl): elxpk_contract/event_records.py;
- `RunInfo`: run.json, the resolved configuration and the build that ran it;
- `Progress`, CHECKPOINT_DIR/elxpk-progress.json for `workload status`: elxpk_contract/progress_record.py.

`to_json()` is the exact dict written (and handed to observers); `parse_metric`, `parse_event` and
`parse_run_info` check a decoded dict field by field (elxpk_contract/record_fields.py) and raise
`RecordError` (one line) on a wrong shape. `make_event` and `written` are the writers' side: what they
return is what the readers read back. Standard library only.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from elxpk_contract.event_records import EVENTS, Event, parse_event
from elxpk_contract.progress_record import Progress, read_progress
from elxpk_contract.record_fields import RecordError, parse_fields, to_json

# What float.hex() writes (and nothing else: "abc" would parse as hex too).
_FLOAT_HEX = re.compile(r"-?(0x[01](\.[0-9a-f]+)?p[+-]\d+|inf)|nan", re.ASCII)


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
        return to_json(self)


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
        return to_json(self)


def make_event(name: str, time: float, step: int | None, **details: Any) -> Event:
    """The typed event `name`, as its reader will read it back; a detail its kind does not declare is a
    TypeError, a value its reader would refuse a RecordError (both a writer's bug, caught before writing)."""
    try:
        cls = EVENTS[name]
    except KeyError:
        raise TypeError(f"unknown event {name!r}; declare it in elxpk_contract/event_records.py") from None
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
    metric = parse_fields(Metric, data)
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


def parse_run_info(data: object) -> RunInfo:
    return parse_fields(RunInfo, data)
