"""Reading `workload create`'s raw flag values: every row's value, then text, argument lists and env pairs.

Raw values arrive as typed on the command line (integers as text). Each row's value is read once, by the
one reader every command uses (elxpk/flag_rows.py `read_all`: kind, bounds, choices; a duration in
seconds), so a bad value gets the same line in `workload create` as in `plan` or `local run`. What is not
one row's value alone stays here: a row's text check (`required`, `check`, elxpk/create/flag_checks.py),
shell-split arguments, env pairs and the env file. A problem is one line in `errors` (the flag, what is
wrong, the fix) and reading goes on: the caller (elxpk.create.checks.FlagChecker) reports every problem
at once.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from elxpk.bounded_read import ENV_FILE_BYTES, decode_text, read_limited
from elxpk.create.flag_checks import CHECKS
from elxpk.create.flags import BY_NAME, FLAGS, PATHWAYS_RESERVED_ENV, RESERVED_ENV
from elxpk.create.records import CreateFlags
from elxpk.flag_records import read_record
from elxpk.flag_rows import required_line

_ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
_SURROGATE = re.compile("[\ud800-\udfff]")  # text that came from undecodable bytes (os.fsdecode)
# The rows `workload create` reads (gcluster's own rows and the aliases are elxpk's keys by now:
# elxpk/create/dialect.py).
_ROWS = tuple(f for f in FLAGS if not f.dialect)


class FlagValues:
    """The flags of one command, each row's value read (`values`, a CreateFlags), and the errors and warnings
    found."""

    def __init__(self, flags: Mapping[str, object]) -> None:
        self.flags = dict(flags)
        self.warnings: list[str] = []
        values, problems = read_record(CreateFlags, _ROWS,
                                       {**self.flags, "trainer": _trainer_choice(self.flags.get("trainer"))})
        self.values: CreateFlags = values
        self.errors: list[str] = problems

    def get(self, key: str, default: object = None) -> object:
        value = self.flags.get(key)
        return default if value is None else value

    @staticmethod
    def flag(key: str) -> str:
        """How the user spelled the flag of `key`: the table's row, else the plain spelling."""
        row = BY_NAME.get(key)
        return row.flag if row else _OTHER_SPELLINGS.get(key, "--" + key.replace("_", "-"))

    def text(self, key: str, default: str | None = None) -> str | None:
        """The flag's text as given, else `default`; None when neither."""
        value = self.get(key, default)
        if value is None:
            return None
        value = str(value)
        if _SURROGATE.search(value):
            self.errors.append(f"{self.flag(key)}: the value is not valid UTF-8 text; pass it as UTF-8")
        return value

    def checked(self, key: str) -> str:
        """The flag's text as given, else its row's default ("" for neither), with the row's own text rules:
        `required`, and its `check` (elxpk/create/flag_checks.py); each problem is one line."""
        row = BY_NAME[key]
        value = self.text(key, row.default)
        if not value and row.required and (line := required_line(row)):
            self.errors.append(line)
        elif value is not None and row.check and (problem := CHECKS[row.check](value)):
            self.errors.append(f"{row.flag} {value!r}: {problem}")
        return value or ""

    def args(self, key: str) -> tuple[str, ...]:
        """Extra arguments split like a shell."""
        flag = self.flag(key)
        raw = self.text(key)
        if not raw:
            return ()
        import shlex  # lazy: keeps shlex off `workload create --dry-run`

        try:
            return tuple(shlex.split(raw))
        except ValueError as exc:
            self.errors.append(f"{flag}: {exc} in {raw!r}; balance the quotes (arguments split like a shell)")
            return ()

    def env(self) -> tuple[tuple[str, str], ...]:
        lines = (line.strip() for line in self.env_file_lines())
        sources: list[tuple[str, object]] = [("--env-file", x) for x in lines if x and not x.startswith("#")]
        sources += [("--env", x) for x in _seq(self.get("env"))]
        return self._pairs(sources, RESERVED_ENV)

    def container_env(self, key: str) -> tuple[tuple[str, str], ...]:
        """--pathways-{proxy,server,worker}-env: KEY=VALUE pairs for that Pathways container, the same rules as
        --env, less the names the template sets on that container."""
        return self._pairs([(self.flag(key), x) for x in _seq(self.get(key))], PATHWAYS_RESERVED_ENV[key])

    def _pairs(self, sources: list[tuple[str, object]], reserved: frozenset[str]) -> tuple[tuple[str, str], ...]:
        pairs: dict[str, str] = {}
        for flag, item in sources:
            item = str(item)
            key, sep, value = item.partition("=")
            key = key.strip()
            if not sep:
                self.errors.append(f"{flag} {item!r}: expected KEY=VALUE")
            elif not _ENV_KEY.match(key):
                self.errors.append(f"{flag} {key!r}: env names are letters, digits and '_', not starting "
                                   f"with a digit; rename it (e.g. MY_VAR)")
            elif key in reserved:
                self.errors.append(f"{flag} {key}: set by elxpk itself; drop it")
            elif key.startswith("ELXPK_"):
                self.errors.append(f"{flag} {key}: trainer settings have their own flags "
                                   f"(--checkpoint-dir, --checkpoint-period, --elastic-*); use those")
            elif _SURROGATE.search(value):
                self.errors.append(f"{flag} {key}: the value is not valid UTF-8 text; pass it as UTF-8")
            else:
                pairs[key] = value  # later wins: --env overrides --env-file
        return tuple(pairs.items())

    def env_file_lines(self) -> list[str]:
        path = self.text("env_file")
        if not path:
            return []

        try:
            return decode_text(read_limited(path, limit=ENV_FILE_BYTES)).splitlines()
        except FileNotFoundError:
            self.errors.append(f"--env-file {path!r}: no such file; give a readable KEY=VALUE file")
        except ValueError as exc:  # bounded_read.ReadRefused: special file, over the cap, not text
            self.errors.append(f"--env-file {path!r}: {exc}; give a readable KEY=VALUE file")
        return []


_OTHER_SPELLINGS = {"output_format": "--output"}  # keys that are not rows of the table and not spelled --key


def _seq(value: object) -> Iterable[object]:
    if value is None:
        return ()
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        return (value,)
    return value


def _trainer_choice(raw: object) -> object:
    """--trainer as its row's choice: bare `--trainer` (True) is the bundled trainer, the text as typed
    in any case; None when not given."""
    if raw is None or raw is False:
        return None
    return "elxpk" if raw is True else str(raw).strip().lower()
