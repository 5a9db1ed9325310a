"""Human units for durations and sizes: `90s`, `2h`, `30d`, `1.5m`; `120GiB`, `500MB`, `1TiB`.

Plain numbers are seconds and bytes. Errors raise ValueError with a message the caller wraps into one line
naming its flag (elxpk_contract/value_rule.py `read_value`, the one reader of a flag's or a setting's value).
Here, below the launcher, so that the reader and its duration rows live in the contract; elxpk/units.py
re-exports both. Standard library only.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

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
