"""JSON-lines reading that survives a writer killed mid-line, and refuses anything else that is damaged.

A SIGKILLed trainer can leave a partial last line; a restarted writer may then append its first record to
that partial line. Both cases keep every complete record and count the damage instead of failing. Any
other line that is not JSON, and a file that is not UTF-8 text at all, is a `JsonLinesError`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from elxpk import bounded_read


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


def parse_lines(text: str, *, strict: bool = False) -> JsonLines:
    """Every complete record. With `strict`, a line that is neither JSON, nor a torn record followed by a
    complete one, nor a torn last line, raises JsonLinesError; so does a line that is not an object."""
    records: list[dict] = []
    numbers: list[int] = []
    damaged = 0
    lines = text.split("\n")
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            damaged += 1
            obj = _salvage(line)
            if obj is None and strict and number != len(lines):  # only the last line may be torn for good
                raise JsonLinesError(f"line {number} is not JSON: {line[:60]!r}") from None
        except RecursionError:
            raise JsonLinesError(f"line {number} is nested too deeply to be a record") from None
        if isinstance(obj, dict):
            records.append(obj)
            numbers.append(number)
        elif obj is not None and strict:
            raise JsonLinesError(f"line {number} is not a JSON object: {line[:60]!r}")
    return JsonLines(tuple(records), tuple(numbers), damaged)


def decode_text(data: bytes) -> str:
    """UTF-8 text of a JSON-lines file; ValueError (bounded_read.ReadRefused) for a binary or non-UTF-8 one."""
    return bounded_read.decode_text(data, "JSON lines")


def read_jsonl(path: Path, *, limit: int | None = None) -> JsonLines:
    """All complete records of `path`; a missing file reads as empty. Raises JsonLinesError for a file that
    is not UTF-8 text or holds a line that is not a torn record."""
    try:
        text = decode_text(bounded_read.read_limited(path, limit=limit or bounded_read.RUN_RECORD_BYTES))
    except FileNotFoundError:
        return JsonLines((), (), 0)
    except bounded_read.ReadRefused as exc:
        raise JsonLinesError(str(exc)) from None
    return parse_lines(text, strict=True)
