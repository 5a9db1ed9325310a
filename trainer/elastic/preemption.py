"""SIGTERM is a preemption (or an eviction, a drain, a deleted pod): stop cleanly within the grace period.

The handler only records the request; the step loop acts on it at the next step boundary
(trainer/elastic/attempt.py: commit the current step where the grace period left allows it, record a
`preempted` event, stop with exit code PREEMPTED; trainer/elastic/drain.py has the rule). The work done in
the grace period is therefore at most one step plus one checkpoint save: the launcher checks
`terminationGracePeriodSeconds` against the save time. A
SIGTERM during a hung step is not acted on; the stall watchdog or the orchestrator's SIGKILL ends it.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from elxpk_contract.exit_codes import PREEMPTED

# Set by stop_on_sigterm's handler (cleared when it is restored): a SIGTERM this process has already heard,
# which sigterm_exits_at_once acts on before a blocking wait begins.
_HEARD = threading.Event()


class StopRequest:
    """Set once, from a signal handler or a test; read by the step loop."""

    def __init__(self) -> None:
        self.requested: str | None = None  # the signal's name once a stop was asked for
        # time.monotonic() when it was asked for: the grace period runs from there, in real seconds (the
        # kubelet's clock, not the trainer's injectable one)
        self.requested_at: float | None = None

    def request(self, reason: str) -> None:
        if self.requested is None:
            self.requested_at = time.monotonic()
            self.requested = reason

    def seconds_since(self) -> float:
        """Seconds since the stop was asked for (0 before)."""
        return 0.0 if self.requested_at is None else time.monotonic() - self.requested_at


def stop_on_sigterm(stop: StopRequest) -> Callable[[], None]:
    """Turn SIGTERM into `stop.request("SIGTERM")` (main thread only); returns what restores the old handler."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = signal.getsignal(signal.SIGTERM)

    def handler(signum: int, frame: object) -> None:
        _HEARD.set()
        stop.request(signal.Signals(signum).name)

    signal.signal(signal.SIGTERM, handler)

    def restore() -> None:
        signal.signal(signal.SIGTERM, previous)
        _HEARD.clear()

    return restore


@contextmanager
def sigterm_exits_at_once(what: str) -> Iterator[None]:
    """While the main thread waits in a blocking call of jax's C++ (`what`: joining jax.distributed, which
    waits minutes for a peer that never comes), Python runs no signal handler, so the SIGTERM of a deleted
    or evicted pod went unheard until the kubelet's SIGKILL, a whole grace period later (and a JobSet
    restart waits for every old pod to end). Nothing is trained yet, so nothing is lost by stopping: the C
    handler still writes the signal to `signal.set_wakeup_fd`, and a helper thread reading that pipe exits
    PREEMPTED (77) at once. Only where a Python handler for SIGTERM is installed (stop_on_sigterm), from
    the main thread; elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread() or not callable(signal.getsignal(signal.SIGTERM)):
        yield
        return
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    previous = signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    over = threading.Event()

    def stop_now() -> None:
        print(f"error: preempted (SIGTERM) while {what}: nothing trained yet, so nothing to save; exit "
              f"{PREEMPTED.code}", file=sys.stderr, flush=True)
        os._exit(PREEMPTED.code)

    def watch() -> None:
        while not over.is_set():
            received = os.read(read_end, 64)
            if over.is_set() or not received:
                return
            if signal.SIGTERM in received:
                stop_now()

    watcher = threading.Thread(target=watch, name="sigterm-while-joining", daemon=True)
    watcher.start()
    if _HEARD.is_set():  # heard before the wait began (during the imports): no reason to begin it
        stop_now()
    try:
        yield
    finally:
        over.set()
        signal.set_wakeup_fd(previous)
        os.write(write_end, b"\0")  # wakes the watcher, which sees `over` and returns
        watcher.join()
        os.close(read_end)
        os.close(write_end)
