"""SIGTERM is a preemption (or an eviction, a drain, a deleted pod): stop cleanly within the grace period.

The handler only records the request; the step loop acts on it at the next step boundary
(trainer/elastic/attempt.py: commit the current step where the process can save alone, record a `preempted`
event, stop with exit code PREEMPTED). The work done in the grace period is therefore at most one step
plus one checkpoint save: the launcher checks `terminationGracePeriodSeconds` against the save time. A
SIGTERM during a hung step is not acted on; the stall watchdog or the orchestrator's SIGKILL ends it.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable


class StopRequest:
    """Set once, from a signal handler or a test; read by the step loop."""

    def __init__(self) -> None:
        self.requested: str | None = None  # the signal's name once a stop was asked for

    def request(self, reason: str) -> None:
        if self.requested is None:
            self.requested = reason


def stop_on_sigterm(stop: StopRequest) -> Callable[[], None]:
    """Turn SIGTERM into `stop.request("SIGTERM")` (main thread only); returns what restores the old handler."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = signal.getsignal(signal.SIGTERM)

    def handler(signum: int, frame: object) -> None:
        stop.request(signal.Signals(signum).name)

    signal.signal(signal.SIGTERM, handler)

    def restore() -> None:
        signal.signal(signal.SIGTERM, previous)

    return restore
