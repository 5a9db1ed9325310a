"""The one reader of every file or stream elxpk takes as input: a size cap, a time cap, regular files only.

`/dev/zero`, `/dev/full`, a FIFO or a 50 MB file given where a manifest, an env file, a kubeconfig or a
run record is expected would otherwise be read to the end (never, for a device) into memory. Here:

- a path must name a regular file (a directory, a device, a FIFO or a socket is refused before it is
  opened: opening a FIFO alone would block until a writer came);
- its size is checked before reading and again while reading (a file that grows past the cap is refused);
- reading stops at a deadline (a stalled network filesystem, a stdin that never ends);
- text must be UTF-8 without NUL bytes (`decode_text`).

Each refusal is a `ReadRefused` whose message is one line saying what is wrong and the limit, without the
path: callers prefix the flag and path (`read_input` does it for them and raises UsageError, exit 2).
The caps are declared here, once per kind of input, and listed in docs/launcher.md.
"""

from __future__ import annotations

import os
import select
import stat
import sys
import time
from collections.abc import Callable, Iterator
from typing import Literal, overload

from elxpk.errors import UsageError

KIB, MIB = 1024, 1024 * 1024
# Caps by kind of input: each far above what a real one holds, and low enough that reading and parsing
# the largest allowed stays well under 200 MB of memory (tests/launcher/test_hostile_input.py measures it);
# run records, sized by the length of the runs users have, stay under RUN_RECORDS_PEAK_MB.
MANIFEST_BYTES = 4 * MIB  # a YAML file of manifests; one object is at most ~1.5 MiB in the API server
ENV_FILE_BYTES = 2 * MIB  # KEY=VALUE lines; the whole JobSet must stay within the API server's object limit
KUBECONFIG_BYTES = 1 * MIB  # kubeconfigs embed certificates: a few KiB per cluster (the library parses in Python)
CONFIG_BYTES = 64 * KIB  # ELXPK_CONFIG: a handful of keys
RUN_JSON_BYTES = 1 * MIB  # run.json
# metrics.jsonl / events.jsonl / a MaxText metrics file: read as a stream (one line at a time). The steps go
# into columns (elxpk/runs/step_columns.py, elxpk/columns.py): ~60 bytes a step whatever its line holds, ~100
# at report's peak (bench/bench_runs_memory.py: 207 MB for `report` of 2,000,000 steps, where one object per
# step took ~590 bytes, 1.1 GB); the events into slotted records (~300 bytes each). Sized for the runs users
# have, weeks at sub-second steps: 4,000,000 lines is 2,000,000 steps with as many redone, or 46 days at 1 s
# a step; the trainer writes ~200 bytes a step, 0.8 GB at that length, under the 1 GiB. Lines are counted
# while the bytes are checked, before any is parsed, so a file of more is refused at once, whatever its
# lines hold. At the caps `report` holds ~400 MB and `compare` of two runs ~620 MB (RUN_RECORDS_PEAK_MB).
RUN_RECORD_BYTES = 1024 * MIB
RUN_RECORDS = 4_000_000  # lines of metrics.jsonl or a MaxText metrics file: steps, redone ones too
EVENT_RECORDS = 200_000  # lines of events.jsonl: a checkpoint pair every 100 steps is 80,000 over 4,000,000
RECORD_LINE_BYTES = 1 * MIB  # one line of a run record: a step or an event is a few hundred bytes
RUN_RECORDS_PEAK_MB = 700  # `compare` of two runs at the caps (tests/launcher/test_hostile_input.py projects it)
INCIDENT_BYTES = 2 * MIB  # an incident record (`workload events --record`): ~6k incidents
READ_TIMEOUT_S = 60.0  # a read that takes longer is stuck (a hung mount, a stdin nobody closes)
_CHUNK = 1 * MIB


class ReadRefused(ValueError):
    """The input was not read: not a regular file, over its cap, too slow, or not text. One line."""


def size_text(n: float) -> str:
    for unit, size in (("GiB", 1024 * MIB), ("MiB", MIB), ("KiB", KIB)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} bytes"


