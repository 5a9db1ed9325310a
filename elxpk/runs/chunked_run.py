"""A run whose records are chunks (`--run-dir gs://...`, elxpk_storage/run_records.py), read as one run.

Every chunk of a kind is listed once, ordered by (writer generation, process, sequence number), and read
`CAT_BATCH` at a time: its lines are handed on one chunk at a time to the same line reader as a local
file's (elxpk/json_lines.py), so `report` of a long run holds the columns, not the chunks. The caps of a
local file hold for the run as a whole (lines, bytes, the length of one line). A chunk is uploaded whole,
so a torn line is only the end of a damaged object: tolerated and counted, as a killed writer's last line
is in a file. Line numbers in messages count the run's lines in order, across chunks.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from elxpk import bounded_read
from elxpk.bounded_read import RUN_JSON_BYTES, ReadRefused, decode_text
from elxpk.errors import ElxpkError, UsageError
from elxpk.json_lines import JsonLinesError, RecordLineError, records_of_lines
from elxpk_storage.run_records import (
    Chunk,
    listing,
    newest_run_json,
    ordered_chunks,
    read_chunks,
    read_object,
    store,
)


def chunk_lines(fs: Any, chunks: list[Chunk], *, max_lines: int) -> Iterator[tuple[int, str, bool]]:
    """(number, line, last piece of its chunk) for every line of `chunks` in order; ReadRefused past the
    caps or for a chunk that is not UTF-8 text. Read part by part (run_records.read_chunks): a line over
    RECORD_LINE_BYTES is refused once that much of it is held, never after the whole chunk was read."""
    number = size = 0
    for chunk, parts in read_chunks(fs, chunks):
        name = chunk.path.rsplit("/", 1)[-1]
        pending, at = b"", 0  # the line not yet ended, and where it starts in the chunk
        for part in parts:
            size += len(part)
            if size > bounded_read.RUN_RECORD_BYTES:
                raise ReadRefused(f"is over the {bounded_read.size_text(bounded_read.RUN_RECORD_BYTES)} a run's "
                                  "records may be")
            *ended, pending = (pending + part).split(b"\n")
            for raw in ended:
                number = _counted(number, len(raw), max_lines)
                yield number, _decoded(raw, name, at), False
                at += len(raw) + 1
            if len(pending) > bounded_read.RECORD_LINE_BYTES:
                _counted(number, len(pending), max_lines)  # refused here, with the next line's number
        if pending:  # the chunk did not end its last line: a damaged object's end, tolerated by the reader
            number = _counted(number, len(pending), max_lines)
            yield number, _decoded(pending, name, at), True


def _counted(number: int, length: int, max_lines: int) -> int:
    """The next line's number; ReadRefused when it is one too many or `length` bytes is over a record's cap."""
    number += 1
    if number > max_lines:
        raise ReadRefused(bounded_read.too_many_records(max_lines))
    if length > bounded_read.RECORD_LINE_BYTES:
        raise ReadRefused(f"line {number} is over the "
                          f"{bounded_read.size_text(bounded_read.RECORD_LINE_BYTES)} a record may be")
    return number


def _decoded(raw: bytes, name: str, at: int) -> str:
    """One line as text; ReadRefused naming the chunk and the offset in it for a NUL byte or bad UTF-8."""
    try:
        return decode_text(raw, "JSON lines")
    except ReadRefused:
        nul = raw.find(b"\0")
        if nul != -1:
            raise ReadRefused(f"chunk {name} is binary, not JSON lines (a NUL byte at offset {at + nul})") from None
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ReadRefused(f"chunk {name} is not UTF-8 text (byte {at + exc.start})") from None
        raise


class ChunkedRecords:
    """The listing of one chunked run, and its records read from it."""

    def __init__(self, run_dir: str, flag: str):
        self.run_dir, self.flag = run_dir, flag
        # gcsfs logs each request it gave up on with a traceback; the failure is said here, in one line.
        logging.getLogger("gcsfs").setLevel(logging.CRITICAL)
        self.fs, root = store(run_dir, flag)
        self.paths = self._storage(lambda: listing(self.fs, root))

    def _storage(self, read):
        """A storage failure is neither the user's input nor a damaged record: one line naming the run."""
        try:
            return read()
        except (OSError, TimeoutError) as exc:
            raise ElxpkError(f"{self.flag}: {self.run_dir} cannot be read ({type(exc).__name__}: "
                             f"{str(exc)[:200]}); try again when the storage answers") from None

    def has_metrics(self) -> bool:
        return bool(ordered_chunks(self.paths, "metrics"))

    def records(self, kind: str, parse, *, most: int, into):
        where = f"{self.flag}: {self.run_dir} {kind}"
        lines = chunk_lines(self.fs, ordered_chunks(self.paths, kind), max_lines=most)
        try:
            return self._storage(lambda: records_of_lines(lines, parse, into=into))
        except ReadRefused as exc:
            raise UsageError(f"{where} {exc}") from None
        except (JsonLinesError, RecordLineError) as exc:
            raise UsageError(f"{where} {exc}") from None

    def run_json(self) -> tuple[str, str] | None:
        """(path, text) of the newest writer's run.json, or None when no writer got as far."""
        path = newest_run_json(self.paths)
        if path is None:
            return None
        data = self._storage(lambda: read_object(self.fs, path, RUN_JSON_BYTES + 1))
        try:
            if len(data) > RUN_JSON_BYTES:
                raise ReadRefused(f"is over the {bounded_read.size_text(RUN_JSON_BYTES)} this input may be")
            return path, decode_text(data, "JSON")
        except ReadRefused as exc:
            raise UsageError(f"{self.flag}: {path} {exc}") from None
