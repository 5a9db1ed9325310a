"""Find the MaxText invocation in a user's shell command, and where its `key=value` overrides go.

The launcher runs `--command` through a shell, so the command is shell text: `cd /app && JAX_X=1 python3
-m maxtext.trainers.pre_train.train src/maxtext/configs/base.yml run_name=$RUN 2>&1 | tee log`. elxpk
splices its overrides into that text after MaxText's config file instead of re-joining tokens, so quoting,
`$VARS` and `$(...)` in the rest of the command stay exactly as the user wrote them.

Words are found by a small scanner that knows shell quoting, `$(...)`/backticks, comments, redirections
and the separators `&& || ; | & ( )` and newline; each word's value is what `shlex` makes of it. A word
whose value depends on the shell (`$VAR`, `$(...)`, globs are left alone) is marked `dynamic`.
Standard library only (this is on the render path).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

# MaxText entry points whose argv is `CONFIG.yml key=value ...` (maxtext/configs/pyconfig.py, 0.2.5:
# argv[1] is the config file when it ends in .yml; every later word is an OmegaConf `key=value`).
TRAIN_MODULES = (
    "maxtext.trainers.pre_train.train",  # 0.2.5 (the only one with elastic_retry)
    "MaxText.train",  # source checkouts before the `maxtext` package rename
    "MaxText.elastic_train",  # older source checkouts: the Pathways elastic trainer
    "maxtext.train",
)
TRAIN_SCRIPTS = ("maxtext/trainers/pre_train/train.py", "pre_train/train.py", "MaxText/train.py",
                 "MaxText/elastic_train.py", "maxtext/train.py")

SEPARATORS = ("&&", "||", ";;", ";", "|&", "|", "&", "\n", "(", ")")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_OVERRIDE = re.compile(r"([A-Za-z_][A-Za-z0-9_.]*)=(.*)\Z", re.S)
_REDIRECT = re.compile(r"(\d*|&)(>>?|<<?|>&|<&|>\|)(.*)\Z", re.S | re.ASCII)
_PYTHON = re.compile(r"python(\d+(\.\d+)*)?\Z", re.ASCII)
_WRAPPERS = ("exec", "env", "time", "nohup", "command")
_MENTION = re.compile(r"(?<![\w.])(" + "|".join(map(re.escape, TRAIN_MODULES)) + r")(?![\w.])|(?<![\w.-])("
                      + "|".join(map(re.escape, TRAIN_SCRIPTS)) + r")(?![\w.])")


class CommandError(ValueError):
    """The command is not shell text elxpk can edit (message: one line, without the flag name)."""


@dataclass(frozen=True)
class Word:
    raw: str  # as written, quotes included
    value: str  # after shell quote removal (what the program sees, unless dynamic)
    start: int  # offsets into the command text
    end: int
    dynamic: bool = False  # the shell expands part of it ($VAR, $(...), `...`): value is not final
    separator: bool = False  # one of SEPARATORS


@dataclass(frozen=True)
class Invocation:
    """One MaxText run inside the command."""

    program: Word  # the module (`-m X`) or script word
    config: Word | None  # the config file argument, if given
    overrides: dict[str, Word]  # key -> the `key=value` word that sets it (the last one wins in MaxText)
    env: dict[str, Word]  # NAME -> `NAME=value` assignments before the interpreter on the same command
    insert_at: int  # offset where new ` key=value` words go: after the config file, else after program

    def value(self, key: str) -> str | None:
        word = self.overrides.get(key)
        return None if word is None else word.value.split("=", 1)[1]


def quote(token: str) -> str:
    """`token` as one shell word (unchanged when it needs no quoting)."""
    return shlex.quote(token)


def split_words(command: str) -> list[Word]:
    """The words and separators of `command`, with their offsets. Raises CommandError for unclosed quotes."""
    words: list[Word] = []
    i, n = 0, len(command)
    while i < n:
        c = command[i]
        if c in " \t\r" or (c == "\\" and command[i + 1:i + 2] == "\n"):
            i += 1 if c != "\\" else 2
            continue
        if c == "#":  # a comment runs to the end of the line
            nl = command.find("\n", i)
            i = n if nl == -1 else nl
            continue
        op = next((s for s in SEPARATORS if command.startswith(s, i)), None)
        if op is not None and not _redirect_ampersand(command, i):
            words.append(Word(op, op, i, i + len(op), separator=True))
            i += len(op)
            continue
        end, dynamic = _scan_word(command, i)
        raw = command[i:end]
        words.append(Word(raw, _unquote(raw), i, end, dynamic=dynamic))
        i = end
    return words


def _redirect_ampersand(command: str, i: int) -> bool:
    """`&>file` and `&>>file` are redirections, not the background separator."""
    return command.startswith("&>", i)


def _scan_word(command: str, i: int) -> tuple[int, bool]:
    n, dynamic = len(command), False
    while i < n:
        c = command[i]
        if c in " \t\r\n":
            break
        if c in ";|()":
            break
        if c == "&" and not (i > 0 and command[i - 1] in "<>") and not command.startswith("&>", i):
            break
        if c == "\\":
            i += 2
            continue
        if c == "'":
            close = command.find("'", i + 1)
            if close == -1:
                raise CommandError("has an unclosed single quote")
            i = close + 1
            continue
        if c == '"':
            i, inner_dynamic = _scan_double(command, i + 1)
            dynamic = dynamic or inner_dynamic
            continue
        if c == "`":
            close = command.find("`", i + 1)
            if close == -1:
                raise CommandError("has an unclosed backquote")
            i, dynamic = close + 1, True
            continue
        if c == "$":
            dynamic = True
            if command.startswith("$(", i):
                i = _scan_parens(command, i + 2)
                continue
            if command.startswith("${", i):  # ${VAR:-a b} may hold spaces
                close = command.find("}", i + 2)
                if close == -1:
                    raise CommandError("has an unclosed ${")
                i = close + 1
                continue
        i += 1
    return i, dynamic


def _scan_double(command: str, i: int) -> tuple[int, bool]:
    n, dynamic = len(command), False
    while i < n:
        c = command[i]
        if c == "\\":
            i += 2
            continue
        if c == '"':
            return i + 1, dynamic
        if c in "$`":
            dynamic = True
            if command.startswith("$(", i):
                i = _scan_parens(command, i + 2)
                continue
        i += 1
    raise CommandError("has an unclosed double quote")


def _scan_parens(command: str, i: int) -> int:
    depth, n = 1, len(command)
    while i < n:
        c = command[i]
        if c == "\\":
            i += 2
            continue
        if c == "'":
            close = command.find("'", i + 1)
            i = n if close == -1 else close + 1
            continue
        depth += {"(": 1, ")": -1}.get(c, 0)
        i += 1
        if depth == 0:
            return i
    raise CommandError("has an unclosed $(")


def _unquote(raw: str) -> str:
    try:
        parts = shlex.split(raw, comments=False, posix=True)
    except ValueError:
        return raw
    return " ".join(parts)


def segments(words: list[Word]) -> list[list[Word]]:
    """Simple commands: runs of words between separators."""
    out: list[list[Word]] = [[]]
    for w in words:
        if w.separator:
            out.append([])
        else:
            out[-1].append(w)
    return [s for s in out if s]


def is_maxtext_program(word: Word, module: bool) -> bool:
    if module:
        return word.value in TRAIN_MODULES
    path = word.value.replace("\\", "/")
    return any(path == s or path.endswith("/" + s) for s in TRAIN_SCRIPTS)


def _invocation(segment: list[Word]) -> Invocation | None:
    env: dict[str, Word] = {}
    i = 0
    while i < len(segment):  # NAME=value assignments and wrappers (`env`, `exec`, ...) before the program
        w = segment[i]
        name = w.value.split("=", 1)[0]
        if "=" in w.value and _NAME.match(name):
            env[name] = w
        elif w.value not in _WRAPPERS:
            break
        i += 1
    if i >= len(segment) or not _PYTHON.match(segment[i].value.rsplit("/", 1)[-1]):
        return None
    i += 1
    program: Word | None = None
    while i < len(segment):  # interpreter options, up to `-m MODULE` or the script
        w = segment[i]
        if w.value == "-m" and i + 1 < len(segment):
            program, module = segment[i + 1], True
            i += 2
            break
        if w.value.startswith("-m") and len(w.value) > 2:
            program, module = Word(w.raw, w.value[2:], w.start, w.end, w.dynamic), True
            i += 1
            break
        if w.value == "-c":  # python -c '...': code elxpk cannot edit
            return None
        if w.value in ("-X", "-W"):  # options that take a value
            i += 2
            continue
        if w.value.startswith("-"):
            i += 1
            continue
        program, module = w, False
        i += 1
        break
    if program is None or not is_maxtext_program(program, module):
        return None
    args = _arguments(segment[i:])
    config = args[0] if args and "=" not in args[0].value and not args[0].value.startswith("-") else None
    overrides: dict[str, Word] = {}
    for w in args[1:] if config else args:
        match = _OVERRIDE.match(w.value)
        if match:
            overrides[match.group(1)] = w
    insert_at = (config or program).end
    return Invocation(program, config, overrides, env, insert_at)


def _arguments(words: list[Word]) -> list[Word]:
    """The program's arguments: every word except redirections and their targets."""
    out, skip = [], False
    for w in words:
        if skip:
            skip = False
            continue
        match = _REDIRECT.match(w.raw)
        if match:
            skip = match.group(3) == ""  # `> file`: the next word is the target
            continue
        out.append(w)
    return out


def find_invocations(command: str) -> list[Invocation]:
    """Every MaxText run in `command` (normally one). Raises CommandError for unclosed quotes."""
    return [inv for seg in segments(split_words(command)) if (inv := _invocation(seg)) is not None]


def mentions_maxtext(command: str) -> bool:
    """Whether a MaxText entry point appears anywhere, e.g. in `bash -c '...'`, where elxpk cannot edit it."""
    return _MENTION.search(command) is not None


def is_maxtext_command(command: str) -> bool:
    """True when `command` runs MaxText's trainer (directly, or hidden where elxpk cannot edit it)."""
    try:
        return bool(find_invocations(command)) or mentions_maxtext(command)
    except CommandError:
        return mentions_maxtext(command)


def insert(command: str, at: int, tokens: list[str]) -> str:
    """`command` with the shell-quoted `tokens` inserted at offset `at`, one space before each."""
    if not tokens:
        return command
    return command[:at] + "".join(" " + quote(t) for t in tokens) + command[at:]
