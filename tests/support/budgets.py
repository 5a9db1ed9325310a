"""Time budgets per test, as docs/testing.md states them, and the tests of a run that went past theirs.

The budgets live in one table of docs/testing.md (rows `| <selector> | <seconds> s |` after the heading
`## Time budgets`); this module only reads it, so the figure a reader sees is the figure the run checks.
A selector is a path prefix (`tests/realcluster/`), a marker (`-m slow`) or `*` (any other test); the first
row that matches a test is its budget. Going past it is reported by name at the end of the run, not failed:
the machine's load decides a duration as much as the test does.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

HEADING = "## Time budgets"
_ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|\s*(\d+(?:\.\d+)?)\s*s\s*\|")


@dataclass(frozen=True)
class Budget:
    selector: str
    seconds: float

    def matches(self, nodeid: str, markers: Iterable[str]) -> bool:
        if self.selector == "*":
            return True
        if self.selector.startswith("-m "):
            return self.selector[3:].strip() in markers
        return nodeid.startswith(self.selector)


def read_budgets(doc: Path) -> list[Budget]:
    """The rows of the budget table, in order ([] when the section is missing: nothing is reported)."""
    try:
        text = doc.read_text(encoding="utf-8")
    except OSError:
        return []
    _, found, section = text.partition(HEADING + "\n")
    if not found:
        return []
    budgets = []
    for line in section.splitlines():
        if line.startswith("## "):
            break
        row = _ROW.match(line)
        if row:
            budgets.append(Budget(row.group(1), float(row.group(2))))
    return budgets


def budget_of(budgets: list[Budget], nodeid: str, markers: Iterable[str]) -> Budget | None:
    marks = set(markers)
    return next((b for b in budgets if b.matches(nodeid, marks)), None)


def over_budget(budgets: list[Budget], durations: dict[str, tuple[float, frozenset[str]]]) -> list[str]:
    """One line per test whose setup + call + teardown took longer than its budget, slowest first."""
    lines = []
    for nodeid, (seconds, markers) in sorted(durations.items(), key=lambda item: -item[1][0]):
        budget = budget_of(budgets, nodeid, markers)
        if budget is not None and seconds > budget.seconds:
            lines.append(f"{seconds:.1f}s {nodeid} (budget {budget.seconds:g} s for `{budget.selector}`)")
    return lines