def _kind(mode: int) -> str | None:
    """What a non-regular file is, in words; None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    for test, words in ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"),
                        (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                        (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return words
    return "not a regular file"


def not_a_regular_file(path: str | os.PathLike[str]) -> str | None:
    """What `path` is in words ('a FIFO (named pipe)', ...) when it is not a regular file, else None.
    OSError (FileNotFoundError included) passes through."""
    return _kind(os.stat(path).st_mode)


def read_limited(path: str | os.PathLike[str], *, limit: int, timeout_s: float = READ_TIMEOUT_S,
                 clock: Callable[[], float] = time.monotonic) -> bytes:
    """The bytes of the regular file `path`. FileNotFoundError passes through (callers decide whether a
    missing file is an error); everything else that stops the read is ReadRefused."""
    fd = _open_regular(path, limit)
    try:
        return read_fd(fd, limit=limit, timeout_s=timeout_s, clock=clock)
    finally:
        os.close(fd)


def read_fd(fd: int, *, limit: int, timeout_s: float = READ_TIMEOUT_S,
            clock: Callable[[], float] = time.monotonic) -> bytes:
    """At most `limit` bytes from a descriptor (a file, a pipe, a terminal), within `timeout_s`."""
    deadline = clock() + timeout_s
    data = bytearray()
    while True:
        left = deadline - clock()
        if left <= 0:
            raise ReadRefused(f"still not at its end after {timeout_s:g} s ({size_text(len(data))} read); "
                              "give a complete file")
        try:
            ready, _, _ = select.select([fd], [], [], min(left, 1.0))  # the clock decides, not select
        except (OSError, ValueError):  # a descriptor select cannot watch: read, it will not block for long
            ready = [fd]
        if not ready:
            continue  # the deadline check above ends it
        try:
            chunk = os.read(fd, min(_CHUNK, limit + 1 - len(data)))
        except BlockingIOError:
            continue
        except OSError as exc:
            raise ReadRefused(f"cannot be read ({exc.strerror or exc})") from None
        if not chunk:
            return bytes(data)
        data += chunk
        if len(data) > limit:
            raise ReadRefused(f"is over the {size_text(limit)} this input may be")


def _open_regular(path: str | os.PathLike[str], limit: int) -> int:
    """A read-only descriptor of the regular file `path` whose size is within `limit` (checked again on the
    open descriptor: the path may have been replaced). FileNotFoundError passes through."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise ReadRefused(f"cannot be read ({exc.strerror or exc})") from None
    kind = _kind(mode)
    if kind is not None:
        raise ReadRefused(f"is {kind}, not a regular file")
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise ReadRefused(f"cannot be read ({exc.strerror or exc})") from None
    try:
        info = os.fstat(fd)
        kind = _kind(info.st_mode)  # replaced between the stat and the open
        if kind is not None:
            raise ReadRefused(f"is {kind}, not a regular file")
        if info.st_size > limit:
            raise ReadRefused(f"is {size_text(info.st_size)}, over the {size_text(limit)} this input may be")
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_text_lines(path: str | os.PathLike[str], *, limit: int, line_limit: int, expected: str = "text",
                    max_lines: int | None = None, timeout_s: float = READ_TIMEOUT_S,
                    clock: Callable[[], float] = time.monotonic) -> Iterator[tuple[int, str, bool]]:
    """The lines of the regular file `path` as (1-based number, text without its '\n', whether it is the
    last piece of the file), holding one line at a time: what `decode_text(read_limited(...)).split("\n")`
    yields, with the same refusals, in bounded memory.

    The file is read twice within one time budget: first every byte is checked (NUL, UTF-8, the size cap), so
    a binary file is refused by what it is before any line is handed out, exactly as a whole-file read
    would; then the same bytes (a writer appending meanwhile is not followed) are split into lines. A line
    longer than `line_limit` is ReadRefused naming it, and so is a file of more than `max_lines` lines (the
    '\n's and an unended last piece), counted in the first pass. FileNotFoundError passes through.

    `timeout_s` bounds the time spent reading, not the caller's time between lines: parsing a run of
    millions of steps may take longer than reading it."""
    budget = _ReadBudget(timeout_s, clock)
    fd = _open_regular(path, limit)
    try:
        size = _check_text(fd, limit=limit, expected=expected, budget=budget, max_lines=max_lines)
        yield from _split_lines(fd, size, line_limit=line_limit, budget=budget)
    finally:
        os.close(fd)


