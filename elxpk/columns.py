"""Per-step data held as compact columns (the standard library's `array`), for runs of millions of steps.

A run of 2,000,000 steps held as one Python object per step costs ~450 bytes a step (~900 MB); held as
columns of machine numbers it costs ~60 bytes a step. `report` and `compare` (elxpk/runs/) and the MaxText
metrics reader (elxpk/maxtext/metrics.py) keep their per-step data here. Standard library only: the
launcher declares no numpy.

- `Column`: a read-only sequence over an array that compares equal to a tuple of the same values;
- `last_of_each(keys)`: the last record of each key (the record of a step that counts), in key order,
  without a dict of every step;
- `sorted_values(values)` / `sorted_indices(keys)`: a sort whose transient Python objects are bounded by a
  chunk, not by the column's length.
"""

from __future__ import annotations

import heapq
from array import array
from collections.abc import Iterator, Sequence
from typing import Any, overload

INDEX = "i"  # record indices: a run record holds far fewer than 2**31 records (bounded_read caps it)
_CHUNK = 1 << 16  # values sorted as Python objects at a time


class Column(Sequence):
    """A read-only view of an array: indexing gives a value, slicing a tuple, `==` compares values with any
    sequence (so a column equals the tuple it replaced)."""

    __slots__ = ("values",)

    def __init__(self, values: array):
        self.values = values

    def __len__(self) -> int:
        return len(self.values)

    @overload
    def __getitem__(self, index: int) -> Any: ...

    @overload
    def __getitem__(self, index: slice) -> tuple: ...

    def __getitem__(self, index):
        if isinstance(index, slice):
            return tuple(self.values[index])
        return self.values[index]

    def __iter__(self) -> Iterator[Any]:
        return iter(self.values)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Column):
            other = other.values
        if not isinstance(other, (Sequence, array)) or isinstance(other, (str, bytes)):
            return NotImplemented
        return len(self.values) == len(other) and all(map(same, self.values, other))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        shown = ", ".join(map(repr, self.values[:6]))
        return f"Column([{shown}{', ...' if len(self.values) > 6 else ''}], {len(self.values)} values)"


def same(a: object, b: object) -> bool:
    """Equal values, NaN equal to NaN: what a tuple of floats from one parse compared as (json gives every NaN
    as one shared object, and a tuple compares identity first), for values a column stores as numbers."""
    return a == b or (a != a and b != b)


def sorted_indices(keys: Sequence[Any]) -> Iterator[int]:
    """The indices of `keys` in ascending key order, equal keys in index order (a stable sort), sorting a
    chunk at a time and merging: the Python objects alive at once are bounded by a chunk."""
    chunks = [array(INDEX, sorted(range(start, min(len(keys), start + _CHUNK)), key=keys.__getitem__))
              for start in range(0, len(keys), _CHUNK)]
    if len(chunks) == 1:
        return iter(chunks[0])
    return heapq.merge(*chunks, key=keys.__getitem__)  # ties: the earlier chunk first, so still stable


def sorted_values(values: array) -> array:
    """A sorted copy of `values` (the same typecode), built a chunk at a time (`sorted_indices`)."""
    if len(values) <= _CHUNK:
        return array(values.typecode, sorted(values))
    chunks = [array(values.typecode, sorted(values[start:start + _CHUNK])) for start in range(0, len(values), _CHUNK)]
    return array(values.typecode, heapq.merge(*chunks))


def last_of_each(keys: array) -> tuple[array, bytearray]:
    """For records in execution order with `keys` (steps): the index of the last record of each key, in
    ascending key order, and a flag per record (1: it is the last of its key).

    Steps are dense (0..N, some redone): an index per step value is a few bytes a record. A run whose steps
    are spread out (a stray step 10**11) is sorted instead (`sorted_indices`), never indexed by step."""
    n = len(keys)
    flags = bytearray(n)
    if not n:
        return array(INDEX), flags
    low, high = min(keys), max(keys)
    if high - low <= 2 * n + 1024:
        where = array(INDEX, [-1]) * (high - low + 1)
        for i, key in enumerate(keys):
            where[key - low] = i  # a later record of the step replaces an earlier one
        order = array(INDEX, (i for i in where if i >= 0))
        del where
    else:
        order = array(INDEX)
        previous, last = None, -1
        for i in sorted_indices(keys):
            if keys[i] != previous and last >= 0:
                order.append(last)
            previous, last = keys[i], i
        order.append(last)
    for i in order:
        flags[i] = 1
    return order, flags


def repeated_keys(keys: array, flags: bytearray) -> array:
    """The keys that more than one record has (those with a record whose flag is 0), ascending, each once."""
    redone = sorted_values(array(keys.typecode, (k for k, last in zip(keys, flags, strict=True) if not last)))
    out = array(keys.typecode)
    for key in redone:
        if not out or out[-1] != key:
            out.append(key)
    return out
