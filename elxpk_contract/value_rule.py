"""The one reading of a raw value: a flag's (elxpk/flag_rows.py `Flag`) or a trainer setting's
(elxpk_contract/setting_row.py `Setting`). Each row carries a `ValueRule` (its kind, bounds, choices and fix)
and `read_value` turns what the user gave into the value, or one line naming the flag, what is wrong and the
fix; the phrases every reader says (`range_words`, `not_a_number`, `blank_problem`) are here too.

So `workload create`, `plan`, `local run` and `python -m trainer` refuse the same value with the same line
because they run the same code, not because a test keeps two readers in step. A trainer setting's rule
reads as the trainer always has (`trainer=True`: a value read from its text, quoted as read); a launcher
row's quotes the value as typed. Standard library only: every start reads it.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from elxpk_contract.bucket_names import gcs_url_problem
from elxpk_contract.unit_values import parse_duration, parse_size

# Kinds of value: how a row's value is typed and read.
TEXT, INT, FLOAT, BOOL, LIST, DURATION, SIZE = "text", "int", "float", "bool", "list", "duration", "size"
NUMBERS = (INT, FLOAT, DURATION, SIZE)  # the kinds read from text as a number (a blank one is refused)
SECONDS = "seconds"  # the `unit` of a setting counted in seconds: "must be a positive number of seconds"
# The fix a duration or size that does not parse gets, unless its row says another (`fix`).
_EXAMPLES = {DURATION: "a duration such as 90s, 2h or 30d", SIZE: "a size such as 120GiB or 500MB"}
_NEVER = ("", "none", "never")  # what a `never` rule reads as None


class ValueRule(NamedTuple):
    """What a value of one row may be. `low`/`high` bound a number (inclusive; `low_open`/`high_open`
    exclude the bound itself: a duration "more than 0s"); `choices` close a text; `fix` ends the message of
    a number out of bounds, a text no choice has, a duration that does not parse."""

    kind: str
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    choices: tuple[str, ...] = ()
    fix: str = ""
    unit: str = ""  # SECONDS: a setting counted in seconds (its zero bound is said "a positive number of seconds")
    cap: float | None = None  # a limit the help does not print: a setting's whole number stops at MAX_INDEX
    never: bool = False  # "", none and never read as None (a setting whose None means "never": --revive-after)
    fold_case: bool = False  # a choice read case-insensitively and lower-cased (-o/--output's `JSON`)
    # The trainer's reading (a setting's rule): every value is read from its text, as argv and the environment
    # give it (a float setting's 5 is 5.0, a bool's yes is True, a list's values a tuple), any text must be a
    # value (not blank, no NUL byte, a bucket GCS can have), and a message quotes the value as read, its repr
    # cut at 80 characters. A launcher row's (False) keeps what Typer typed and quotes the value as typed.
    trainer: bool = False


def read_value(rule: ValueRule, raw: Any, named: str) -> tuple[Any, str | None]:
    """The value of `raw` (text as typed, or a value already typed) by `rule`: (value, None), or (None, one
    line naming `named`, the flag as the command spells it)."""
    if isinstance(raw, str) and not raw.strip() and (rule.kind in NUMBERS or rule.trainer) and not rule.never:
        return None, blank_problem(named, raw)
    try:
        value = _converted(rule, raw)
    except ValueError as exc:
        return None, f"{named} {_quoted(rule, raw)}: {exc}"
    problem = value_problem(rule, value, named, raw)
    return (None, problem) if problem else (value, None)


def value_problem(rule: ValueRule, value: Any, named: str, raw: Any = None) -> str | None:
    """The line for a value already read that `rule` refuses (its choices, its bounds), naming `named`;
    None when it is within them. `raw`: the value as typed, which a launcher row's line quotes."""
    if value is None or (rule.trainer and isinstance(value, (bool, tuple))):  # a flag given, a list: no bounds
        return None
    if rule.fold_case and rule.choices:
        return None if value in rule.choices else f"{named} {value!r}: use {either(rule.choices)}"
    if rule.choices and value not in rule.choices:
        return f"{named} {_quoted(rule, value)}: use one of {', '.join(rule.choices)}" + (
            f"; {rule.fix}" if rule.fix else "")
    if isinstance(value, str):
        return _text_problem(rule, value, named)
    if rule.trainer and isinstance(value, float) and not math.isfinite(value):  # TrainerConfig's own values
        return f"{named} {value}: not a finite number"
    if rule.trainer and rule.kind == INT and not isinstance(value, int):
        return f"{named} {value!r}: must be a whole number"
    return _bounds_problem(rule, value, named, raw)


def _converted(rule: ValueRule, raw: Any) -> Any:
    """`raw` as `rule`'s kind; ValueError saying what is wrong and the fix (the line's end)."""
    kind = rule.kind
    if kind in (INT, FLOAT):
        return _number(rule, raw)
    if kind in (DURATION, SIZE):
        try:
            return (parse_duration if kind == DURATION else parse_size)(raw)
        except ValueError as exc:
            raise ValueError(f"{_unquoted(exc, raw)}; give {rule.fix or _EXAMPLES[kind]}") from None
    if not rule.trainer:
        return raw.lower() if rule.fold_case and isinstance(raw, str) and raw.lower() in rule.choices else raw
    if kind == LIST:
        return tuple(raw)
    if isinstance(raw, bool) and kind == BOOL:
        return raw
    text = str(raw).strip()
    if kind == BOOL:
        if text.lower() in ("true", "1", "yes"):
            return True
        if text.lower() in ("false", "0", "no"):
            return False
        raise ValueError("use true or false")
    return text or str(raw)  # a blank value as given, so its refusal shows what was given


