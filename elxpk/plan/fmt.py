"""Durations as the planner prints them, through one formatter with one rounding.

units.format_duration without a trailing zero field (30d, not 30d00h), and rounded half up to whole
seconds first from 10 s on, so a value prints the same in every table, the hint and the warnings
(1787.5 s is 29m48s everywhere, never 29m47s in one place).
"""

from __future__ import annotations

import math
import re

from elxpk.units import format_duration

_TRAILING_ZERO = re.compile(r"^(\d+[dhm])00[hms]$", re.ASCII)


def duration(seconds: float) -> str:
    if math.isfinite(seconds) and seconds >= 10:
        seconds = math.floor(seconds + 0.5)
    text = format_duration(seconds)
    match = _TRAILING_ZERO.match(text)
    return match.group(1) if match else text
