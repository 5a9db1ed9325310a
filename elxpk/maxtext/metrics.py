"""Read a MaxText `metrics_file`: JSON lines, one per train step (and some per eval step).

MaxText 0.2.5 (`maxtext/common/metric_logger.py`, `write_metrics_locally`) appends
`json.dumps({<every scalar>: float, "step": float(step), "run_name": run_name})` per step: train lines carry
`learning/loss`, `perf/step_time_seconds`, `learning/current_learning_rate`, `learning/grad_norm`, ...;
eval lines carry `eval/*` keys only. It truncates the file at step 0 and otherwise appends, so after an
elastic retry the steps redone from the restored checkpoint appear twice; the last line of a step is the one
the run kept. `json.dumps` writes NaN and infinity as `NaN`/`Infinity`, which stay values here (the
comparer treats them as divergence). There are no example ids: exactly-once data cannot be checked.
Standard library only.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from elxpk.bounded_read import (
    RECORD_LINE_BYTES,
    RUN_RECORD_BYTES,
    RUN_RECORDS,
    read_text_lines,
    too_many_records,
)

LOSS = "learning/loss"
STEP_TIME = "perf/step_time_seconds"


class MetricsFileError(ValueError):
    """The file is not a readable MaxText metrics file (message: one line, naming the file)."""


@dataclass(frozen=True)
class MaxTextMetrics:
    path: str
    run_names: tuple[str, ...]  # every run_name seen, in order (one, normally)
    steps: tuple[int, ...]  # train steps, ascending, each once
    loss: tuple[float, ...]  # learning/loss of each step (its last line); NaN/inf kept as they are
    step_time_s: tuple[float | None, ...]  # perf/step_time_seconds of each step, None when absent
    repeated_steps: tuple[int, ...]  # steps written more than once: redone after a restore
    eval_lines: int  # lines without learning/loss (eval metrics), not part of the curve

    def loss_by_step(self) -> dict[int, float]:
        return dict(zip(self.steps, self.loss, strict=True))

    @property
    def non_finite_steps(self) -> tuple[int, ...]:
        return tuple(s for s, v in zip(self.steps, self.loss, strict=True) if not math.isfinite(v))

    @property
    def step_times(self) -> tuple[float, ...]:
        return tuple(t for t in self.step_time_s if t is not None)

    @property
    def has_example_ids(self) -> bool:
        """MaxText writes none, so `compare` must say it cannot check exactly-once data."""
        return False


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def parse_metrics(text: str, path: str = "metrics file") -> MaxTextMetrics:
    """Parse the text of a metrics file. Raises MetricsFileError (one line) on anything MaxText would not
    have written: a line that is not JSON or is cut off, a train line without a whole-number step, or a
    file with no train step at all."""
    lines = text.split("\n")
    return _parse_lines(((n, line, n == len(lines)) for n, line in enumerate(lines, 1)), path)


def _parse_lines(lines: Iterable[tuple[int, str, bool]], path: str) -> MaxTextMetrics:
    """`parse_metrics` over (number, line, whether it is the file's last piece): one line held at a time."""

    by_step: dict[int, tuple[float, float | None]] = {}
    seen: dict[int, int] = {}
    run_names: list[str] = []
    eval_lines = kept = 0
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
        kept += 1
        if kept > RUN_RECORDS:
            raise MetricsFileError(f"{path}: {too_many_records(RUN_RECORDS)}")
        name = record.get("run_name")
        if isinstance(name, str) and name not in run_names:
            run_names.append(name)
        if LOSS not in record:
            eval_lines += 1
            continue
        step = _number(record.get("step"))
        if step is None or not math.isfinite(step) or not step.is_integer() or step < 0:
            raise MetricsFileError(f"{path}: line {number} has no whole-number 'step': {line[:60]!r}")
        loss = _number(record[LOSS])
        if loss is None:
            raise MetricsFileError(f"{path}: line {number}: {LOSS!r} is not a number: {record[LOSS]!r}")
        step_time = _number(record.get(STEP_TIME))
        by_step[int(step)] = (loss, step_time)
        seen[int(step)] = seen.get(int(step), 0) + 1
    if not by_step:
        raise MetricsFileError(f"{path}: no train step (no line has {LOSS!r}); is it a MaxText metrics_file?")
    steps = tuple(sorted(by_step))
    return MaxTextMetrics(
        path=path,
        run_names=tuple(run_names),
        steps=steps,
        loss=tuple(by_step[s][0] for s in steps),
        step_time_s=tuple(by_step[s][1] for s in steps),
        repeated_steps=tuple(s for s in steps if seen[s] > 1),
        eval_lines=eval_lines,
    )


def read_metrics(path: str | Path) -> MaxTextMetrics:
    """Read a MaxText metrics file. Raises MetricsFileError (one line) when it cannot be read or parsed."""

    p = Path(path)
    if p.is_dir():
        raise MetricsFileError(f"{p}: is a directory, not a MaxText metrics_file")
    try:
        return _parse_lines(read_text_lines(p, limit=RUN_RECORD_BYTES, line_limit=RECORD_LINE_BYTES,
                                            expected="JSON lines"), str(p))
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
