"""A clock for tests: time moves only when the code under test sleeps (or the test advances it), so waits
are exact and instant. It speaks trainer/clock.py's Clock protocol."""

from __future__ import annotations


class ManualClock:
    def __init__(self, start: float = 1_000.0) -> None:
        self.now = start
        self.slept = 0.0  # the total the code under test slept

    def time(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.slept += seconds
