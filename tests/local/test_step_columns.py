"""The columns report and compare hold a run in (elxpk/columns.py, elxpk/runs/step_columns.py) against the
per-step dicts they replaced: for any records, the same record per step, the same redone steps, the same
example account, the same Metric records back."""

from __future__ import annotations

from array import array
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elxpk import columns
from elxpk.columns import Column, last_of_each, repeated_keys, sorted_values
from elxpk.runs.examples import _SHOWN, ExampleAccount, account_columns
from elxpk.runs.step_columns import SLICE_SETS, MetricColumns
from elxpk_contract.record_fields import RecordError
from elxpk_contract.records import Metric

PROPERTY = settings(max_examples=300, derandomize=True, database=None, deadline=timedelta(seconds=10))
# Dense steps (a run with rewinds) and spread-out ones (a stray step 10**11: sorted, never indexed by step).
STEPS = st.lists(st.integers(0, 40), max_size=60) | st.lists(st.integers(0, 10**11), max_size=30)


def dict_account(ranges: dict[int, tuple[int, int]]) -> ExampleAccount:
    """The sweep report and compare ran before the columns: a dict of every range boundary."""
    points: dict[int, int] = {}
    kept = [r for r in ranges.values() if r[1] > r[0]]
    for lo, hi in kept:
        points[lo] = points.get(lo, 0) + 1
        points[hi] = points.get(hi, 0) - 1
    duplicates = gaps = unique = 0
    dups: list[tuple[int, int]] = []
    holes: list[tuple[int, int]] = []

    def add(out: list[tuple[int, int]], lo: int, hi: int) -> None:
        if out and out[-1][1] == lo:
            out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))

    coverage, prev = 0, 0
    for point in sorted(points):
        if point > prev:
            if coverage == 0:
                gaps += point - prev
                add(holes, prev, point)
            else:
                unique += point - prev
                if coverage > 1:
                    duplicates += (coverage - 1) * (point - prev)
                    add(dups, prev, point)
        coverage += points[point]
        prev = max(prev, point)
    missing, count, expected = [], 0, 0
    for step in sorted(ranges):
        missing.extend(range(expected, min(step, expected + _SHOWN)))
        count += step - expected
        expected = step + 1
    return ExampleAccount(len(kept), unique, duplicates, gaps, tuple(dups[:_SHOWN]), tuple(holes[:_SHOWN]),
                          tuple(missing[:_SHOWN]), count)


@PROPERTY
@given(keys=STEPS, chunked=st.booleans())
def test_the_last_record_of_each_step_is_the_dicts(keys, chunked, monkeypatch_chunk):
    monkeypatch_chunk(3 if chunked else 1 << 16)
    last: dict[int, int] = {}
    for i, key in enumerate(keys):
        last[key] = i
    order, flags = last_of_each(array("q", keys))
    assert list(order) == [last[k] for k in sorted(last)]
    assert [i for i, f in enumerate(flags) if f] == sorted(last.values())
    redone = sorted({k for i, k in enumerate(keys) if last[k] != i})
    assert list(repeated_keys(array("q", keys), flags)) == redone
    assert list(sorted_values(array("q", keys))) == sorted(keys)


@PROPERTY
@given(records=st.lists(st.tuples(st.integers(0, 12), st.integers(0, 60), st.integers(0, 6)), max_size=40) |
       st.lists(st.tuples(st.integers(0, 10**11), st.integers(0, 10**12), st.integers(0, 10**6)), max_size=12),
       chunked=st.booleans())
def test_the_example_account_is_the_dict_sweeps(records, chunked, monkeypatch_chunk):
    """Ranges in any order, overlapping, empty, with gaps; steps with holes (missing steps)."""
    monkeypatch_chunk(3 if chunked else 1 << 16)
    by_step = {step: (first, first + width) for step, first, width in records}
    steps = sorted(by_step)
    got = account_columns(steps, array("q", (by_step[s][0] for s in steps)), array("q", (by_step[s][1] for s in steps)))
    assert got == dict_account(by_step)


@pytest.fixture(scope="module")
def monkeypatch_chunk():
    """Chunks of 3 values: the chunked sort and its merge on lists of a few values."""
    saved = columns._CHUNK

    def use(size: int) -> None:
        columns._CHUNK = size

    yield use
    columns._CHUNK = saved


METRICS = st.builds(
    Metric, step=st.integers(0, 2**62), loss=st.floats(width=32).map(float.hex), lr=st.floats(allow_nan=False),
    step_time_s=st.floats(0, 1e6), examples=st.tuples(st.integers(0, 2**40), st.integers(0, 2**40)).map(sorted).map(tuple),
    slices=st.lists(st.integers(0, 64), max_size=4).map(tuple), time=st.floats(0, 2e9))


@PROPERTY
@given(st.lists(METRICS, max_size=20))
def test_the_columns_give_back_the_records_written(records):
    held = MetricColumns.of(records)
    assert len(held) == len(records)
    for got, want in zip(held, records, strict=True):
        assert got.to_json() == want.to_json() or (want.loss == "nan" and got.loss == "nan")
    assert held[-1:] == records[-1:] if records else held[:] == []


def test_a_run_naming_more_slice_sets_than_any_run_has_is_refused():
    held = MetricColumns()
    metric = Metric(step=0, loss="0x1.0p+0", lr=0.0, step_time_s=0.0, examples=(0, 0), slices=(), time=0.0)
    for i in range(SLICE_SETS):
        held.append(Metric(**{**metric.to_json(), "examples": (0, 0), "slices": (i,)}))
    with pytest.raises(RecordError, match=f"more than {SLICE_SETS:,} different slice sets"):
        held.append(Metric(**{**metric.to_json(), "examples": (0, 0), "slices": (SLICE_SETS,)}))


def test_a_column_equals_the_tuple_it_replaced():
    col = Column(array("d", [1.0, float("nan"), 2.5]))
    assert col[0] == 1.0 and col[1:] != (2.5,) and col[2:] == (2.5,)
    assert col == (1.0, float("nan"), 2.5) and col != (1.0, 2.0, 2.5) and col != (1.0,)
    assert (1.0, float("nan"), 2.5) == col
