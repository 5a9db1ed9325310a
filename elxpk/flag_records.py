"""Typed records of the flag tables: a command's flags read into one object with an attribute per row.

`flag_rows.read_all` reads every row of a command (kind, bounds, choices, default) into a dict; a command
reads that dict through a record class instead (`read_record`), one per table: `CreateFlags`,
`LocalFlags`, `PlanFlags`, `KillSliceFlags`... Each declares one typed attribute per row, in the rows'
order, so a renamed or retyped row fails the type check (mypy checks every `flags.slice`), and the record
itself refuses rows it does not declare at its first read (TypeError, a programming error).
tests/test_flag_records.py holds every record to its rows (names, order, and a type the row's kind reads
as).

Not a dataclass: defining a frozen dataclass of `workload create`'s fifty rows costs milliseconds on every
start (the exec of its generated methods), and `workload create --dry-run` has a start-up budget; a plain
class with annotations costs nothing, and its reads are checked alike. Ground of the stages, like
elxpk/flag_rows.py: standard library and elxpk.flag_rows only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from elxpk.flag_rows import Flag, read_all

R = TypeVar("R", bound="Record")


class Record:
    """A table's values, read-only: a subclass declares one annotated attribute per row, in the rows'
    order (`fields`)."""

    def __init__(self, values: Mapping[str, Any]) -> None:
        names = self.fields()
        if tuple(values) != names:  # the table changed and its record did not
            raise TypeError(f"{type(self).__name__} declares {names}, but its rows are {tuple(values)}")
        self.__dict__.update(values)

    @classmethod
    def fields(cls) -> tuple[str, ...]:
        """The attributes a subclass declares, in order (its own annotations, not a base's)."""
        return tuple(vars(cls).get("__annotations__", {}))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is read-only")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in vars(self).items())})"

    def as_dict(self) -> dict[str, Any]:
        """name -> value, in the rows' order (for the few readers that take a table's values whole)."""
        return dict(vars(self))


_DEFAULT = object()  # read_record's `refused` when not given: as read_all's


def read_record(record: type[R], rows: tuple[Flag, ...], given: Mapping[str, Any], *,
                refused: Any = _DEFAULT) -> tuple[R, list[str]]:
    """`rows`' values from `given` as a `record`, and one line per refused value (flag_rows.read_all, the one
    reader of every command's flags; `refused` as there)."""
    values, problems = read_all(rows, given) if refused is _DEFAULT else read_all(rows, given, refused=refused)
    return record(values), problems
