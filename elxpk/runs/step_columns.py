"""metrics.jsonl held as columns: every executed step, in execution order, ~60 bytes a step.

`MetricColumns` is what `Run.metrics` is: a sequence of `Metric` (each built when it is asked for) over
one array per field, so report and compare hold a run of millions of steps in bounded memory
(elxpk/columns.py). A step's slices are an index into the run's few distinct slice sets; a file naming
more distinct sets than any run has (it changes them only when it resizes) is refused.

The loss is held as the float its float.hex() text denotes, and given back as float.hex() of it: the
trainer writes exactly that text, so a record reads back as written.
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Iterator, Sequence
from typing import overload

from elxpk.columns import last_of_each, repeated_keys
from elxpk_contract.record_fields import RecordError
from elxpk_contract.records import Metric

SLICE_SETS = 4096  # distinct slice sets in one run: a run changes its slices only when it resizes
SLICE_IDS = 1 << 18  # slice ids in all of them together: 64 sets of 4,096 slices


class MetricColumns(Sequence[Metric]):
    """The metric records of one run, one array per field (see the module's docstring)."""

    def __init__(self) -> None:
        self.step = array("q")
        self.loss = array("d")
        self.lr = array("d")
        self.step_time = array("d")
        self.first = array("q")  # examples [first, end)
        self.end = array("q")
        self.slice_set = array("H")
        self.time = array("d")
        self.slice_sets: list[tuple[int, ...]] = []
        self._slice_index: dict[tuple[int, ...], int] = {}
        self._slice_ids = 0
        self._last: tuple[array, bytearray] | None = None
        self._ascending_times: bool | None = None

    @classmethod
    def of(cls, records: Sequence[Metric]) -> MetricColumns:
        if isinstance(records, MetricColumns):
            return records
        columns = cls()
        for record in records:
            columns.append(record)
        return columns

    def append(self, m: Metric) -> None:
        index = self._slice_index.get(m.slices)
        if index is None:
            if len(self.slice_sets) >= SLICE_SETS or self._slice_ids + len(m.slices) > SLICE_IDS:
                raise RecordError(f"slices: more than {SLICE_SETS:,} different slice sets (or {SLICE_IDS:,} "
                                  f"slice ids) in one run; a run changes its slices only when it resizes")
            index = self._slice_index[m.slices] = len(self.slice_sets)
            self.slice_sets.append(m.slices)
            self._slice_ids += len(m.slices)
        self.step.append(m.step)
        self.loss.append(m.loss_value)
        self.lr.append(m.lr)
        self.step_time.append(m.step_time_s)
        self.first.append(m.examples[0])
        self.end.append(m.examples[1])
        self.slice_set.append(index)
        self.time.append(m.time)
        self._last = self._ascending_times = None

    def clear(self) -> None:
        self.__init__()  # type: ignore[misc]

    def __len__(self) -> int:
        return len(self.step)

    def record(self, i: int) -> Metric:
        return Metric(step=self.step[i], loss=self.loss[i].hex(), lr=self.lr[i], step_time_s=self.step_time[i],
                      examples=(self.first[i], self.end[i]), slices=self.slice_sets[self.slice_set[i]],
                      time=self.time[i])

    @overload
    def __getitem__(self, index: int) -> Metric: ...

    @overload
    def __getitem__(self, index: slice) -> list[Metric]: ...

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self.record(i) for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("metric record index out of range")
        return self.record(index)

    def __iter__(self) -> Iterator[Metric]:
        return (self.record(i) for i in range(len(self)))

    # ---- what report and compare ask of them --------------------------------------------------------

    def last_records(self) -> tuple[array, bytearray]:
        """(the index of the record that counts for each step, in ascending step order; a flag per record,
        1 for those). The record that counts is the last one written: a rewind re-executes and appends."""
        if self._last is None:
            self._last = last_of_each(self.step)
        return self._last

    def redone_steps(self) -> array:
        """Steps written more than once (redone after a restore), ascending."""
        return repeated_keys(self.step, self.last_records()[1])

    def max_slice(self) -> int | None:
        seen = [s for index in set(self.slice_set) for s in self.slice_sets[index]]
        return max(seen) if seen else None

    def _times_ascending(self) -> bool:
        if self._ascending_times is None:
            t = self.time
            self._ascending_times = all(t[i] <= t[i + 1] for i in range(len(t) - 1))
        return self._ascending_times

    def first_index(self, since: float, *, until: float = float("inf"), above_step: int | None = None) -> int | None:
        """The first record in file order with since <= time < until (and step > above_step when given)."""
        t, steps = self.time, self.step
        if self._times_ascending():
            for i in range(bisect.bisect_left(t, since), len(t)):
                if t[i] >= until:
                    return None
                if above_step is None or steps[i] > above_step:
                    return i
            return None
        for i, at in enumerate(t):
            if since <= at < until and (above_step is None or steps[i] > above_step):
                return i
        return None

    def between(self, since: float, until: float) -> tuple[float, int] | None:
        """(the latest time, the highest step) of the records with since <= time < until; None if none."""
        t, steps = self.time, self.step
        if self._times_ascending():
            lo, hi = bisect.bisect_left(t, since), bisect.bisect_left(t, until)
            return (t[hi - 1], max(steps[lo:hi])) if hi > lo else None
        inside = [i for i, at in enumerate(t) if since <= at < until]
        return (max(t[i] for i in inside), max(steps[i] for i in inside)) if inside else None
