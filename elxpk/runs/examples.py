"""Example-id accounting: every example must be consumed exactly once across the steps that count.

This is the data-loader bug detector: a loader that repeats a batch after a restore shows up as duplicate
ids (and its loss curve looks better than it is); one that skips ahead shows up as a gap.
"""

from __future__ import annotations

from dataclasses import dataclass

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
    else:
        ranges.append((lo, hi))


def _missing(steps: list[int]) -> tuple[tuple[int, ...], int]:
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


def account(final_records: dict[int, Metric]) -> ExampleAccount:
    """Sweep the half-open ranges of the steps that count; coverage 0 is a gap, coverage k > 1 duplicates."""
    ranges = [rec.examples for rec in final_records.values() if rec.examples[1] > rec.examples[0]]
    points: dict[int, int] = {}
    for lo, hi in ranges:
        points[lo] = points.get(lo, 0) + 1
        points[hi] = points.get(hi, 0) - 1
    duplicates = gaps = unique = 0
    dup_ranges: list[tuple[int, int]] = []
    gap_ranges: list[tuple[int, int]] = []
    coverage, prev = 0, 0  # example ids start at 0: anything before the first range is a gap
    for point in sorted(points):
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
        coverage += points[point]
        prev = max(prev, point)
    missing, missing_count = _missing(sorted(final_records))
    return ExampleAccount(
        steps=len(ranges),
        unique=unique,
        duplicates=duplicates,
        gaps=gaps,
        duplicate_ranges=tuple(dup_ranges[:_SHOWN]),
        gap_ranges=tuple(gap_ranges[:_SHOWN]),
        missing_steps=missing,
        missing_count=missing_count,
    )
