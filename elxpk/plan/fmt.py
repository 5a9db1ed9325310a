"""Durations as the planner prints them: units.format_duration without a trailing zero field (30d, not 30d00h)."""

from __future__ import annotations

import re

from elxpk.units import format_duration

_TRAILING_ZERO = re.compile(r"^(\d+[dhm])00[hms]$")


def duration(seconds: float) -> str:
    text = format_duration(seconds)
    match = _TRAILING_ZERO.match(text)
    return match.group(1) if match else text
