"""Text for a pipe or a file: each line ends at its last visible character.

Rich lays tables and their titles out to a width and pads the lines with spaces. On a terminal they are
invisible; in a pipe they are bytes that `grep ' $'`, a diff or a reader of the columns sees (`elxpk plan | cat`
ended 15 of its lines in spaces). A console that does not write to a terminal writes through `TrimmedLines`.
"""

from __future__ import annotations

from typing import Any, TextIO


class TrimmedLines:
    """A text stream that writes each whole line without its trailing spaces; a partial line waits for its end
    (or the next flush)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._pending = ""

    def write(self, text: str) -> int:
        self._pending += text
        if "\n" in self._pending:
            *lines, self._pending = self._pending.split("\n")
            self._stream.write("".join(line.rstrip(" ") + "\n" for line in lines))
        return len(text)

    def flush(self) -> None:
        if self._pending:
            self._stream.write(self._pending.rstrip(" "))
            self._pending = ""
        self._stream.flush()

    def isatty(self) -> bool:
        return False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def piped_console(stream: TextIO, make: Any = None, **options: Any) -> Any:
    """A Rich console on `stream`: as Rich makes it on a terminal, else writing through TrimmedLines. `make`
    builds it (default: Rich's Console; elxpk.shown.console for one that shows cluster text safely)."""
    if make is None:
        from rich.console import Console as make

    console = make(file=stream, **options)
    if console.is_terminal:
        return console
    return make(file=TrimmedLines(stream), **options)


class OncePerChange:
    """A progress line printer that prints a line only when it differs from the one before: a poll every few
    seconds repeats its state (`0/4 replacement pods ready`), which a pipe or a log would keep line after line."""

    def __init__(self, emit: Any) -> None:
        self._emit = emit
        self._last: str | None = None

    def __call__(self, line: str) -> None:
        if line != self._last:
            self._last = line
            self._emit(line)
