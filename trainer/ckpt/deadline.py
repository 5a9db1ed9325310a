"""The restore's own time bound. The stall watchdog (trainer/elastic/watchdog.py) is armed only while steps
should be completing, so it never counts a restore; a read that hangs (a stuck object store, a FIFO, a walk
that never ends) would otherwise hold the process for ever. `Deadline` ends it instead, with STALLED (76,
retryable: the group restart is the recovery), every thread's stack on stderr first."""

from __future__ import annotations

import faulthandler
import os
import sys
import threading
from collections.abc import Callable
from types import TracebackType

from elxpk_contract.exit_codes import STALLED
from elxpk_contract.setting_rules import default

# --restore-timeout-seconds' default, declared in the settings table: a 7B state with its optimizer (~100 GB)
# reads in minutes; 30 is a hang.
RESTORE_TIMEOUT_S: float = default("restore_timeout_seconds")


def end_process(what: str, seconds: float) -> None:
    """The default expiry: the main thread is the one that hangs, so only ending the process returns."""
    print(f"stall: {what} did not finish within {seconds:g}s; every thread's stack follows", file=sys.stderr,
          flush=True)
    faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
    print(f"error: stalled: {what} did not finish within {seconds:g}s; exit {STALLED.code} (retryable)",
          file=sys.stderr, flush=True)
    os._exit(STALLED.code)


class Deadline:
    """`with Deadline("the checkpoint restore", 1800):` calls `on_expiry(what, seconds)` from its own thread
    when the block has not finished within `seconds` (real time: the hang it bounds is a real one)."""

    def __init__(self, what: str, seconds: float,
                 on_expiry: Callable[[str, float], None] = end_process) -> None:
        self._what, self._seconds, self._on_expiry = what, seconds, on_expiry
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="elxpk-deadline", daemon=True)

    def _watch(self) -> None:
        if not self._done.wait(self._seconds):
            self._on_expiry(self._what, self._seconds)

    def __enter__(self) -> Deadline:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._done.set()
        self._thread.join()
