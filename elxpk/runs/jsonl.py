"""JSON-lines reading that survives a writer killed mid-line.

A SIGKILLed trainer can leave a partial last line; a restarted writer may then append its first record to
that partial line. Both cases keep every complete record and count the damage instead of failing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class JsonLines:
    records: tuple[dict, ...]
    damaged_lines: int  # lines that held a torn record (its complete part, if any, was kept)


def _salvage(line: str) -> dict | None:
    """The complete record at the end of a line that starts with a torn one, if there is one."""
    decoder = json.JSONDecoder()
    start = line.find("{", 1)
    while start != -1:
        try:
            obj, end = decoder.raw_decode(line, start)
        except ValueError:
            obj, end = None, -1
        if isinstance(obj, dict) and line[end:].strip() == "":
            return obj
        start = line.find("{", start + 1)
    return None


def parse_lines(text: str) -> JsonLines:
    records: list[dict] = []
    damaged = 0
    for line in text.split("\n"):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            damaged += 1
            obj = _salvage(line)
        if isinstance(obj, dict):
            records.append(obj)
    return JsonLines(tuple(records), damaged)


def read_jsonl(path: Path) -> JsonLines:
    """All complete records of `path`; a missing file reads as empty."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return JsonLines((), 0)
    return parse_lines(text)
