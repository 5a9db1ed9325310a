"""JSON-lines reading that survives a writer killed mid-line, and refuses anything else that is damaged.

A SIGKILLed trainer can leave a partial last line; a restarted writer may then append its first record to
that partial line. Both cases keep every complete record and count the damage instead of failing. Any
other line that is not JSON, and a file that is not UTF-8 text at all, is a `JsonLinesError`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar, overload

from elxpk import bounded_read
from elxpk_contract.record_fields import RecordError


class JsonLinesError(ValueError):
    """The file is not JSON lines; the message says where (one line)."""


@dataclass(frozen=True)
class JsonLines:
    records: tuple[dict, ...]
    line_numbers: tuple[int, ...]  # 1-based line of each record, for error messages
    damaged_lines: int  # lines that held a torn record (its complete part, if any, was kept)


def _salvage(line: str) -> dict | None:
    """The complete record at the end of a line that starts with a torn one, if there is one."""
    decoder = json.JSONDecoder()
    start = line.find("{", 1)
    while start != -1:
        try:
            obj, end = decoder.raw_decode(line, start)
        except (ValueError, RecursionError):
            obj, end = None, -1
        if isinstance(obj, dict) and line[end:].strip() == "":
            return obj
        start = line.find("{", start + 1)
    return None


def _line_object(number: int, line: str, last: bool, strict: bool) -> tuple[dict | None, bool]:
    """The record on one line (None for a blank or a torn one), and whether the line was damaged. With
    `strict`, a line that is neither JSON, nor a torn record followed by a complete one, nor the torn last
    piece of the file, raises JsonLinesError; so does a line that is not an object."""
    if not line.strip():
        return None, False
    damaged = False
    try:
        obj = json.loads(line)
    except ValueError:
        damaged = True
        obj = _salvage(line)
        if obj is None and strict and not last:  # only the last line may be torn for good
            raise JsonLinesError(f"line {number} is not JSON: {line[:60]!r}") from None
    except RecursionError:
        raise JsonLinesError(f"line {number} is nested too deeply to be a record") from None
    if isinstance(obj, dict):
        return obj, damaged
    if obj is not None and strict:
        raise JsonLinesError(f"line {number} is not a JSON object: {line[:60]!r}")
    return None, damaged


def parse_lines(text: str, *, strict: bool = False) -> JsonLines:
    """Every complete record of `text` (see `_line_object` for `strict`)."""
    records: list[dict] = []
    numbers: list[int] = []
    damaged = 0
    lines = text.split("\n")
    for number, line in enumerate(lines, 1):
        obj, torn = _line_object(number, line, number == len(lines), strict)
        damaged += torn
        if obj is not None:
            records.append(obj)
            numbers.append(number)
    return JsonLines(tuple(records), tuple(numbers), damaged)


def decode_text(data: bytes) -> str:
    """UTF-8 text of a JSON-lines file; ValueError (bounded_read.ReadRefused) for a binary or non-UTF-8 one."""
    return bounded_read.decode_text(data, "JSON lines")


class RecordLineError(ValueError):
    """A line is JSON but not the record it should be: 'line N: why' (one line)."""


T = TypeVar("T")
T_contra = TypeVar("T_contra", contravariant=True)


class Collector(Protocol[T_contra]):
    """Where `read_records` puts the records: a list, or columns (elxpk/runs/step_columns.py)."""

    def append(self, record: T_contra, /) -> None: ...

    def clear(self) -> None: ...


C = TypeVar("C", bound=Collector)


@overload
def read_records(path: Path, parse: Callable[[dict], T], *, limit: int | None = None,
                 max_records: int | None = None, into: None = None) -> tuple[list[T], int]: ...


@overload
def read_records(path: Path, parse: Callable[[dict], T], *, limit: int | None = None,
                 max_records: int | None = None, into: C) -> tuple[C, int]: ...


def read_records(path, parse, *, limit=None, max_records=None, into=None):
    """Every complete record of `path` as parsed by `parse` (which raises RecordError), appended to `into`
    (a new list by default), and the number of torn lines; a missing file reads as empty. The file is read
    as a stream: one line and its decoded dict at a time, only the parsed records kept. Raises
    JsonLinesError for a file that is not UTF-8 text, holds more lines than `max_records`, or holds a line
    that is not JSON (first, wherever it is: as when the whole file was decoded before any record was
    parsed), else RecordLineError for the first record of the wrong shape (or one `into` refuses)."""
    most = max_records or bounded_read.RUN_RECORDS
    lines = bounded_read.read_text_lines(path, limit=limit or bounded_read.RUN_RECORD_BYTES,
                                         line_limit=bounded_read.RECORD_LINE_BYTES, expected="JSON lines",
                                         max_lines=most)
    try:
        return records_of_lines(lines, parse, into=[] if into is None else into)
    except FileNotFoundError:
        return ([] if into is None else into), 0
    except bounded_read.ReadRefused as exc:
        raise JsonLinesError(str(exc)) from None


def records_of_lines(lines: Iterable[tuple[int, str, bool]], parse: Callable[[dict], T], *, into: C
                     ) -> tuple[C, int]:
    """`read_records` over (number, line, last) lines from any source (a file, or a run's chunks one after
    another, elxpk/runs/chunked_run.py): the records into `into`, and the number of torn lines."""
    damaged = 0
    wrong: str | None = None  # the first record of the wrong shape; a later line that is not JSON wins
    for number, line, last in lines:
        obj, torn = _line_object(number, line, last, True)
        damaged += torn
        if obj is None or wrong is not None:
            continue
        try:
            into.append(parse(obj))
        except RecordError as exc:
            wrong = f"line {number}: {exc}"
            into.clear()
    if wrong is not None:
        raise RecordLineError(wrong)
    return into, damaged
