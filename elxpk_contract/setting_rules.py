"""The trainer settings table as the launcher reads it: each row's typed fields (name, type, default, help,
bounds, choices, ...: elxpk_contract/setting_row.py), the reading of a setting's value by its row's rule (the
one reader, elxpk_contract/value_rule.py), and `-1 = all slices`.

The table is declared once, as TrainerConfig in elxpk_contract/settings.py; its rows reach this module as
plain data, generated into elxpk_contract/settings_table.py (`python -m elxpk_contract.settings_build`;
tests/trainer/test_contract_docs.py fails while it is stale). So `workload create --dry-run` reads the
table without building the TrainerConfig dataclass (exec'ing its 40-field methods costs ~20M
instructions a start). elxpk_contract.settings re-exports every name here. Standard library only.
"""

from __future__ import annotations

from typing import Any

from elxpk_contract.setting_row import Setting
from elxpk_contract.settings_table import ROWS
from elxpk_contract.spelling import flag_name, said
from elxpk_contract.value_rule import (
    SECONDS,
    blank_problem,
    not_a_number,
    plain_number_text,
    range_words,
    read_value,
    shown_number,
    value_problem,
)

# Re-exported: the phrases every reader says and the spelling context are imported from here by the launcher.
__all__ = ["ALL_SLICES", "FIELDS", "LAUNCHER_DERIVED", "LAUNCHER_FLAG", "SECONDS", "Setting", "blank_problem",
           "bounds_problem", "bounds_text", "check_setting", "cross_problems", "default", "env_name", "exposed",
           "flag_name", "not_a_number", "plain_number_text", "range_words", "redundant_min_slice_count",
           "said", "setting", "slices_waited_for", "upper_bound"]

ALL_SLICES = -1  # elastic_min_slice_count's "every slice" (pause and resume), as MaxText spells it
# Who passes a setting besides the trainer's own flags and env (a row's `expose`):
LAUNCHER_FLAG = "launcher"  # `workload create` has a flag of the same name and renders ELXPK_<NAME>
LAUNCHER_DERIVED = "derived"  # `workload create` renders ELXPK_<NAME> from its own flags (see render)


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
    """The value of the setting `name` given as `raw` (text as typed, or a Python value), by its row's rule:
    (value, None) or (None, one line naming `source`, the flag as the command spells it by default). The
    launcher, `local run` and the trainer call this, so all three refuse the same values with the same line.
    """
    return read_value(FIELDS[name].rule, raw, source or said(name))


def bounds_problem(name: str, value: Any, source: str | None = None) -> str | None:
    """The bounds and choices of the table for a value already read (TrainerConfig's), as one message; None
    when `value` is within them."""
    return value_problem(FIELDS[name].rule, value, source or said(name))


def upper_bound(name: str) -> int | float | None:
    """The largest value `bounds_problem` accepts for `name` (the row's `high`, else MAX_INDEX for a whole
    number: no count or step of a run goes beyond what its records hold); None when there is none but
    finiteness. Advice that suggests a value (elxpk/create/budget_checks.py) reads it here."""
    rule = FIELDS[name].rule
    return rule.high if rule.high is not None else rule.cap


def bounds_text(name: str) -> str:
    """The bounds or choices of a setting as the docs say them: `>= 2`, `[0, 1)`, `a, b`; "" when none."""
    meta = FIELDS[name]
    if meta.choices:
        return ", ".join(f"`{c}`" for c in meta.choices)
    low, high = meta.low, meta.high
    left = "(" if meta.low_open else "["
    right = ")" if meta.high_open else "]"
    if low is not None and high is not None:
        return f"{left}{shown_number(low)}, {shown_number(high)}{right}"
    if low is not None:
        return f"> {shown_number(low)}" if meta.low_open else f">= {shown_number(low)}"
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
