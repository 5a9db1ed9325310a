"""The clock the trainer reads and sleeps on; tests inject a fake one instead of patching time."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def time(self) -> float: ...  # unix seconds, for event timestamps

    def monotonic(self) -> float: ...  # for durations and deadlines

    def sleep(self, seconds: float) -> None: ...


class SystemClock:
    def time(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)
