"""Where RunRecorder's lines go: files in a local run directory, or chunks on an object store.

- `FileSink`: metrics.jsonl and events.jsonl appended and flushed line by line, run.json replaced by a
  rename (a local directory, today's layout: a killed process loses nothing it reported).
- `ChunkSink`: `--run-dir gs://...`. An object cannot be appended to, and rewriting one per step would be
  a whole upload per step, so lines are held and uploaded as a new numbered chunk at most every
  `--record-flush-seconds` (by a timer thread, so a quiet stretch is uploaded too) and at close
  (elxpk_storage/run_records.py: the layout). An event (a few per checkpoint period: the recovery timeline)
  is uploaded at once, with the metrics held before it. So a SIGKILL loses at most the last interval's
  metrics and no event but one being uploaded. A failed
  upload keeps its lines for the next one: an outage delays records, it does not end the run; what is still
  held at close after one more try is reported on stderr and let go (the checkpoints are the run's state).
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

from elxpk_contract.setting_rules import said
from elxpk_contract.storage_full import no_space_errno, storage_full_is_infrastructure, unwritable_is_usage

FILES = {"metric": "metrics.jsonl", "event": "events.jsonl"}
KIND_OF = {"metric": "metrics", "event": "events"}  # the chunk kind of each record kind


class FileSink:
    def __init__(self, run_dir: Path):
        self.run_dir = run_dir
        self._files = {}
        with self._out_of_space("opening its records"), unwritable_is_usage(said("run_dir"), run_dir, creating=True):
            run_dir.mkdir(parents=True, exist_ok=True)
            for kind, name in FILES.items():
                self._files[kind] = open(run_dir / name, "a", encoding="utf-8")

    def _out_of_space(self, doing: str):
        """A record write that ran out of space is StorageFull (exit 74), not the training code's error.
        Every line written before it was flushed whole; a torn last line is what readers already skip."""
        return storage_full_is_infrastructure(f"--run-dir {self.run_dir}: {doing}",
                                              then="the records and checkpoints written so far are intact")

    def write(self, kind: str, line: str) -> None:
        with self._out_of_space(f"appending to {kind}s"):
            handle = self._files[kind]
            handle.write(line)
            handle.flush()

    def write_run_json(self, text: str) -> None:
        tmp = self.run_dir / "run.json.tmp"
        with self._out_of_space("writing run.json"):
            tmp.write_text(text, encoding="utf-8")
            tmp.replace(self.run_dir / "run.json")

    def flush(self) -> None:
        """Every line is flushed as it is written."""

    def close(self) -> None:
        for handle in self._files.values():
            try:
                handle.close()
            except OSError as exc:  # the buffered line a full disk refused: already raised as StorageFull
                if no_space_errno(exc) is None:
                    raise
        self._files = {}


class ChunkSink:
    def __init__(self, run_dir: str, process: int, flush_s: float):
        from elxpk_storage.run_records import ChunkWriter  # lazy: fsspec/gcsfs only for a gs:// run dir

        self.run_dir = run_dir
        self._writer = ChunkWriter(run_dir, process)
        self._held: dict[str, list[str]] = {kind: [] for kind in FILES}
        self._lock = threading.Lock()  # the held lines; uploads are serialized by it too, so chunks stay in order
        self._closed = threading.Event()
        self._timer = threading.Thread(target=self._every, args=(flush_s,), name="elxpk-record-flush", daemon=True)
        self._timer.start()

    def write(self, kind: str, line: str) -> None:
        with self._lock:
            self._held[kind].append(line)
            if kind == "event":  # rare, and what a recovery's story is told by: uploaded at once
                self._upload_held()

    def write_run_json(self, text: str) -> None:
        with self._lock:
            self._writer.put_run_json(text.encode("utf-8"))

    def _every(self, flush_s: float) -> None:
        while not self._closed.wait(flush_s):
            self.flush()

    def flush(self) -> None:
        with self._lock:
            self._upload_held()

    def _upload_held(self) -> None:
        """Upload every held line as one chunk per kind (metrics first: an event may name their steps); on
        failure keep them for the next try (a line on stderr each time, so an outage is seen while it lasts)."""
        for kind, lines in self._held.items():
            if not lines:
                continue
            try:
                self._writer.put_chunk(KIND_OF[kind], "".join(lines).encode("utf-8"))
            except Exception as exc:  # noqa: BLE001 - any storage error: the lines wait for the next try
                print(f"warning: --run-dir {self.run_dir}: {len(lines)} {kind} record(s) not uploaded "
                      f"yet ({type(exc).__name__}: {str(exc)[:200]})", file=sys.stderr, flush=True)
                continue
            lines.clear()

    def close(self) -> None:
        self._closed.set()
        self._timer.join()
        self.flush()
        with self._lock:
            lost = sum(len(lines) for lines in self._held.values())
            self._held = {kind: [] for kind in FILES}
        if lost:
            print(f"warning: --run-dir {self.run_dir}: {lost} record(s) could not be uploaded and are lost; the "
                  "checkpoints are intact", file=sys.stderr, flush=True)
