"""Text from the cluster (or any other party elxpk does not control) made safe to show a person.

A JobSet condition, a pod's termination message (written by the container itself), an Event, an API
server's error or a webhook's reason phrase can hold terminal controls: `ESC[2J` clears the screen, OSC 52
writes the user's clipboard, OSC 8 plants a hyperlink, a bidi override reorders what is read. Every
human-readable output (tables, `--why`, incident lines, the live view, error lines, the `job inspect` file,
notification lines) passes such text through `shown`, which writes each control visibly (`\\x1b`), so the
bytes stay readable and nothing reaches the terminal as a control. `-o json` escapes them itself; `logs`
stays raw, as `kubectl logs` is.

Only the standard library is imported: the console script's error path uses it.
"""

from __future__ import annotations

import re

# C0 (but what `keep` allows), DEL, C1, and the Unicode controls a terminal or an editor acts on: the bidi
# embeddings, overrides and isolates (Trojan Source) and the line/paragraph separators.
_UNICODE = "\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
_ONE_LINE = re.compile(f"[\x00-\x1f{_UNICODE}]")
_LINES = re.compile(f"[\x00-\x09\x0b-\x1f{_UNICODE}]")  # all but \n


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def shown(text: object, *, lines: bool = False) -> str:
    """`text` with every control written visibly; with `lines`, a newline stays one (a multi-line message
    meant as such, a file), otherwise it is `\\x0a` too (a table cell, one incident line, one error line)."""
    return (_LINES if lines else _ONE_LINE).sub(_visible, str(text))


def has_controls(text: str) -> bool:
    """Whether `shown` would change `text` (newlines kept): for tests and checks."""
    return _LINES.search(text) is not None


def console(**options: object) -> object:
    """A Rich Console whose every string (a table cell, markup, a printed line) is passed through `shown`
    (newlines kept: a cell may be meant as several lines) before Rich parses or lays it out, so widths
    count what is drawn. A `Text` built directly is not a string: build it from `shown(...)` text."""
    from rich.console import Console

    class _ShownConsole(Console):
        def render_str(self, text: str, **kwargs):
            return super().render_str(shown(text, lines=True), **kwargs)

    return _ShownConsole(**options)  # type: ignore[arg-type]
