"""Example-id accounting: every example must be consumed exactly once across the steps that count.

This is the data-loader bug detector: a loader that repeats a batch after a restore shows up as duplicate
ids (and its loss curve looks better than it is); one that skips ahead shows up as a gap.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from elxpk.columns import sorted_values
from elxpk_contract.records import Metric

_SHOWN = 5  # ranges listed per kind; the counts are always complete


@dataclass(frozen=True)
class ExampleAccount:
    steps: int  # steps that recorded an example range
    unique: int  # distinct example ids consumed
    duplicates: int  # extra consumptions: an id read k times adds k - 1
    gaps: int  # ids below the highest one consumed that no step read
    duplicate_ranges: tuple[tuple[int, int], ...]  # the first few, half-open
    gap_ranges: tuple[tuple[int, int], ...]
    missing_steps: tuple[int, ...]  # the first few steps below the last one with no record at all
    missing_count: int  # all of them

    @property
    def exactly_once(self) -> bool:
        return self.duplicates == 0 and self.gaps == 0

    def to_dict(self) -> dict:
        return {
            "steps": self.steps,
            "unique": self.unique,
            "duplicates": self.duplicates,
            "gaps": self.gaps,
            "duplicate_ranges": [list(r) for r in self.duplicate_ranges],
            "gap_ranges": [list(r) for r in self.gap_ranges],
            "missing_steps": list(self.missing_steps),
            "missing_count": self.missing_count,
        }


def _append(ranges: list[tuple[int, int]], lo: int, hi: int) -> None:
    if ranges and ranges[-1][1] == lo:
        ranges[-1] = (ranges[-1][0], hi)
    elif len(ranges) <= _SHOWN:  # one past those shown: a later range can only extend that one
        ranges.append((lo, hi))


def _missing(steps: Iterable[int]) -> tuple[tuple[int, ...], int]:
    """The first few absent steps below the last, and how many: walked gap by gap, so a stray record of
    step 10**11 costs one subtraction, not a range of 10**11."""
    shown: list[int] = []
    count, expected = 0, 0
    for step in steps:
        if step > expected:
            count += step - expected
            shown.extend(range(expected, min(step, expected + _SHOWN - len(shown))))
        expected = step + 1
    return tuple(shown[:_SHOWN]), count


def _ascending(values: array) -> array:
    return values if all(values[i] <= values[i + 1] for i in range(len(values) - 1)) else sorted_values(values)


def account(final_records: dict[int, Metric]) -> ExampleAccount:
    """`account_columns` of records by step (the steps that count)."""
    steps = sorted(final_records)
    return account_columns(steps, array("q", (final_records[s].examples[0] for s in steps)),
                           array("q", (final_records[s].examples[1] for s in steps)))


def account_columns(steps: Sequence[int], first: array, end: array) -> ExampleAccount:
    """Sweep the half-open ranges [first, end) of the steps that count (`steps` ascending, a range each);
    coverage 0 is a gap, coverage k > 1 duplicates. The range starts and ends are swept as two ascending
    columns (sorted a chunk at a time when a run's are not), never as a dict of every id boundary."""
    keep = [i for i in range(len(first)) if end[i] > first[i]] if any(
        e <= f for f, e in zip(first, end, strict=True)) else None
    if keep is not None:
        first, end = array("q", (first[i] for i in keep)), array("q", (end[i] for i in keep))
    starts, stops = _ascending(first), _ascending(end)
    duplicates = gaps = unique = 0
    dup_ranges: list[tuple[int, int]] = []
    gap_ranges: list[tuple[int, int]] = []
    coverage, prev = 0, 0  # example ids start at 0: anything before the first range is a gap
    i = j = 0
    n = len(starts)
    while j < n:  # every range ends after it starts: the ends run out last
        point = starts[i] if i < n and starts[i] < stops[j] else stops[j]
        if point > prev:
            width = point - prev
            if coverage == 0:
                gaps += width
                _append(gap_ranges, prev, point)
            else:
                unique += width
                if coverage > 1:
                    duplicates += (coverage - 1) * width
                    _append(dup_ranges, prev, point)
        while i < n and starts[i] == point:
            coverage += 1
            i += 1
        while j < n and stops[j] == point:
            coverage -= 1
            j += 1
        prev = max(prev, point)
    missing, missing_count = _missing(steps)
    return ExampleAccount(
        steps=n,
        unique=unique,
        duplicates=duplicates,
        gaps=gaps,
        duplicate_ranges=tuple(dup_ranges[:_SHOWN]),
        gap_ranges=tuple(gap_ranges[:_SHOWN]),
        missing_steps=missing,
        missing_count=missing_count,
    )
