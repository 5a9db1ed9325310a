"""One writer per checkpoint directory: CHECKPOINT_DIR/elxpk-writer.json, a lease its primary process holds.

Two runs started on one checkpoint directory mixed their steps and replaced each other's attempt history,
and one's start removed the other's in-flight save as "never committed" (issue 51). So before anything is
written or removed there, process 0 takes the lease: a small record (run id, host, pid, a token, and the
time of its last beat) that a daemon thread rewrites every BEAT_S seconds while the process lives, and that
a clean exit removes. A starting process that finds another holder's lease:
- beaten within STALE_S (by the injected clock), held by another run (a different `--run-id`, or either run
  without one): refused with UsageError, exit 2, naming both runs; nothing was written;
- held by this same run (a group restart of one JobSet: the same run id): taken over at once (`acquire`
  says why it does not wait for the predecessor), and the predecessor fenced off: its beat stops once it
  reads another token, and its commits are refused (`check_held`, which the checkpoint store calls just
  before orbax's commit). Its in-flight save is never deleted: `took_over` tells this attempt's
  checkpoint store to leave the saves that never committed where they are (orbax lists only committed
  steps, so restore passes them over), and a later start, with no live predecessor, removes them;
- whose holder is known dead (same host, no such pid) or stopped beating: taken over at once.
The new lease is written, then read back: of two processes that took a free lease at once, the one whose
record was overwritten sees the other's token and is refused the same way.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
from typing import Any

from elxpk_contract.errors import CheckFailed, UsageError
from elxpk_contract.setting_rules import said
from elxpk_contract.storage_full import unwritable_is_usage
from elxpk_storage import checkpoint_files as ckpt_storage
from trainer.clock import Clock

LEASE_FILE = "elxpk-writer.json"
LEASE_BYTES = 4096
BEAT_S = 5.0  # how often the holder rewrites its beat
STALE_S = 20.0  # a lease not beaten for this long is its holder's no more (a killed process, a lost pod)


class WriterLease:
    def __init__(self, checkpoint_path: str, run_id: str, clock: Clock, *, flag: str = "") -> None:
        """`flag`: the flag that named the directory, as the user spelled it (--run-dir for RUN_DIR/checkpoints)."""
        self._flag = flag or said("checkpoint_dir")
        self.path = ckpt_storage.checkpoint_root(checkpoint_path, self._flag) / LEASE_FILE
        self._run_id, self._clock = run_id or "", clock
        self._host, self._pid = socket.gethostname(), os.getpid()
        self._token = f"{self._host}:{self._pid}:{clock.time():.6f}"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.took_over: dict[str, Any] | None = None  # this run's predecessor's lease, still beating when taken

    def acquire(self) -> None:
        """Take the lease (see the module's docstring), then keep it beating. UsageError when another run
        holds it."""
        held = self._read()
        if held is not None and held.get("token") != self._token and self._alive(held):
            if not self._same_run(held):
                raise UsageError(self._refusal(held))
            # This run's predecessor (a group restart: the same run id) is taken over at once and fenced off.
            # Waiting for it to stop beating held process 0 here while the group's other processes timed out
            # joining it (a multi-controller restart after a SIGKILL restarted twice on the test cluster).
            self.took_over = held
        # The lease is the run's first write: a directory that cannot be written is refused here, exit 2 naming
        # the flag, before the run directory has a record (it used to be refused at the first save).
        with unwritable_is_usage(self._flag, self.path.parent, creating=True):
            self._write()
        mine = self._read()
        if mine is not None and mine.get("token") != self._token:  # taken by another at the same moment
            raise UsageError(self._refusal(mine))
        self._thread = threading.Thread(target=self._beat, name="elxpk-writer-lease", daemon=True)
        self._thread.start()

    def release(self) -> None:
        """Stop beating and remove the lease if it is still this process's."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        held = self._read()
        if held is not None and held.get("token") == self._token:
            try:
                self.path.unlink()
            except OSError as exc:  # a lease left behind goes stale on its own
                print(f"warning: cannot remove {self.path}: {exc}", file=sys.stderr, flush=True)

    def holder(self) -> dict[str, Any] | None:
        """The lease's record when another process holds it now (this one was fenced off), else None: a
        lease that is absent or unreadable is not taken as another's."""
        held = self._read()
        return held if held is not None and held.get("token") != self._token else None

    def check_held(self) -> None:
        """CheckFailed when a newer attempt took the lease: what this process would commit now races the new
        attempt's own saves (the checkpoint store calls this just before each commit)."""
        other = self.holder()
        if other is not None:
            raise CheckFailed(f"{said('checkpoint_dir')} {self.path.parent}: not committing: a newer attempt of run "
                              f"{str(other.get('run') or '(no --run-id)')[:80]!r} (process {str(other.get('pid'))[:12]} "
                              f"on {str(other.get('host'))[:80]}) writes it now")

    def _same_run(self, held: dict) -> bool:
        return bool(self._run_id) and held.get("run") == self._run_id

    def _alive(self, held: dict) -> bool:
        beat = held.get("beat")
        if not isinstance(beat, (int, float)) or isinstance(beat, bool) or self._clock.time() - beat > STALE_S:
            return False
        pid = held.get("pid")
        if held.get("host") == self._host and isinstance(pid, int) and not isinstance(pid, bool) and pid > 0:
            try:
                os.kill(pid, 0)  # signal 0: whether that process exists, nothing sent
            except ProcessLookupError:
                return False
            except PermissionError:  # exists, another user's
                return True
        return True

    def _refusal(self, held: dict) -> str:
        other = str(held.get("run") or "")[:80]
        age = self._clock.time() - float(held.get("beat") or 0)
        return (f"{said('checkpoint_dir')} {self.path.parent}: run {other or '(no --run-id)'!r} is writing it "
                f"(process {str(held.get('pid'))[:12]} on {str(held.get('host'))[:80]}, alive {age:.0f} s ago); "
                f"this is run {self._run_id or '(no --run-id)'!r}. One run writes a checkpoint directory: give "
                f"this run another {said('checkpoint_dir')}, or stop the other first")

    def _read(self) -> dict[str, Any] | None:
        try:
            data = ckpt_storage.read_bounded(self.path, LEASE_BYTES)
            record = json.loads(data[:LEASE_BYTES + 1].decode("utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, RecursionError) as exc:  # unreadable or not ours: no holder to respect
            print(f"warning: {self.path}: {type(exc).__name__}: {str(exc)[:120]}; taken as free",
                  file=sys.stderr, flush=True)
            return None
        return record if isinstance(record, dict) and len(data) <= LEASE_BYTES else None

    def _write(self) -> None:
        text = json.dumps({"run": self._run_id, "host": self._host, "pid": self._pid, "token": self._token,
                           "beat": self._clock.time()}, sort_keys=True) + "\n"
        ckpt_storage.write_whole(self.path, text, tmp_name=f".{LEASE_FILE}.{self._pid}.partial")

    def renew(self) -> bool:
        """One beat: rewrite the lease, unless a newer attempt holds it now (then False: a beat would overwrite
        the new holder's lease)."""
        if self.holder() is not None:
            print(f"warning: {self.path}: a newer attempt of this run took the writer lease; this process commits "
                  "nothing more", file=sys.stderr, flush=True)
            return False
        self._write()
        return True

    def _beat(self) -> None:
        while not self._stop.wait(BEAT_S):
            try:
                if not self.renew():
                    return
            except Exception as exc:  # noqa: BLE001 - a missed beat must not stop training; the next may land
                print(f"warning: cannot renew {self.path}: {type(exc).__name__}: {str(exc)[:120]}",
                      file=sys.stderr, flush=True)
