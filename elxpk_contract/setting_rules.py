"""The trainer settings table as the launcher reads it: each row's typed fields (name, type, default, help,
bounds, choices, ...: elxpk_contract/setting_row.py), and the one reading of each rule (conversion, bounds,
`-1 = all slices`).

The table is declared once, as TrainerConfig in elxpk_contract/settings.py; its rows reach this module as
plain data, generated into elxpk_contract/settings_table.py (`python -m elxpk_contract.settings_build`;
tests/trainer/test_contract_docs.py fails while it is stale). So `workload create --dry-run` reads the
table without building the TrainerConfig dataclass (exec'ing its 40-field methods costs ~20M
instructions a start). elxpk_contract.settings re-exports every name here. Standard library only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from elxpk_contract.bucket_names import gcs_url_problem
from elxpk_contract.limits import MAX_INDEX
from elxpk_contract.setting_row import Setting
from elxpk_contract.settings_table import ROWS

ALL_SLICES = -1  # elastic_min_slice_count's "every slice" (pause and resume), as MaxText spells it
# Who passes a setting besides the trainer's own flags and env (a row's `expose`):
LAUNCHER_FLAG = "launcher"  # `workload create` has a flag of the same name and renders ELXPK_<NAME>
LAUNCHER_DERIVED = "derived"  # `workload create` renders ELXPK_<NAME> from its own flags (see render)
SECONDS = "seconds"  # the `unit` of a duration setting: its messages and the launcher's metavar say seconds


def flag_name(name: str) -> str:
    """The trainer's own flag of the setting `name` (its command line, `python -m trainer --help`)."""
    return "--" + name.replace("_", "-")


# How the command the user typed takes each setting, for the messages: the trainer's own flags unless a
# launcher command runs the trainer's checks in process with flags of its own (`elxpk local run`:
# --kill-slice, --trainer-arg=--NAME). One command a process, set at its entry, so a module value, not a
# ContextVar: the trainer's threads (data, watchdog, orbax) build messages too.
_namer: Callable[[str], str] = flag_name


def said(name: str) -> str:
    """The flag of the setting `name` in a message: as the command the user typed takes it."""
    return _namer(name)


@contextmanager
def named_by(namer: Callable[[str], str]) -> Iterator[None]:
    """Within the block, every message names a setting by `namer` (the command's spelling)."""
    global _namer
    before, _namer = _namer, namer
    try:
        yield
    finally:
        _namer = before


def env_name(name: str) -> str:
    return "ELXPK_" + name.upper()


FIELDS: dict[str, Setting] = {row.name: row for row in ROWS}


def setting(name: str) -> Setting:
    """The table row of one setting (its typed fields: help, low, high, choices, maxtext, expose, fix, ...)."""
    return FIELDS[name]


def default(name: str) -> Any:
    """The trainer's default for `name`: the planner and the launcher's hints read it here."""
    return FIELDS[name].default


def exposed(kind: str) -> list[Setting]:
    """The settings the launcher takes as flags (LAUNCHER_FLAG) or renders from its own (LAUNCHER_DERIVED)."""
    return [f for f in FIELDS.values() if f.expose == kind]


def check_setting(name: str, raw: object, source: str | None = None) -> tuple[Any, str | None]:
    """Convert a raw value (text as typed, or a Python value) and check its bounds.

    Returns (value, None) or (None, one-line problem naming `source`, the flag by default). The launcher,
    `local run` and the trainer call this, so all three refuse the same values with the same message.
    """
    f = FIELDS[name]
    source = source or said(name)
    if isinstance(raw, str) and not raw.strip() and f.type != "float | None":  # there "" is None: "never"
        return None, blank_problem(source, raw)
    try:
        value = convert_setting(f, raw)
    except ValueError as exc:
        return None, f"{source} {raw!r:.80}: {exc}"
    problem = bounds_problem(name, value, source)
    return (None, problem) if problem else (value, None)


