"""The writer of the run directory's records: metrics.jsonl, events.jsonl and run.json.

Every record is one of the typed records of elxpk_contract/records.py, built (and so checked) here before
it is written: a field a record does not declare is a bug caught at the writer, not in a reader.
Records are appended one JSON object per line and flushed at once, so a killed process loses nothing it
reported; a cold restart appends to the same files. The observer callback receives exactly the dicts
that are written.
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
from elxpk_contract.storage_full import no_space_errno, storage_full_is_infrastructure, unwritable_is_usage

Observer = Callable[[str, dict], None]


def loss_hex(loss) -> str:
    """The exact float32 loss as float.hex(), so runs compare bit for bit."""
    return float(np.float32(loss)).hex()


class RunRecorder:
    """Writes metrics and events of one run; `enabled=False` on every process but the first."""

    def __init__(self, run_dir: str | Path, clock, observer: Observer | None = None, enabled: bool = True):
        self.run_dir = Path(run_dir)
        self._clock = clock
        self._observer = observer
        self._enabled = enabled
        self._files = {}
        self._lock = threading.Lock()  # the stall watchdog writes its event from its own thread
        if enabled:
            with self._out_of_space("opening its records"), unwritable_is_usage("--run-dir", self.run_dir):
                self.run_dir.mkdir(parents=True, exist_ok=True)
                for kind, name in (("metric", "metrics.jsonl"), ("event", "events.jsonl")):
                    self._files[kind] = open(self.run_dir / name, "a", encoding="utf-8")

    def _out_of_space(self, doing: str):
        """A record write that ran out of space is StorageFull (exit 74), not the training code's error.
        Every line written before it was flushed whole; a torn last line is what readers already skip."""
        return storage_full_is_infrastructure(f"--run-dir {self.run_dir}: {doing}",
                                              then="the records and checkpoints written so far are intact")

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
        if not self._enabled:
            return
        with self._lock, self._out_of_space(f"appending to {kind}s"):
            handle = self._files[kind]
            handle.write(json.dumps(record, sort_keys=False) + "\n")
            handle.flush()
        if self._observer is not None:
            self._observer(kind, record)

    def write_run_json(self, cfg, extra: dict) -> None:
        if not self._enabled:
            return
        info = RunInfo(config=cfg.to_dict(), fingerprint=cfg.fingerprint(),
                       fingerprint_fields=cfg.fingerprint_fields(), versions=versions(),
                       started_at=self._clock.time(), **extra)
        tmp = self.run_dir / "run.json.tmp"
        with self._out_of_space("writing run.json"):
            tmp.write_text(json.dumps(written(info), indent=2, sort_keys=True) + "\n", encoding="utf-8")
            tmp.replace(self.run_dir / "run.json")

    def close(self) -> None:
        for handle in self._files.values():
            try:
                handle.close()
            except OSError as exc:  # the buffered line a full disk refused: already raised as StorageFull
                if no_space_errno(exc) is None:
                    raise
        self._files = {}


def versions() -> dict:
    """Bitwise resume is only promised for one exact build; run.json records which."""
    found: dict[str, str | None] = {"python": platform.python_version()}
    for name in ("jax", "jaxlib", "orbax-checkpoint", "optax", "numpy"):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found
