"""The row type of the trainer settings table: one setting's name, type, default and what is known of it,
each a typed field (as MaxText's configs/types.py types its settings), read as `row.low`, never by a key.

TrainerConfig (elxpk_contract/settings.py) declares the rows; elxpk_contract/settings_table.py holds them as
generated `Setting(...)` lines, which elxpk_contract/setting_rules.py reads without building the dataclass.
Standard library only: every `workload create --dry-run` reads it.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from elxpk_contract.limits import MAX_INDEX
from elxpk_contract.value_rule import BOOL, FLOAT, INT, LIST, TEXT, ValueRule


class Setting(NamedTuple):
    """One setting. `type` is the annotation as written in TrainerConfig ("int", "float | None");
    `low`/`high` bound a number (inclusive; `low_open`/`high_open` exclude the bound itself); `fix` ends a
    bounds message (for text: what a blank value should have been); `repeatable`: a flag given once per
    value (a tuple; its env var is comma-separated); `expose`: who passes it besides the trainer's own flag
    and env (setting_rules.LAUNCHER_FLAG, LAUNCHER_DERIVED, None); `derived_from`: the launcher flags a
    LAUNCHER_DERIVED setting is rendered from; `internal`: a value the trainer resolves itself (no flag, no
    env var, kept in run.json); `unit`: what a number counts (setting_rules.SECONDS); `resolved_default`:
    what the docs show as the default of a None the trainer fills in from other settings."""

    name: str
    type: str
    default: Any
    help: str
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    repeatable: bool = False
    choices: tuple[str, ...] = ()
    maxtext: str | None = None
    expose: str | None = None
    fix: str = ""
    derived_from: str = ""
    internal: bool = False
    unit: str = ""
    resolved_default: str = ""

    def __repr__(self) -> str:
        return f"Setting({self.name!r})"

    @property
    def rule(self) -> ValueRule:
        """What a value of this setting may be, as the one reader reads it (elxpk_contract/value_rule.py): the
        trainer's reading, a whole number stopping at MAX_INDEX (no count or step of a run goes beyond what
        its records hold)."""
        kind = LIST if self.repeatable else {"int": INT, "bool": BOOL, "float": FLOAT, "float | None": FLOAT}.get(
            self.type, TEXT)
        cap = MAX_INDEX if kind == INT and self.high is None else None
        return ValueRule(kind, self.low, self.high, self.low_open, self.high_open, self.choices, self.fix, self.unit,
                         cap, never=self.type == "float | None", trainer=True)

    def source_text(self) -> str:
        """The row as a `Setting(...)` call: the positional fields, then each keyword that is not its
        default (what elxpk_contract/settings_build.py writes)."""
        head = [repr(self.name), repr(self.type), repr(self.default), f"help={self.help!r}"]
        rest = [f"{key}={value!r}" for key, value in zip(self._fields[4:], self[4:], strict=True)
                if value != self._field_defaults[key]]
        return f"Setting({', '.join(head + rest)})"