class _ReadBudget:
    """The seconds spent inside reads, against `timeout_s`."""

    def __init__(self, timeout_s: float, clock: Callable[[], float]):
        self.timeout_s, self.clock, self.spent = timeout_s, clock, 0.0


def _chunks(fd: int, size: int | None, limit: int, budget: _ReadBudget) -> Iterator[bytes]:
    """The file's bytes from its start in chunks: all of it (at most `limit`), or its first `size` bytes."""
    done = 0
    while size is None or done < size:
        if budget.spent > budget.timeout_s:
            raise ReadRefused(f"still not at its end after {budget.timeout_s:g} s ({size_text(done)} read); "
                              "give a complete file")
        want = _CHUNK if size is None else min(_CHUNK, size - done)
        started = budget.clock()
        try:
            chunk = os.pread(fd, want if size is not None else min(want, limit + 1 - done), done)
        except OSError as exc:
            raise ReadRefused(f"cannot be read ({exc.strerror or exc})") from None
        budget.spent += budget.clock() - started
        if not chunk:
            return
        done += len(chunk)
        if size is None and done > limit:
            raise ReadRefused(f"is over the {size_text(limit)} this input may be")
        yield chunk


def _check_text(fd: int, *, limit: int, expected: str, budget: _ReadBudget, max_lines: int | None) -> int:
    """The file's size, once every byte is known to be UTF-8 text without NUL (decode_text's refusals,
    with the offsets of the whole file) and its lines are no more than `max_lines`."""
    offset, carry = 0, b""  # carry: the bytes of a character cut by the chunk's end
    bad_utf8: int | None = None  # a NUL anywhere wins, as in decode_text: keep looking for one
    newlines, ended = 0, True
    for chunk in _chunks(fd, None, limit, budget):
        newlines += chunk.count(b"\n")
        ended = chunk.endswith(b"\n")
        data = carry + chunk
        cut = len(data)
        for back in range(1, min(4, len(data)) + 1):  # cut before the last character's lead byte
            if data[-back] & 0xC0 != 0x80:
                cut = len(data) - back if data[-back] >= 0x80 else len(data)
                break
        bad_utf8 = _scan(data[:cut], offset - len(carry), expected, bad_utf8)
        offset += len(chunk)
        carry = data[cut:]
    bad_utf8 = _scan(carry, offset - len(carry), expected, bad_utf8)
    if bad_utf8 is not None:
        raise ReadRefused(f"is not UTF-8 text (byte {bad_utf8})")
    if max_lines is not None and newlines + (not ended) > max_lines:
        raise ReadRefused(too_many_records(max_lines))
    return offset


def _scan(data: bytes, start: int, expected: str, bad_utf8: int | None) -> int | None:
    """Raise for a NUL byte in `data` (at file offset `start`); the file offset of the first byte that is
    not UTF-8, `bad_utf8` when one was already found."""
    nul = data.find(b"\0")
    if nul != -1:
        raise ReadRefused(f"is binary, not {expected} (a NUL byte at offset {start + nul})")
    if bad_utf8 is None:
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as exc:
            return start + exc.start
    return bad_utf8


def too_many_records(limit: int) -> str:
    """The refusal of a run record of more than `limit` lines (one line, the path left to the caller)."""
    return f"holds more than {limit:,} lines (records), over what report and compare hold in memory"


