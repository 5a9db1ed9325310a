"""How the command being read spells its flags: the one spelling context every message reads.

A message names a quantity as the user typed it: `python -m trainer`'s `--num-slices`, `elxpk local run`'s
`--kill-slice` for the trainer's --fault and `--trainer-arg=--d-model` for a setting it has no flag of, a
manifest's `ELXPK_STEPS` in `workload validate`, gcluster's `--restarts` for --max-restarts in a gcluster
`workload create` (elxpk/create/dialect.py decides that one). The command sets its `Spelling` once, at its
entry, for the block that reads and checks its flags (`spoken_as`); `said(name)` is then the flag of the
row or setting `name` in this command.

One command a process, so a module value, not a ContextVar: the trainer's threads (data, watchdog, orbax)
build messages too, and a ContextVar set in the main thread is not seen by a thread started before it was
set (nor by one a ThreadPoolExecutor made earlier). Standard library only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import NamedTuple


def flag_name(name: str) -> str:
    """The plain flag of the row or setting `name`: --NAME with `_` as `-` (the trainer's own command line)."""
    return "--" + name.replace("_", "-")


class Spelling(NamedTuple):
    """How one command spells its rows where that is not the plain --NAME: `rows` by name (gcluster's
    --restarts), every other name by `namer` (local run's --trainer-arg=--NAME, a manifest's env var)."""

    rows: Mapping[str, str] = {}  # a row's name -> its spelling in this command
    asked: Mapping[str, str] = {}  # a required row's name -> the line that asks for it here ("": asked already)
    implied: frozenset[str] = frozenset()  # rows the dialect set and the user did not type (gcluster's --no-pathways)
    namer: Callable[[str], str] = flag_name  # every name `rows` does not hold -> its flag

    def said(self, name: str) -> str:
        return self.rows.get(name) or self.namer(name)


PLAIN = Spelling()  # every name as --NAME: the trainer's own command line, and any command that sets none
_current = PLAIN


def current() -> Spelling:
    """The spelling of the command being read (PLAIN outside any `spoken_as`)."""
    return _current


def said(name: str) -> str:
    """The flag of the row or setting `name` in a message: as the command the user typed takes it."""
    return _current.said(name)


def typed(name: str) -> bool:
    """Whether the user may have typed the row `name`: False where the command's dialect set it (a line
    telling the user to drop it would name a flag they never typed)."""
    return name not in _current.implied


@contextmanager
def spoken_as(spelling: Spelling) -> Iterator[None]:
    """Within the block, every message names a row or setting as `spelling` says (the command's)."""
    global _current
    before, _current = _current, spelling
    try:
        yield
    finally:
        _current = before
