"""Read a MaxText `metrics_file`: JSON lines, one per train step (and some per eval step).

MaxText 0.2.5 (`maxtext/common/metric_logger.py`, `write_metrics_locally`) appends
`json.dumps({<every scalar>: float, "step": float(step), "run_name": run_name})` per step: train lines carry
`learning/loss`, `perf/step_time_seconds`, `learning/current_learning_rate`, `learning/grad_norm`, ...;
eval lines carry `eval/*` keys only. It truncates the file at step 0 and otherwise appends, so after an
elastic retry the steps redone from the restored checkpoint appear twice; the last line of a step is the one
the run kept. `json.dumps` writes NaN and infinity as `NaN`/`Infinity`, which stay values here (the
comparer treats them as divergence). There are no example ids: exactly-once data cannot be checked.
Standard library only (the columns are `array`s: elxpk/columns.py).
"""

from __future__ import annotations

import json
import math
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from elxpk.bounded_read import (
    RECORD_LINE_BYTES,
    RUN_RECORD_BYTES,
    RUN_RECORDS,
    read_text_lines,
    too_many_records,
)
from elxpk.columns import Column, last_of_each, repeated_keys, same
from elxpk_contract.limits import MAX_INDEX

_RUN_NAMES = 1000  # distinct run_name values kept: a file holds one (a few after renames)

LOSS = "learning/loss"
STEP_TIME = "perf/step_time_seconds"


class MetricsFileError(ValueError):
    """The file is not a readable MaxText metrics file (message: one line, naming the file)."""


@dataclass(frozen=True)
class MaxTextMetrics:
    """The train steps of a metrics file, as columns (elxpk/columns.py: ~25 bytes a step; each compares
    equal to the tuple of its values)."""

    path: str
    run_names: tuple[str, ...]  # every run_name seen, in order (one, normally)
    steps: Column  # train steps, ascending, each once
    loss: Column  # learning/loss of each step (its last line); NaN/inf kept as they are
    step_time_s: StepTimes  # perf/step_time_seconds of each step, None when absent
    repeated_steps: Column  # steps written more than once: redone after a restore
    eval_lines: int  # lines without learning/loss (eval metrics), not part of the curve

    def loss_by_step(self) -> dict[int, float]:
        return dict(zip(self.steps, self.loss, strict=True))

    @property
    def non_finite_steps(self) -> tuple[int, ...]:
        return tuple(s for s, v in zip(self.steps, self.loss, strict=True) if not math.isfinite(v))

    @property
    def first_non_finite_step(self) -> int | None:
        return next((s for s, v in zip(self.steps, self.loss, strict=True) if not math.isfinite(v)), None)

    @property
    def step_times(self) -> Column:
        """The step times present, in step order."""
        return Column(self.step_time_s.present())

    @property
    def has_example_ids(self) -> bool:
        """MaxText writes none, so `compare` must say it cannot check exactly-once data."""
        return False


class StepTimes(Column):
    """perf/step_time_seconds per step: a float column and a presence flag per step (None where absent)."""

    __slots__ = ("has",)

    def __init__(self, values: array, has: bytearray):
        super().__init__(values)
        self.has = has

    def __getitem__(self, index):
        if isinstance(index, slice):
            return tuple(v if h else None for v, h in zip(self.values[index], self.has[index], strict=True))
        return self.values[index] if self.has[index] else None

    def __iter__(self) -> Iterator[float | None]:
        return (v if h else None for v, h in zip(self.values, self.has, strict=True))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, (Column, tuple, list)):
            return NotImplemented
        return len(self) == len(other) and all(map(same, self, other))

    __hash__ = None

    def present(self) -> array:
        return array("d", (v for v, h in zip(self.values, self.has, strict=True) if h))


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def parse_metrics(text: str, path: str = "metrics file") -> MaxTextMetrics:
    """Parse the text of a metrics file. Raises MetricsFileError (one line) on anything MaxText would not
    have written: a line that is not JSON or is cut off, a train line without a whole-number step, or a
    file with no train step at all."""
    lines = text.split("\n")
    if len(lines) - (lines[-1] == "") > RUN_RECORDS:
        raise MetricsFileError(f"{path}: {too_many_records(RUN_RECORDS)}")
    return _parse_lines(((n, line, n == len(lines)) for n, line in enumerate(lines, 1)), path)


