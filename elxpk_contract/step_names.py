"""What a step number is, in the name of a checkpoint or run folder: the one definition every reader uses.

A step folder is named with ASCII digits only (`40`, orbax's `str(step)`). Python's own tests are wider:
`str.isdigit()` accepts `²` (and `int("²")` then raises), `str.isdecimal()`, `int()` and a `\\d` in a str
pattern accept the digits of every script (`٣`, fullwidth `３`). A reader that trusted them ended in an
internal error, or took a stranger's folder for a step. Standard library only: the launcher, the trainer and
the trainer image's pre-start all import it.
"""

from __future__ import annotations

from elxpk_contract.limits import MAX_INDEX

ASCII_DIGITS = frozenset("0123456789")
MAX_STEP_DIGITS = len(str(MAX_INDEX))  # 19: longer is no step of a run, and is never converted


def ascii_number(text: str) -> int | None:
    """The value of `text` when it is 1 to 19 ASCII digits (a port, a count, a step), else None: never a
    ValueError, never another script's digits."""
    if not (0 < len(text) <= MAX_STEP_DIGITS) or not set(text) <= ASCII_DIGITS:
        return None
    return int(text)


def step_number(name: str) -> int | None:
    """The step a folder named `name` holds: its value when `name` is 1 to 19 ASCII digits and at most
    MAX_INDEX (leading zeros allowed), else None."""
    value = ascii_number(name)
    return value if value is not None and value <= MAX_INDEX else None


def canonical_step(name: str) -> int | None:
    """The step of a folder named exactly as orbax names one (`str(step)`: no leading zero), else None."""
    value = step_number(name)
    return value if value is not None and str(value) == name else None


def digit_like(name: str) -> bool:
    """A name Python (and orbax's own listing, which uses `str.isdigit` and `\\d`) calls digits, but that is
    no step number: `²`, `٣`, fullwidth digits, or more digits than any step has."""
    return name.isdigit() and step_number(name) is None
