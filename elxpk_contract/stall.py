"""How long the trainer waits for a step before it calls the run stalled (`--stall-timeout-seconds`).

A hung collective or a stuck checkpoint read is not a pod failure: nothing raises, nothing exits, and
neither JobSet nor the elastic loop would ever fire. The trainer's watchdog (trainer/elastic/watchdog.py) measures
the time since the last step completed, only while steps should be completing (never during compile,
restore or the wait for slices, which have their own bounds), against this timeout:

- `stall_timeout_seconds` > 0: exactly that many seconds;
- `stall_timeout_seconds` = 0 (auto, the default): `max(STALL_FLOOR_S, STALL_STEP_MULTIPLE x median)`,
  the median of the intervals between the last (up to) STALL_WINDOW step completions, once
  STALL_MIN_STEPS intervals are measured; before that, STALL_FLOOR_S.

The interval between completions includes the data loader and the blocking part of a checkpoint save,
so a run whose saves block for long should set the timeout explicitly above its save time. The launcher
checks that rule before submitting; it reads the same constants and function here. Standard library only.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

STALL_FLOOR_S = 600.0  # the auto timeout is never shorter: slow first steps and saves stay below it
STALL_STEP_MULTIPLE = 20.0  # a step twenty times slower than the median is not a slow step, it is a hang
STALL_MIN_STEPS = 5  # intervals measured before the median counts
STALL_WINDOW = 100  # the median is over this many recent intervals, so it follows a resize


def effective_stall_timeout(setting: float, intervals: Sequence[float]) -> float:
    """The timeout the watchdog applies now: `setting` when > 0, else the auto rule over `intervals`
    (seconds between consecutive step completions, oldest first)."""
    if setting > 0:
        return float(setting)
    recent = list(intervals)[-STALL_WINDOW:]
    if len(recent) < STALL_MIN_STEPS:
        return STALL_FLOOR_S
    return max(STALL_FLOOR_S, STALL_STEP_MULTIPLE * statistics.median(recent))
