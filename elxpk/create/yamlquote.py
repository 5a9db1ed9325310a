"""The one quoting filter every user value passes through on its way into a template.

`quote(s)` is a YAML double-quoted scalar that parses back to exactly `s`, whatever `s` holds:
newlines, quotes, `: `, `{{ }}`, `#`, unicode, control characters. Printable characters stay as they
are (so manifests stay readable); everything a YAML reader would fold, reject or misread is escaped.
Both filters return `Rendered`; the template environment refuses any other output, so a value that
skipped the filter fails the render instead of changing the manifest's structure. `written` is the third
way to a `Rendered`, for the launcher's own constants that xpk writes plain (elxpk/create/gpu.py).
"""

from __future__ import annotations

import re


class Rendered(str):
    """Text that went through `quote` or `number` and is safe to place as a YAML scalar."""


# ASCII: `"`, `\` and the control characters are escaped; the other printable ASCII stays as is.
_ASCII = {code: f"\\x{code:02x}" for code in (*range(0x20), 0x7F)}
_ASCII.update({ord("\\"): "\\\\", ord('"'): '\\"', ord("\n"): "\\n", ord("\t"): "\\t", ord("\r"): "\\r",
               0: "\\0"})
# Non-ASCII kept as is: what YAML allows in a stream, minus the three characters it reads as line
# breaks (U+0085, U+2028, U+2029, which a reader would fold into spaces) and the byte-order mark.
_LINE_BREAKS_AND_BOM = frozenset("\x85\u2028\u2029\ufeff")


def _non_ascii(char: str) -> str:
    code = ord(char)
    if 0xD800 <= code <= 0xDFFF:
        raise ValueError("lone surrogate: the text is not valid unicode")
    if code < 0xA0 or char in _LINE_BREAKS_AND_BOM or code in (0xFFFE, 0xFFFF):
        return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"
    return char


def quote(value: object) -> Rendered:
    """`value` (a str) as a double-quoted YAML scalar that round-trips exactly."""
    if not isinstance(value, str):
        raise TypeError(f"quote() takes text, got {type(value).__name__}: use |num for integers")
    text = value.translate(_ASCII)
    if not text.isascii():
        text = "".join(c if c.isascii() else _non_ascii(c) for c in text)
    return Rendered('"' + text + '"')


# Text that may stand as a plain scalar: no indicator, space, quote, `:` or `#` (YAML's resolver then says
# whether a reader takes it for text, as `written` asks: `true` and `0x1F` are no text). A YAML 1.2 reader
# also takes 1e3 for a number, which PyYAML (YAML 1.1) reads as text: such text is quoted too. Patterns, not
# compiled ones: `re` compiles them on a GPU render's first use, never on a TPU dry-run's start-up.
_PLAIN = r"(?:[A-Za-z0-9_/]|-[A-Za-z0-9_-])[A-Za-z0-9_./-]*"
_NUMBER_12 = r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"


def written(value: str) -> Rendered:
    """A constant of the launcher's own (the GPU network's paths, flags and images, never a user value) as
    xpk's manifests write it: plain where a reader reads it back as that same text; single-quoted where it
    holds a double quote and needs no escape; else `quote`'s double-quoted scalar."""
    if re.fullmatch(_PLAIN, value) and not re.fullmatch(_NUMBER_12, value):
        from yaml import (
            ScalarNode,  # only GPU renders write constants; they load yaml for the parse-back anyway
        )
        from yaml.resolver import Resolver

        if Resolver().resolve(ScalarNode, value, (True, False)) == Resolver.DEFAULT_SCALAR_TAG:
            return Rendered(value)
    if '"' in value and "'" not in value and value.isascii() and value.isprintable():
        return Rendered(f"'{value}'")
    return quote(value)


def number(value: object) -> Rendered:
    """A validated integer as a plain YAML integer."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"number() takes an int, got {type(value).__name__}")
    return Rendered(str(value))


def only_rendered(value: object) -> object:
    """Jinja `finalize`: every `{{ }}` must have gone through `quote` or `number`."""
    if isinstance(value, Rendered):
        return value
    raise TypeError(f"template printed {value!r} without |q or |num; every value must be quoted")
