"""One run directory as data: its metrics, events and run.json (format in ../shared/docs/contracts.md)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from elxpk.errors import UsageError
from elxpk.runs.jsonl import read_jsonl

METRICS = "metrics.jsonl"
EVENTS = "events.jsonl"
RUN_JSON = "run.json"


def loss_value(record: dict) -> float:
    """The float32 loss of a metrics record (written as float.hex(), so it round-trips exactly)."""
    loss = record.get("loss")
    if isinstance(loss, str):
        try:
            return float.fromhex(loss)
        except ValueError:
            return float(loss)  # a decimal string from a foreign writer
    if isinstance(loss, (int, float)):
        return float(loss)
    return math.nan


def example_range(record: dict) -> tuple[int, int] | None:
    """The half-open global example-id range `[first, end)` a step consumed, if recorded."""
    ex = record.get("examples")
    if isinstance(ex, (list, tuple)) and len(ex) == 2 and all(isinstance(v, int) for v in ex):
        return int(ex[0]), int(ex[1])
    return None


@dataclass(frozen=True)
class Run:
    path: Path
    metrics: tuple[dict, ...]  # every executed step in execution order; rewound steps appear twice
    events: tuple[dict, ...]  # in file order (time order: one writer at a time)
    run_json: dict | None
    damaged_lines: int  # torn lines left by killed writers (their complete parts were kept)

    def final_records(self) -> dict[int, dict]:
        """The record that counts for each step (the last one written), by step."""
        final: dict[int, dict] = {}
        for record in self.metrics:
            step = record.get("step")
            if isinstance(step, int):
                final[step] = record
        return dict(sorted(final.items()))

    def superseded_records(self) -> list[dict]:
        """Records of executions that a rewind made void: every record of a step but its last."""
        last_index: dict[int, int] = {}
        for i, record in enumerate(self.metrics):
            if isinstance(record.get("step"), int):
                last_index[record["step"]] = i
        return [
            r for i, r in enumerate(self.metrics) if isinstance(r.get("step"), int) and last_index[r["step"]] != i
        ]

    def events_named(self, *names: str) -> list[dict]:
        return [e for e in self.events if e.get("event") in names]

    @property
    def num_slices(self) -> int | None:
        config = (self.run_json or {}).get("config", self.run_json or {})
        value = config.get("num_slices") if isinstance(config, dict) else None
        if isinstance(value, int):
            return value
        seen = {s for r in self.metrics for s in r.get("slices") or [] if isinstance(s, int)}
        return max(seen) + 1 if seen else None


def load_run(path: str | Path, *, flag: str = "RUN_DIR") -> Run:
    """Read a run directory; a path that is not one is a UsageError naming `flag`."""
    root = Path(path)
    if not root.is_dir():
        raise UsageError(f"{flag}: {root} is not a directory; pass a run directory (one with {METRICS})")
    if not (root / METRICS).is_file():
        raise UsageError(
            f"{flag}: {root} has no {METRICS}; pass the --run-dir of `elxpk local run` or the trainer's run_dir"
        )
    metrics = read_jsonl(root / METRICS)
    events = read_jsonl(root / EVENTS)
    run_json = None
    if (root / RUN_JSON).is_file():
        try:
            loaded = json.loads((root / RUN_JSON).read_text(encoding="utf-8"))
            run_json = loaded if isinstance(loaded, dict) else None
        except ValueError:
            run_json = None
    return Run(
        path=root,
        metrics=metrics.records,
        events=events.records,
        run_json=run_json,
        damaged_lines=metrics.damaged_lines + events.damaged_lines,
    )
