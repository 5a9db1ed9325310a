"""Human units for durations and sizes: reading them (`90s`, `2h`; `120GiB`, `500MB`) is the contract's
(elxpk_contract/unit_values.py, beside the one reader of a flag's value), re-exported here; writing them
(format_duration, format_clock) and the API's integer widths are the launcher's.
"""

from __future__ import annotations

from elxpk_contract.unit_values import parse_duration, parse_size

__all__ = ["INT32", "INT64", "format_clock", "format_duration", "parse_duration", "parse_size"]

# The API's integer formats (a CRD schema's `format: int32`/`int64`, a Job's parallelism and backoffLimit):
# (lowest, highest), declared once for the flags' bounds, the admission checks and their messages.
INT32 = (-2**31, 2**31 - 1)
INT64 = (-2**63, 2**63 - 1)


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
