"""One run directory as typed records: the one reader of metrics.jsonl, events.jsonl and run.json.

The record types are declared in elxpk_contract/records.py (the trainer and the supervisor write them).
A record of the wrong shape, a binary or unreadable file, or a broken run.json is a UsageError naming the
flag, the file and the line; only a torn line left by a killed writer is tolerated (and counted).
A run on an object store (`gs://...`), or a local copy of one, is chunks (elxpk/runs/chunked_run.py):
read here into the same `Run`.
"""

from __future__ import annotations

import json
from array import array
from dataclasses import dataclass
from pathlib import Path

from elxpk import bounded_read
from elxpk.bounded_read import RUN_JSON_BYTES, ReadRefused, decode_text, read_limited
from elxpk.errors import UsageError
from elxpk.json_lines import JsonLinesError, RecordLineError, read_records
from elxpk.runs.step_columns import MetricColumns
from elxpk_contract.event_records import Event, parse_event
from elxpk_contract.record_fields import RecordError
from elxpk_contract.records import Metric, RunInfo, parse_metric, parse_run_info
from elxpk_storage.run_records import RECORDS, is_remote

METRICS = "metrics.jsonl"
EVENTS = "events.jsonl"
RUN_JSON = "run.json"


@dataclass(frozen=True)
class Run:
    path: Path | str  # a local directory, or the gs:// URL of a chunked run
    metrics: MetricColumns  # every executed step in execution order; rewound steps appear twice (columns)
    events: tuple[Event, ...]  # in file order (time order: one writer at a time)
    info: RunInfo | None  # run.json, when the run got as far as writing it
    damaged_lines: int  # torn lines left by killed writers (their complete parts were kept)

    def final_indices(self) -> array:
        """The index in `metrics` of the record that counts for each step (the last one written), by step."""
        return self.metrics.last_records()[0]

    def final_records(self) -> dict[int, Metric]:
        """The record that counts for each step (the last one written), by step: a dict of records, for
        small runs and tests; report and compare read the columns (`final_indices`)."""
        return {self.metrics.step[i]: self.metrics.record(i) for i in self.final_indices()}

    def superseded_records(self) -> list[Metric]:
        """Records of executions that a rewind made void: every record of a step but its last."""
        flags = self.metrics.last_records()[1]
        return [self.metrics.record(i) for i, last in enumerate(flags) if not last]

    def events_of(self, kind: type[Event]) -> list:
        return [e for e in self.events if isinstance(e, kind)]

    @property
    def num_slices(self) -> int | None:
        if self.info is not None and self.info.setting("num_slices") is not None:
            return self.info.setting("num_slices")
        top = self.metrics.max_slice()
        return top + 1 if top is not None else None


def _records(root: Path, name: str, flag: str, parse, most: int, into):
    try:
        return read_records(root / name, parse, max_records=most, into=into)
    except (JsonLinesError, RecordLineError) as exc:
        raise UsageError(f"{flag}: {root / name} {exc}") from None


def load_info(root: Path, flag: str = "RUN_DIR") -> RunInfo | None:
    """run.json, or None when the run has none yet; a broken one is a UsageError."""

    path = root / RUN_JSON
    try:
        text = decode_text(read_limited(path, limit=RUN_JSON_BYTES), "JSON")
    except FileNotFoundError:
        return None
    except ReadRefused as exc:
        raise UsageError(f"{flag}: {path} {exc}") from None
    return _run_info(str(path), text, flag)


def _run_info(path: str, text: str, flag: str) -> RunInfo:
    try:
        return parse_run_info(json.loads(text))
    except (ValueError, RecursionError) as exc:
        why = str(exc).splitlines()[0] if isinstance(exc, RecordError) else "not valid JSON (truncated?)"
        raise UsageError(f"{flag}: {path} is damaged: {why}") from None


def is_chunked(path: str | Path) -> bool:
    """Whether `path` holds a chunked run: a URL (gs://), or a local copy of one (records/, no metrics.jsonl)."""
    text = str(path)
    if is_remote(text):
        return True
    root = Path(text)
    return (root / RECORDS).is_dir() and not (root / METRICS).exists()


def load_run(path: str | Path, *, flag: str = "RUN_DIR") -> Run:
    """Read a run directory; a path that is not one, or a damaged record, is a UsageError naming `flag`."""
    if is_chunked(path):
        return _load_chunked(str(path), flag)
    root = Path(path)
    if not root.is_dir():
        raise UsageError(f"{flag}: {root} is not a directory; pass a run directory (one with {METRICS})")
    if not (root / METRICS).exists():  # a device or a FIFO there is refused by the reader, by what it is
        raise UsageError(
            f"{flag}: {root} has no {METRICS}; pass the --run-dir of `elxpk local run` or the trainer's run_dir"
        )
    metrics, torn_metrics = _records(root, METRICS, flag, parse_metric, bounded_read.RUN_RECORDS, MetricColumns())
    events, torn_events = _records(root, EVENTS, flag, parse_event, bounded_read.EVENT_RECORDS, [])
    return Run(path=root, metrics=metrics, events=tuple(events), info=load_info(root, flag),
               damaged_lines=torn_metrics + torn_events)


def _load_chunked(url: str, flag: str) -> Run:
    from elxpk.runs.chunked_run import ChunkedRecords  # lazy: fsspec (and gcsfs) only for a chunked run

    found = ChunkedRecords(url, flag)
    if not found.has_metrics():
        raise UsageError(f"{flag}: {url} has no records ({RECORDS}/*/metrics-*.jsonl); pass the --run-dir the "
                         "trainer wrote to")
    metrics, torn_metrics = found.records("metrics", parse_metric, most=bounded_read.RUN_RECORDS,
                                          into=MetricColumns())
    events, torn_events = found.records("events", parse_event, most=bounded_read.EVENT_RECORDS, into=[])
    run_json = found.run_json()
    info = None if run_json is None else _run_info(run_json[0], run_json[1], flag)
    # A local copy keeps its Path, so what is beside it (e.g. a relative checkpoint dir) resolves as before.
    return Run(path=url if is_remote(url) else Path(url), metrics=metrics, events=tuple(events), info=info,
               damaged_lines=torn_metrics + torn_events)