def _split_lines(fd: int, size: int, *, line_limit: int, budget: _ReadBudget) -> Iterator[tuple[int, str, bool]]:
    number, pending = 0, bytearray()
    for chunk in _chunks(fd, size, size, budget):
        pending += chunk
        start = 0
        while True:
            end = pending.find(b"\n", start)
            if end == -1:
                break
            number += 1
            if end - start > line_limit:
                raise ReadRefused(f"line {number} is over the {size_text(line_limit)} a record may be")
            yield number, pending[start:end].decode("utf-8"), False
            start = end + 1
        del pending[:start]
        if len(pending) > line_limit:
            raise ReadRefused(f"line {number + 1} is over the {size_text(line_limit)} a record may be")
    yield number + 1, pending.decode("utf-8"), True


def read_stdin(*, limit: int, timeout_s: float = READ_TIMEOUT_S,
               clock: Callable[[], float] = time.monotonic) -> bytes:
    """Standard input, bounded like a file (`/dev/zero` as stdin ends at the cap, not in MemoryError)."""

    stream = sys.stdin
    if stream is None:
        raise ReadRefused("is closed")
    try:
        fd = stream.fileno()
    except (AttributeError, ValueError, OSError):  # a replaced stdin without a descriptor (in-process tests)
        text = stream.read(limit + 1)
        data = text.encode("utf-8", "surrogateescape") if isinstance(text, str) else bytes(text)
        if len(data) > limit:
            raise ReadRefused(f"is over the {size_text(limit)} this input may be") from None
        return data
    try:
        info = os.fstat(fd)
    except OSError as exc:
        raise ReadRefused(f"cannot be read ({exc.strerror or exc})") from None
    if stat.S_ISREG(info.st_mode) and info.st_size > limit:
        raise ReadRefused(f"is {size_text(info.st_size)}, over the {size_text(limit)} this input may be")
    return read_fd(fd, limit=limit, timeout_s=timeout_s, clock=clock)


# A YAML value needs one of these characters before it (a flow ',', a block '- ' or ': ', a new line, an
# opening bracket), so their count bounds the nodes a parser would build (~400 bytes of memory each) before
# any is built: 250,000 keep a parse under 200 MB; a large real manifest holds a few thousand.
_YAML_VALUE_MARKS = ",:-[{?\n"
YAML_VALUES = 250_000
KUBECONFIG_VALUES = 50_000  # the kubernetes library parses it again with the pure-Python loader


def yaml_values_problem(text: str, limit: int = YAML_VALUES) -> str | None:
    """Why `text` is refused before it is parsed as YAML (too many values to hold in memory), or None."""
    marks = sum(text.count(c) for c in _YAML_VALUE_MARKS)
    if marks > limit:
        return f"room for {marks} YAML values, over the {limit} elxpk reads in one file"
    return None


def decode_text(data: bytes, expected: str = "text") -> str:
    """`data` as UTF-8 text; ReadRefused (what is wrong and where) for a binary or non-UTF-8 file."""
    nul = data.find(b"\0")
    if nul != -1:
        raise ReadRefused(f"is binary, not {expected} (a NUL byte at offset {nul})")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ReadRefused(f"is not UTF-8 text (byte {exc.start})") from None


@overload
def read_input(path: str | os.PathLike[str], *, flag: str, limit: int, missing_ok: Literal[False] = False,
               text: Literal[False]) -> bytes: ...


@overload
def read_input(path: str | os.PathLike[str], *, flag: str, limit: int, missing_ok: Literal[False] = False,
               text: Literal[True] = True) -> str: ...


@overload
def read_input(path: str | os.PathLike[str], *, flag: str, limit: int, missing_ok: bool = False,
               text: bool = True) -> str | bytes | None: ...


def read_input(path: str | os.PathLike[str], *, flag: str, limit: int, missing_ok: bool = False,
               text: bool = True) -> str | bytes | None:
    """`read_limited` (and `decode_text` when `text`) with every refusal as one UsageError naming `flag`
    and the path. A missing file is None with `missing_ok`, else a UsageError."""
    try:
        data = read_limited(path, limit=limit)
        return decode_text(data) if text else data
    except FileNotFoundError:
        if missing_ok:
            return None
        raise UsageError(f"{flag} {path}: no such file") from None
    except ReadRefused as exc:
        raise UsageError(f"{flag} {path}: {exc}") from None
