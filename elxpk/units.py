"""Human units for durations and sizes: `90s`, `2h`, `30d`, `1.5m`; `120GiB`, `500MB`, `1TiB`.

Plain numbers are seconds and bytes. Errors raise ValueError with a message the caller wraps
into a UsageError naming its flag.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

# The API's integer formats (a CRD schema's `format: int32`/`int64`, a Job's parallelism and backoffLimit):
# (lowest, highest), declared once for the flags' bounds, the admission checks and their messages.
INT32 = (-2**31, 2**31 - 1)
INT64 = (-2**63, 2**63 - 1)

_DURATION_UNITS = {"ms": 1e-3, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_SIZE_UNITS = {
    "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}
# Compiled on first use (re caches it): a `workload create` without a duration flag never needs it.
_NUMBER_UNIT = r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([a-zA-Z]*)\s*$"


def _split(text: str) -> tuple[float, str]:
    match = re.match(_NUMBER_UNIT, str(text))
    if not match and str(text).strip().lower().lstrip("+-") in ("inf", "infinity", "nan"):
        raise ValueError(f"{text!r}: not a finite number")
    if not match:
        raise ValueError(f"{text!r} is not a number with a unit")
    return float(match.group(1)), match.group(2).lower()


def _parse(text: str | float, units: Mapping[str, float], kind: str, names: str) -> float:
    if isinstance(text, (int, float)):
        value = float(text)
    else:
        value, unit = _split(text)
        if unit not in ("", *units):
            raise ValueError(f"{text!r}: unknown {kind} unit {unit!r} (use {names})")
        value *= units.get(unit, 1.0)
    if not math.isfinite(value):  # one rule with the settings table: `1e400` is refused like `inf`
        raise ValueError(f"{text!r}: not a finite number")
    return value


def parse_duration(text: str | float) -> float:
    """Seconds in `text` (`90s`, `2h`, `30d`; a bare number is seconds)."""
    return _parse(text, _DURATION_UNITS, "duration", "ms, s, m, h, d or w")


def parse_size(text: str | float) -> float:
    """Bytes in `text` (`120GiB`, `500MB`; a bare number is bytes)."""
    return _parse(text, _SIZE_UNITS, "size", "B, KB, MB, GB, TB, KiB, MiB, GiB or TiB")


def format_duration(seconds: float) -> str:
    """A short human form: 0.4s, 2m05s, 3h10m, 2d04h."""
    if seconds < 60:
        return f"{seconds:.1f}s" if seconds < 10 else f"{seconds:.0f}s"
    minutes, secs = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours:02d}h"


def format_clock(unix: float) -> str:
    """The UTC time of day to a tenth of a second, 03:40:35.2Z: a figure an operator can lay beside the
    trainer's records and the alerts (format_duration's whole seconds past 10 s would not line up)."""
    tenths = int(round(unix * 10)) % (86400 * 10)
    secs, tenth = divmod(tenths, 10)
    return f"{secs // 3600:02d}:{secs // 60 % 60:02d}:{secs % 60:02d}.{tenth}Z"
