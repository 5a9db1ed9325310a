"""The writer of the run directory's records: metrics.jsonl, events.jsonl and run.json.

Every record is one of the typed records of elxpk_contract/records.py, built (and so checked) here before
it is written: a field a record does not declare is a bug caught at the writer, not in a reader.
Records are one JSON object per line. In a local run directory they are appended and flushed at once, so
a killed process loses nothing it reported, and a cold restart appends to the same files; on an object
store (`--run-dir gs://...`) they are uploaded as append-only chunks (trainer/record_sinks.py). The
observer callback receives exactly the dicts that are written.
"""

from __future__ import annotations

import json
import platform
import threading
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

import numpy as np

from elxpk_contract.records import Metric, RunInfo, make_event, parse_metric, written
from elxpk_storage.run_records import is_remote
from trainer.record_sinks import ChunkSink, FileSink

Observer = Callable[[str, dict], None]


def loss_hex(loss) -> str:
    """The exact float32 loss as float.hex(), so runs compare bit for bit."""
    return float(np.float32(loss)).hex()


class RunRecorder:
    """Writes metrics and events of one run; `enabled=False` on every process but the first. `process` and
    `flush_s` matter only on an object store: the writer's prefix, and how long lines are held."""

    def __init__(self, run_dir: str | Path, clock, observer: Observer | None = None, enabled: bool = True, *,
                 process: int = 0, flush_s: float = 30.0):
        self.run_dir = str(run_dir)
        self._clock = clock
        self._observer = observer
        self._enabled = enabled
        self._lock = threading.Lock()  # the stall watchdog writes its event from its own thread
        self._sink: ChunkSink | FileSink | None = None
        if enabled:
            self._sink = (ChunkSink(self.run_dir, process, flush_s) if is_remote(self.run_dir)
                          else FileSink(Path(run_dir)))

    def metric(self, record: Metric | dict) -> None:
        """Append one step's record (a `Metric`, or a dict of its fields, checked here)."""
        typed = record if isinstance(record, Metric) else parse_metric(record)
        self._emit("metric", written(typed))

    def event(self, name: str, step: int | None, *, at: float | None = None, **details) -> dict:
        """Append an event of a kind records.EVENTS declares; `at` (unix seconds) when it happened
        earlier than it is written. Returns the dict written."""
        typed = make_event(name, self._clock.time() if at is None else at, step, **details)
        record = typed.to_json()
        self._emit("event", record)
        return record

    def _emit(self, kind: str, record: dict) -> None:
        if self._sink is None:
            return
        with self._lock:
            self._sink.write(kind, json.dumps(record, sort_keys=False) + "\n")
        if self._observer is not None:
            self._observer(kind, record)

    def write_run_json(self, cfg, extra: dict) -> None:
        if self._sink is None:
            return
        info = RunInfo(config=cfg.to_dict(), fingerprint=cfg.fingerprint(),
                       fingerprint_fields=cfg.fingerprint_fields(), versions=versions(),
                       started_at=self._clock.time(), **extra)
        self._sink.write_run_json(json.dumps(written(info), indent=2, sort_keys=True) + "\n")

    def flush(self) -> None:
        """Upload what an object store's sink holds: before an exit that skips close (os._exit)."""
        if self._sink is not None:
            self._sink.flush()

    def close(self) -> None:
        if self._sink is not None:
            self._sink.close()
        self._sink = None


def versions() -> dict:
    """Bitwise resume is only promised for one exact build; run.json records which."""
    found: dict[str, str | None] = {"python": platform.python_version()}
    for name in ("jax", "jaxlib", "orbax-checkpoint", "optax", "numpy"):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found