def bounds_problem(name: str, value: Any, source: str | None = None) -> str | None:
    """The bounds and choices of the table, as one message; None when `value` is within them."""
    f, source = FIELDS[name], source or said(name)
    if value is None or isinstance(value, (bool, tuple)):
        return None
    if f.choices and value not in f.choices:
        return f"{source} {value!r:.80}: use one of {', '.join(f.choices)}"
    if isinstance(value, str):
        if not value.strip():
            return blank_problem(source, value)
        if "\x00" in value:  # a NUL byte is no path at all
            return f"{source} {value!r:.80}: must not contain a NUL byte; {f.fix or 'give a value'}, or leave it unset"
        return gcs_url_problem(source, value)  # a bucket GCS cannot have fails at the first save, not here
    if isinstance(value, float) and not math.isfinite(value):
        return f"{source} {value}: not a finite number"
    if f.type == "int" and not isinstance(value, int):
        return f"{source} {value!r}: must be a whole number"
    low, high = f.low, f.high
    why = f" ({f.fix})" if f.fix else ""
    if f.high_open and not ((low is None or value >= low) and (high is None or value < high)):
        return f"{source} {value}: must be {_row_range(f)}"
    if low is not None and high is not None and not low <= value <= high:
        return f"{source} {value}: must be from {_num(low)} to {_num(high)}{why}"
    if (top := upper_bound(name)) is not None and value > top:
        return f"{source} {value}: must be at most {top}{why}"
    if low is not None and not value >= low:
        if isinstance(low, float) and low == 0.0 and f.unit == SECONDS:
            return f"{source} {value}: must be a positive number of seconds"
        at_least = "0 or more" if low == 0 else f"at least {_num(low)}"
        return f"{source} {value}: must be {at_least}{why}"
    if f.low_open and low is not None and not value > low:
        return f"{source} {value}: must be " + ("a positive number of seconds" if low == 0 and f.unit == SECONDS
                                                else _row_range(f))
    return None


def upper_bound(name: str) -> int | float | None:
    """The largest value `bounds_problem` accepts for `name` (the row's `high`, else MAX_INDEX for a whole
    number: no count or step of a run goes beyond what its records hold); None when there is none but
    finiteness. Advice that suggests a value (elxpk/create/budget_checks.py) reads it here."""
    f = FIELDS[name]
    high = f.high
    return high if high is not None else (MAX_INDEX if f.type == "int" else None)


def bounds_text(name: str) -> str:
    """The bounds or choices of a setting as the docs say them: `>= 2`, `[0, 1)`, `a, b`; "" when none."""
    meta = FIELDS[name]
    if meta.choices:
        return ", ".join(f"`{c}`" for c in meta.choices)
    low, high = meta.low, meta.high
    left = "(" if meta.low_open else "["
    right = ")" if meta.high_open else "]"
    if low is not None and high is not None:
        return f"{left}{_num(low)}, {_num(high)}{right}"
    if low is not None:
        return f"> {_num(low)}" if meta.low_open else f">= {_num(low)}"
    return ""


def slices_waited_for(min_slice_count: int, num_slices: int) -> int:
    """The healthy slices each attempt waits for: every slice for ALL_SLICES (-1), else the count given.
    The one reading of "-1 = all slices"; what other values are allowed is cross_problems'."""
    return num_slices if min_slice_count == ALL_SLICES else min_slice_count


def cross_problems(num_slices: int, min_slice_count: int) -> list[str]:
    """elastic_min_slice_count against num_slices: -1 waits for all; 1..N-1 resizes. N itself is refused
    (it means "all", spelled -1), and so is anything outside."""
    k = min_slice_count
    if k == ALL_SLICES:
        return []
    if num_slices < 2:
        return [f"{said('elastic_min_slice_count')} {k}: use -1 (wait for the only slice); resizing needs "
                f"{said('num_slices')} 2 or more"]
    if not 1 <= k <= num_slices - 1:
        return [f"{said('elastic_min_slice_count')} {k}: use -1 (wait for all {num_slices} slices) or "
                f"1..{num_slices - 1} (resize onto the survivors)"]
    return []