def _parse_lines(lines: Iterable[tuple[int, str, bool]], path: str) -> MaxTextMetrics:
    """`parse_metrics` over (number, line, whether it is the file's last piece): one line held at a time,
    the train lines' values in columns; the last line of each step counts."""

    steps, losses, times, has = array("q"), array("d"), array("d"), bytearray()
    run_names: list[str] = []
    eval_lines = 0
    for number, line, last in lines:
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            why = "is cut off (the writer stopped mid-line)" if last else "is not JSON"
            raise MetricsFileError(f"{path}: line {number} {why}: {line[:60]!r}") from None
        except RecursionError:
            raise MetricsFileError(f"{path}: line {number} is nested too deeply to be a record") from None
        if not isinstance(record, dict):
            raise MetricsFileError(f"{path}: line {number} is not a JSON object: {line[:60]!r}")
        name = record.get("run_name")
        if isinstance(name, str) and name not in run_names:
            if len(run_names) >= _RUN_NAMES:
                raise MetricsFileError(f"{path}: line {number}: more than {_RUN_NAMES} run names in one file")
            run_names.append(name)
        if LOSS not in record:
            eval_lines += 1
            continue
        step = _number(record.get("step"))
        if step is None or not math.isfinite(step) or not step.is_integer() or step < 0 or step > MAX_INDEX:
            raise MetricsFileError(f"{path}: line {number} has no whole-number 'step': {line[:60]!r}")
        loss = _number(record[LOSS])
        if loss is None:
            raise MetricsFileError(f"{path}: line {number}: {LOSS!r} is not a number: {record[LOSS]!r}")
        step_time = _number(record.get(STEP_TIME))
        steps.append(int(step))
        losses.append(loss)
        times.append(0.0 if step_time is None else step_time)
        has.append(step_time is not None)
    if not steps:
        raise MetricsFileError(f"{path}: no train step (no line has {LOSS!r}); is it a MaxText metrics_file?")
    order, flags = last_of_each(steps)
    redone = repeated_keys(steps, flags)
    return MaxTextMetrics(
        path=path,
        run_names=tuple(run_names),
        steps=Column(array("q", (steps[i] for i in order))),
        loss=Column(array("d", (losses[i] for i in order))),
        step_time_s=StepTimes(array("d", (times[i] for i in order)), bytearray(has[i] for i in order)),
        repeated_steps=Column(redone),
        eval_lines=eval_lines,
    )


def read_metrics(path: str | Path) -> MaxTextMetrics:
    """Read a MaxText metrics file. Raises MetricsFileError (one line) when it cannot be read or parsed."""

    p = Path(path)
    if p.is_dir():
        raise MetricsFileError(f"{p}: is a directory, not a MaxText metrics_file")
    try:
        return _parse_lines(read_text_lines(p, limit=RUN_RECORD_BYTES, line_limit=RECORD_LINE_BYTES,
                                            expected="JSON lines", max_lines=RUN_RECORDS), str(p))
    except FileNotFoundError:
        raise MetricsFileError(f"{p}: no such file") from None
    except MetricsFileError:
        raise
    except ValueError as exc:  # bounded_read.ReadRefused: special file, over the cap, binary, a huge line
        raise MetricsFileError(f"{p}: {exc}") from None


def looks_like_maxtext_metrics(path: str | Path) -> bool:
    """Whether `path` is a file whose first record is a MaxText metrics line (`step` and `run_name`, and
    MaxText's slash-named scalars). Reads at most the first 64 KiB; never raises."""
    p = Path(path)
    try:
        if not p.is_file():
            return False
        with p.open("rb") as handle:
            head = handle.read(65536)
    except OSError:
        return False
    for line in head.split(b"\n"):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            return False
        return (isinstance(record, dict) and "step" in record and isinstance(record.get("run_name"), str)
                and any("/" in k for k in record))
    return False
