"""The stall watchdog: a thread that notices when no step completes within the stall timeout.

A hung collective or a stuck checkpoint read raises nothing, so neither the elastic loop nor the
orchestrator would ever act on it. The watchdog is armed only while steps should be completing: an
attempt arms it after its restore and compile and disarms it when it leaves the step loop, so the wait
for slices, the restore and the compile (each with its own bound) never count. The timeout is
`elxpk_contract.stall.effective_stall_timeout` of the setting and the observed step intervals.

When it fires it calls `on_stall` once, from its own thread (the main thread is the one that hangs);
it re-arms only when the next attempt arms it. It waits on a real condition variable and reads the
injected clock, so a fake clock that never advances simply never fires.

When `on_stall` chose to recover in process (it returned), the hung step should raise and the attempt
leave its step loop (`disarm`). A step stuck where Python cannot reach it (a collective inside XLA) never
does: if the attempt has not left the loop within one more stall timeout, the watchdog calls `on_stuck`,
which ends the process, so a hang is never hidden behind a recovery that never completes.
"""

from __future__ import annotations

import sys
import threading
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from elxpk_contract.stall import STALL_WINDOW, effective_stall_timeout
from trainer.clock import Clock

_MAX_WAIT_S = 1.0  # re-read the clock at least this often (the timeout can change as intervals arrive)


@dataclass(frozen=True)
class Stall:
    step: int  # the step that did not complete
    active: tuple[int, ...]  # the slices of the attempt
    timeout_s: float
    since_s: float  # seconds since the last step completed (or the watchdog was armed)


class StallWatchdog:
    def __init__(self, setting: float, clock: Clock, on_stall: Callable[[Stall], None],
                 on_stuck: Callable[[Stall, float], None] | None = None) -> None:
        self._setting = setting
        self._clock = clock
        self._on_stall = on_stall
        self._on_stuck = on_stuck
        self._cond = threading.Condition()
        self._armed = False
        self._closed = False
        self._left = 0  # counts the attempt leaving its step loop (disarm, arm, close)
        self._last = 0.0
        self._step = 0
        self._active: tuple[int, ...] = ()
        self.intervals: list[float] = []  # seconds between consecutive step completions, most recent last
        self._thread = threading.Thread(target=self._watch, name="elxpk-stall-watchdog", daemon=True)
        self._thread.start()

    def timeout(self) -> float:
        return effective_stall_timeout(self._setting, self.intervals)

    def arm(self, step: int, active: Sequence[int]) -> None:
        """Steps should complete from now on, starting with `step`."""
        with self._cond:
            self._armed, self._last, self._step, self._active = True, self._clock.monotonic(), step, tuple(active)
            self._left += 1
            self._cond.notify_all()

    def beat(self, steps_done: int) -> None:
        """A step completed; `steps_done` is the next step to run."""
        with self._cond:
            now = self._clock.monotonic()
            if self._armed:
                self.intervals.append(now - self._last)
                del self.intervals[:-STALL_WINDOW]
            self._last, self._step = now, steps_done
            self._cond.notify_all()

    def disarm(self) -> None:
        with self._cond:
            self._armed = False
            self._left += 1
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed, self._armed = True, False
            self._left += 1
            self._cond.notify_all()
        if self._thread is not threading.current_thread():
            self._thread.join()

    def due(self) -> Stall | None:
        """The stall to report now, if the watchdog is armed and the timeout has passed."""
        with self._cond:
            if not self._armed:
                return None
            since = self._clock.monotonic() - self._last
            timeout = self.timeout()
            return Stall(self._step, self._active, timeout, since) if since >= timeout else None

    def _watch(self) -> None:
        while True:
            with self._cond:
                if self._closed:
                    return
                if not self._armed:
                    self._cond.wait()
                    continue
                stall = self.due()  # the condition's lock is reentrant
                if stall is None:
                    remaining = self.timeout() - (self._clock.monotonic() - self._last)
                    self._cond.wait(min(max(remaining, 0.01), _MAX_WAIT_S))
                    continue
                self._armed = False  # once per stall; the next attempt arms it again
                left, detected = self._left, self._clock.monotonic()
            self._on_stall(stall)  # returns only when it chose to recover in process
            self._await_recovery(stall, left, detected)

    def _await_recovery(self, stall: Stall, left: int, began: float) -> None:
        """Call `on_stuck` if the attempt has not left its step loop one stall timeout after `began`."""
        if self._on_stuck is None:
            return
        with self._cond:
            while self._left == left and not self._closed:
                waited = self._clock.monotonic() - began
                if waited >= stall.timeout_s:
                    break
                self._cond.wait(min(stall.timeout_s - waited, _MAX_WAIT_S))
            else:
                return
        self._on_stuck(stall, self._clock.monotonic() - began)


def thread_stacks() -> str:
    """Every thread's stack, as text: what a stall report shows (the main thread shows where it hangs)."""
    names = {t.ident: t.name for t in threading.enumerate()}
    parts = []
    for ident, frame in sys._current_frames().items():
        parts.append(f'Thread "{names.get(ident, "?")}" (id {ident}):\n' + "".join(traceback.format_stack(frame)))
    return "\n".join(parts)
