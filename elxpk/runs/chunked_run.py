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
    caps or for a chunk that is not UTF-8 text."""
    number = size = 0
    for chunk, data in read_chunks(fs, chunks):
        size += len(data)
        if size > bounded_read.RUN_RECORD_BYTES:
            raise ReadRefused(f"is over the {bounded_read.size_text(bounded_read.RUN_RECORD_BYTES)} a run's "
                              "records may be")
        try:
            pieces = decode_text(data, "JSON lines").split("\n")
        except ReadRefused as exc:
            raise ReadRefused(f"chunk {chunk.path.rsplit('/', 1)[-1]} {exc}") from None
        if pieces[-1] == "":  # the chunk ended its last line: nothing after it
            pieces.pop()
        for i, piece in enumerate(pieces):
            number += 1
            if number > max_lines:
                raise ReadRefused(bounded_read.too_many_records(max_lines))
            if len(piece) > bounded_read.RECORD_LINE_BYTES:
                raise ReadRefused(f"line {number} is over the "
                                  f"{bounded_read.size_text(bounded_read.RECORD_LINE_BYTES)} a record may be")
            yield number, piece, i == len(pieces) - 1 and not data.endswith(b"\n")


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