def _number(rule: ValueRule, raw: Any) -> int | float | None:
    whole = rule.kind == INT
    if rule.never and str(raw).strip().lower() in _NEVER:
        return None
    try:
        if isinstance(raw, bool) or (whole and isinstance(raw, float)):
            raise ValueError(raw)
        if isinstance(raw, (int, float)) and (whole or not rule.trainer):
            value: int | float = raw  # a number already typed, as given (the trainer reads a float from its text)
        elif plain_number_text(text := str(raw).strip()):  # ASCII, no `_` groups
            value = int(text, 10) if whole else float(text)
        else:
            raise ValueError(raw)
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(raw)
    except ValueError:
        raise ValueError(not_a_number(whole, range_phrase(rule), rule.fix)) from None
    return value


def _text_problem(rule: ValueRule, value: str, named: str) -> str | None:
    """A trainer setting's text: a path or name the trainer opens (a launcher row's text is its command's)."""
    if not rule.trainer:
        return None
    if not value.strip():
        return blank_problem(named, value)
    if "\x00" in value:  # a NUL byte is no path at all
        return f"{named} {value!r:.80}: must not contain a NUL byte; {rule.fix or 'give a value'}, or leave it unset"
    return gcs_url_problem(named, value)  # a bucket GCS cannot have fails at the first save, not here


def _bounds_problem(rule: ValueRule, value: Any, named: str, raw: Any) -> str | None:
    if not isinstance(value, (int, float)):
        return None
    low, high = rule.low, rule.high
    below = low is not None and (value <= low if rule.low_open else value < low)
    beyond = high is not None and (value >= high if rule.high_open else value > high)
    why = f" ({rule.fix})" if rule.fix and rule.kind in (INT, FLOAT) else ""
    if below and low == 0 and high is None and rule.unit == SECONDS:
        words = "a positive number of seconds"
    elif below or beyond:
        words = range_phrase(rule) + ("" if rule.low_open or rule.high_open else why)
    elif rule.cap is not None and value > rule.cap:
        words = f"at most {shown_number(rule.cap)}{why}"
    else:
        return None
    return f"{named} {_shown(rule, value, raw)}: must be {words}"


def _shown(rule: ValueRule, value: Any, raw: Any) -> str:
    """The value in a bounds message: as read (the trainer's), or as typed (a launcher row's; a duration's
    quoted, "'0s'")."""
    if rule.trainer or raw is None:
        return str(value)
    return str(raw) if rule.kind in (INT, FLOAT) else repr(raw)


def _quoted(rule: ValueRule, raw: Any) -> str:
    return f"{raw!r:.80}" if rule.trainer else repr(raw)


def range_phrase(rule: ValueRule) -> str:
    """`rule`'s bounds as the end of a sentence: "at least 1", "from 0 to 255", "more than 0s"."""
    return range_words(rule.low, rule.high, low_open=rule.low_open, high_open=rule.high_open,
                       unit="s" if rule.kind == DURATION else "")


def _unquoted(exc: ValueError, raw: Any) -> str:
    """The units' message without the value it starts with (the line names it already): "'soon' is not a
    number with a unit" -> "not a number with a unit"."""
    text = str(exc)
    for prefix in (f"{str(raw)!r} is ", f"{str(raw)!r}: "):
        if text.startswith(prefix):
            return text[len(prefix):]
    return text


def blank_problem(source: str, raw: str) -> str:
    """What every reader says of an empty or whitespace-only value (a trainer setting's flag or env var, a
    launcher row's, every elxpk command's raw check in elxpk/cli/arg_checks.py): a blank path would be the
    working directory, a blank name every object, a blank number no number."""
    return f"{source} {raw!r:.20}: empty (or only spaces); give a value or leave it unset"


def not_a_number(whole: bool, bounds: str = "", fix: str = "") -> str:
    """What every reader says of a value that is no number: "not a whole number; give a whole number, at
    least 1 (the fix)"."""
    what = "a whole number" if whole else "a finite number"
    return f"not {what}; give {what}" + (f", {bounds}" if bounds else "") + (f" ({fix})" if fix else "")


def range_words(low: float | None, high: float | None, *, low_open: bool = False, high_open: bool = False,
                unit: str = "") -> str:
    """Bounds as the end of a sentence, in every reader's words: "0 or more", "at least 2", "from 0 to 255",
    "in [0, 1)", "more than 0s", "more than 0s, at most 7s"; "" when there are none."""
    if low is not None and low_open:
        return f"more than {shown_number(low)}{unit}" + ("" if high is None else f", at most {shown_number(high)}{unit}")
    if low is not None and high is not None:
        return f"in [{shown_number(low)}, {shown_number(high)})" if high_open else f"from {shown_number(low)} to {shown_number(high)}"
    if low is not None:
        return "0 or more" if low == 0 else f"at least {shown_number(low)}"
    return "" if high is None else f"at most {shown_number(high)}"


def either(choices: tuple[str, ...]) -> str:
    """"table, json or yaml": a closed set of words as -o/--output's help and message say them."""
    return ", ".join(choices[:-1]) + f" or {choices[-1]}"


def shown_number(x: float) -> str:
    """A bound as a message says it: 2.0 as 2, 0.1 as 0.1."""
    return str(int(x)) if float(x).is_integer() else str(x)


def plain_number_text(text: str) -> bool:
    """Whether a number is written as a person types one: ASCII only, no `_` groups. Python's int() and
    float() also take other scripts' digits and underscores (`١٢` is 12, `1_0` is 10): a value that reads
    as a number only to Python is refused, wherever elxpk converts one."""
    return text.isascii() and "_" not in text
