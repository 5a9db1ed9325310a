"""The attempt's step made in the background while its state is restored (issue 49, part 3).

The restore reads the checkpoint into the devices; the step's executable is loaded from the run's store, or
compiled: the two are independent (the step needs only the mesh and the state's shapes), and on a chip each
takes seconds (125m on a v5e: a 4.1 s restore, then a 6.0 s compile from jax's cache, one after the other).
So the attempt starts the step first and collects it after the restore: its wait is the longer of the two,
not their sum. Every compile is still done before the stall watchdog is armed (the attempt collects it
first), and the thread is always joined before the attempt ends: a thread inside XLA's compiler while the
interpreter finalizes aborts the process (trainer.elastic.live_recovery.Preparation says so too).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


class StepAhead:
    """`make()` in a thread from now on; `result()` waits for it and returns it (or raises its error), with the
    unix time it was ready at."""

    def __init__(self, make: Callable[[], Any], clock: Any, *, name: str = "elxpk-step-ahead") -> None:
        self._make, self._clock = make, clock
        self._value: Any = None
        self._error: BaseException | None = None
        self.ready_at: float | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._value = self._make()
        except BaseException as exc:  # noqa: BLE001 - handed to the attempt's own thread at result()
            self._error = exc
        self.ready_at = self._clock.time()

    def result(self) -> Any:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value

    def join(self) -> None:
        """Wait for the thread, whatever it made (an attempt that ended before it collected the step)."""
        self._thread.join()