def redundant_min_slice_count(min_slice_count: int, num_slices: int, elastic_slices: int) -> str:
    """The warning for k below N - E (1 <= k): redundant, not wrong. Pathways keeps the program alive only
    while at most E slices are lost, so every attempt that runs finds at least N - E healthy slices and a
    smaller k never takes effect. MaxText accepts it; so do the launcher and the trainer."""
    k, n, e = min_slice_count, num_slices, elastic_slices
    floor = n - e
    return (f"--elastic-min-slice-count {k}: below num_slices - elastic_slices = {floor}, so it never takes "
            f"effect: Pathways fails the program before fewer than {floor} slices remain (it tolerates "
            f"losing {e}), so every attempt finds at least {floor}; it is redundant, use "
            + (f"{floor}..{n - 1} or -1" if floor <= n - 1 else "-1") + " to say what happens")


def blank_problem(source: str, raw: str) -> str:
    """What every reader says of an empty or whitespace-only value (a trainer setting's flag or env var, a
    launcher row's, every elxpk command's raw check in elxpk/cli/arg_checks.py): a blank path would be the
    working directory, a blank name every object, a blank number no number."""
    return f"{source} {raw!r:.20}: empty (or only spaces); give a value or leave it unset"


def not_a_number(whole: bool, bounds: str = "", fix: str = "") -> str:
    """What every reader says of a value that is no number (a trainer setting's here, a launcher flag row's
    in elxpk/flag_rows.py): "not a whole number; give a whole number, at least 1 (the fix)"."""
    what = "a whole number" if whole else "a finite number"
    return f"not {what}; give {what}" + (f", {bounds}" if bounds else "") + (f" ({fix})" if fix else "")


def range_words(low: float | None, high: float | None, *, low_open: bool = False, high_open: bool = False,
                unit: str = "") -> str:
    """Bounds as the end of a sentence, in every reader's words: "0 or more", "at least 2", "from 0 to 255",
    "in [0, 1)", "more than 0s", "more than 0s, at most 7s"; "" when there are none."""
    if low is not None and low_open:
        return f"more than {_num(low)}{unit}" + ("" if high is None else f", at most {_num(high)}{unit}")
    if low is not None and high is not None:
        return f"in [{_num(low)}, {_num(high)})" if high_open else f"from {_num(low)} to {_num(high)}"
    if low is not None:
        return "0 or more" if low == 0 else f"at least {_num(low)}"
    return "" if high is None else f"at most {_num(high)}"


def _row_range(f: Setting) -> str:
    return range_words(f.low, f.high, low_open=f.low_open, high_open=f.high_open)


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def plain_number_text(text: str) -> bool:
    """Whether a number is written as a person types one: ASCII only, no `_` groups. Python's int() and
    float() also take other scripts' digits and underscores (`١٢` is 12, `1_0` is 10): a value that reads
    as a number only to Python is refused, wherever elxpk converts one."""
    return text.isascii() and "_" not in text


def convert_setting(f: Setting, raw: object) -> Any:
    kind = f.type
    if f.repeatable:
        return tuple(raw)  # type: ignore[arg-type]
    if isinstance(raw, bool) and kind == "bool":
        return raw
    text = str(raw).strip()
    if kind == "bool":
        if text.lower() in ("true", "1", "yes"):
            return True
        if text.lower() in ("false", "0", "no"):
            return False
        raise ValueError("use true or false")
    if kind == "int":
        if isinstance(raw, int) and not isinstance(raw, bool):
            return raw
        try:
            if not plain_number_text(text):
                raise ValueError(text)
            return int(text, 10)
        except ValueError:
            raise ValueError(not_a_number(True, _row_range(f), f.fix)) from None
    if kind in ("float", "float | None"):
        if kind == "float | None" and text.lower() in ("", "none", "never"):
            return None
        try:
            if not plain_number_text(text):
                raise ValueError(text)
            value = float(text)
            if not math.isfinite(value):
                raise ValueError(text)
        except ValueError:
            raise ValueError(not_a_number(False, _row_range(f), f.fix)) from None
        return value
    return text or str(raw)  # a blank value as given, so its refusal shows what was given
