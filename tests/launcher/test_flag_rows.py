"""Reading one flag's value with its row (elxpk/flag_rows.py `Flag.read`), for every row of `local run`'s and
`plan`'s tables: whatever is typed, a value within the row's bounds or one line naming the flag, never a
traceback."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elxpk import flag_rows
from elxpk.local import flags as local_table
from elxpk.plan import flags as plan_table

ROWS = [*local_table.FLAGS, *plan_table.FLAGS]
TYPED = st.one_of(st.text(max_size=30), st.integers(), st.floats(allow_nan=True, allow_infinity=True),
                  st.from_regex(r"-?[0-9]{1,8}(\.[0-9]{1,3})?(ms|s|m|h|d|w|GiB|MB)?", fullmatch=True))


@pytest.mark.parametrize("row", [r for r in ROWS if r.kind not in (flag_rows.BOOL, flag_rows.LIST)],
                         ids=lambda r: r.name)
@settings(max_examples=150, deadline=None)
@given(raw=TYPED)
def test_a_value_is_within_the_rows_bounds_or_one_line_naming_the_flag(row, raw):
    value, problem = row.read(raw)
    if problem is not None:
        assert "\n" not in problem and problem.startswith(row.flag + " ")
        assert value == row.read(None)[0]  # a refused value falls back to the default, checked the same way
        return
    if row.kind == flag_rows.TEXT:
        assert value is raw and (not row.choices or value in row.choices)
        return
    assert isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if row.kind == flag_rows.INT:
        assert isinstance(value, int)
    assert row.low is None or value >= row.low
    assert row.high is None or value <= row.high


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.name)
def test_each_rows_default_reads_without_a_problem(row):
    assert row.read(None)[1] is None
    if row.default is not None:
        assert row.read(row.default) == row.read(None)


@pytest.mark.parametrize("row", [r for r in ROWS if r.kind in (flag_rows.INT, flag_rows.FLOAT, flag_rows.DURATION,
                                                               flag_rows.SIZE)], ids=lambda r: r.name)
@pytest.mark.parametrize("odd", ["١٢", "1_0", "٠.٥", "１２", "nan", "-inf", "1e400"])
def test_a_number_only_python_reads_is_refused(row, odd):
    """Other scripts' digits, `_` groups and non-finite numbers: one line naming the flag."""
    value, problem = row.read(odd)
    assert problem is not None and problem.startswith(row.flag + " ") and "\n" not in problem
