"""The row type of the launcher's flag tables: what each row says of its flag besides its value's rule.

Each command declares its own flags as rows: `workload create` and `validate` in elxpk/create/flags.py,
`local run` in elxpk/local/flags.py, `plan` in elxpk/plan/flags.py. elxpk/cli/options.py `with_flags`
turns rows into Typer parameters (help with the bounds and the default), and `Flag.read` (`read_all` for a
command's rows) reads a value alone, so a bad value gets one line naming the flag and the fix. A row's kind,
bounds and choices are its `rule`, the contract's (elxpk_contract/value_rule.py), and the contract's
`read_value` reads it: the one reader of a flag's and a trainer setting's value. A command that takes a
trainer setting declares it with `setting_row`, whose rule is the setting's own (elxpk_contract/settings.py),
so every command and the trainer refuse it alike. Ground of the stages (every one may import it): standard
library, elxpk.units and the contract's rules only, since it is read on every start."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from elxpk.units import INT32, INT64
from elxpk_contract.setting_rules import bounds_text, setting
from elxpk_contract.spelling import current, flag_name
from elxpk_contract.value_rule import (
    BOOL,
    DURATION,
    FLOAT,
    INT,
    LIST,
    SIZE,
    TEXT,
    ValueRule,
    either,
    range_phrase,
    read_value,
)

# The kinds and the rule are the contract's; a flag table imports them from here.
__all__ = ["BOOL", "DURATION", "FLOAT", "INT", "LIST", "SIZE", "TEXT", "Alias", "Flag", "alias_pairs",
           "docs_table", "either", "embed", "free_text_flags", "given_value", "merge_aliases", "path_flags",
           "read_all", "required_line", "seed_row", "setting_row"]
# Whether a flag names a file the command reads or one it writes (elxpk/cli/arg_checks.py refuses an output
# that is also an input of the same command).
INPUT, OUTPUT = "input", "output"


GCLUSTER = "gcluster"  # the dialect of Cluster Toolkit's `gcluster job submit` (docs/launcher.md)
EARLIER = "earlier elxpk"  # the dialect of a spelling elxpk itself used before (plan's --checkpoint-save)
_SAME = None  # an Alias default that is the row's own


class Alias(NamedTuple):
    """Another launcher's spelling of a row's quantity: its own option (so elxpk knows which spelling a
    command used), that launcher's default and reading where they differ. A command that uses any
    gcluster spelling gets gcluster's defaults for every row (elxpk/create/dialect.py); giving a row and its
    alias together is exit 2 naming both."""

    spelling: str  # "--restarts", exactly as gcluster spells it
    short: str = ""  # "-i": where no elxpk flag has it
    submit_short: str = ""  # gcluster's -n/-o: in `job submit` only, where elxpk's -n/-o (namespace, output) give way
    default: Any = _SAME  # the dialect's default, as typed ("1", "1h"); None: the row's
    kind: str = ""  # how the alias's value is read, where it is not the row's: DURATION for --grace-period
    note: str = ""  # how it differs besides (said in --help and the docs)
    dialect: str = GCLUSTER

    @property
    def key(self) -> str:
        return self.spelling[2:].replace("-", "_")


class Flag(NamedTuple):
    """One flag. `default` is what an omitted flag means (None: nothing, or derived, see `default_text`);
    `low`/`high` bound an INT, FLOAT or DURATION (inclusive), `above` from below (exclusive: `above=0` is a
    duration above zero) and `fix` ends its bounds message; `option` marks an invocation option
    (CreateOptions: it never changes the manifest); `commands` lists the commands that take it; `path` says
    whether the value is a file the command reads (INPUT) or writes (OUTPUT)."""

    name: str
    kind: str
    help: str
    default: Any = None
    panel: str | None = None
    low: int | float | None = None
    high: int | float | None = None
    choices: tuple[str, ...] = ()
    fix: str = ""
    metavar: str | None = None
    default_text: str | None = None  # the default as --help says it, where it is not `default` itself
    option: bool = False
    commands: tuple[str, ...] = ("create",)
    create_help: str = ""  # what the flag does besides, in `workload create` only (e.g. the hint)
    required: str = ""  # given, the flag must be: the fix that ends "--flag: required; ..."
    check: str = ""  # the check of its value alone, a name in elxpk/create/flag_checks.py CHECKS
    doc: str = ""  # the docs table's "what it does", where it says more than the help (Markdown)
    doc_default: str = ""  # the docs table's default, where it says more than `shown_default`
    spelling: str = ""  # the flag as typed, where it is not the name's (xpk's names, `--compile`)
    off_flag: str = ""  # a BOOL with two spellings (`--live/--plain`): the off one; omitted means None
    hidden: bool = False  # left out of --help and the docs table
    aliases: tuple[Alias, ...] = ()  # other launchers' spellings of this quantity (gcluster's)
    dialect: str = ""  # GCLUSTER: a row only gcluster's spelling has (`--compute-type`); "": elxpk's and xpk's
    submit_short: str = ""  # gcluster's short form of this very spelling (-e/--command), in `job submit` only
    above: int | float | None = None  # an exclusive lower bound: the value must be more than this
    path: str = ""  # INPUT or OUTPUT: a file the command reads or writes ("" for neither)
    short: str = ""  # its short form in every command that takes it (-w/--watch, -y/--yes)
    setting: str = ""  # a trainer setting's row (`setting_row`): read by the contract's rule, as the trainer reads it
    free_text: bool = False  # its value is any text, an option's spelling included (`--command "--dry-run=x"`)
    # A choice read case-insensitively and lower-cased (-o/--output's `JSON`); refused in -o/--output's words:
    # the flag with its short form, "use a, b or c".
    fold_case: bool = False

    @property
    def flag(self) -> str:
        """The flag as the command being read spells it (the contract's spelling context): gcluster's
        `--restarts` for --max-restarts in a gcluster command, else the row's own spelling."""
        return current().rows.get(self.name) or self.spelling or flag_name(self.name)

    @property
    def shown_default(self) -> str | None:
        """The default as --help and the docs table say it; None when there is nothing to say."""
        if self.default_text is not None:
            return self.default_text or None  # "": a long default the help need not repeat
        if self.default is None or self.kind == BOOL:
            return None
        return str(self.default)

    def full_help_without_default(self) -> str:
        return self.help + (f" {self.create_help}" if self.create_help else "")

    def full_help(self, command: str = "create") -> str:
        """The help of `command --help`: the row's help, what `workload create` does besides, the default,
        and its other spellings."""
        default = self.shown_default
        extra = f" {self.create_help}" if self.create_help and command == "create" else ""
        bounds = f" {self.bounds_sentence()}" if self.bounded else ""
        return self.help + extra + bounds + (f" Default: {default}." if default else "") + self.alias_sentence()

    def alias_sentence(self) -> str:
        """" Also gcluster's --restarts (default 1)." for each alias; "" without."""
        return "".join(f" Also {a.spelling}, its earlier spelling." if a.dialect == EARLIER else
                       f" Also {a.dialect}'s {a.spelling}{'/' + (a.short or a.submit_short) if a.short or a.submit_short else ''}"
                       f"{f' (default {a.default})' if a.default is not None else ''}{'; ' + a.note if a.note else ''}."
                       for a in self.aliases)

    def alias_help(self, alias: Alias) -> str:
        """The --help line of an alias's own option."""
        default = f" {alias.dialect.capitalize()}'s default: {alias.default}." if alias.default is not None else ""
        note = f" {alias.note[:1].upper()}{alias.note[1:]}." if alias.note else ""
        return f"{alias.dialect}'s spelling of {self.flag}: {self.help}{default}{note}"

    @property
    def bounded(self) -> bool:
        return self.low is not None or self.above is not None

    def bounds_sentence(self) -> str:
        if self.setting:  # as `workload create --help` and the trainer's docs say a setting's bounds
            return f"Bounds: {bounds_text(self.setting)}."
        if self.above is not None:
            return f"More than {range_phrase(self.rule)[len('more than '):]}."
        if self.high is not None and not _api_maximum(self.high):
            return f"From {self.low} to {self.high}."
        return f"At least {self.low}."

    @property
    def rule(self) -> ValueRule:
        """What a value of this flag may be (elxpk_contract/value_rule.py): a trainer setting's row's is the
        setting's own, so the trainer and every command refuse a value alike."""
        if self.setting:
            return setting(self.setting).rule
        low, low_open = (self.above, True) if self.above is not None else (self.low, False)
        return ValueRule(self.kind, low, self.high, low_open, choices=self.choices, fix=self.fix,
                         fold_case=self.fold_case)

    def read(self, raw: Any) -> tuple[Any, str | None]:
        """The value of this flag given as `raw` (typed text, or a value already typed), checked alone by the
        one reader (the contract's `read_value`): (value, None), or (the row's default read, one line naming
        the flag, what is wrong and the fix). Omitted (None): the default, read the same way (a duration's
        "100s" is 100.0 seconds)."""
        if raw is None:
            return (None if self.default is None else self.read(self.default)[0]), None
        named = f"{self.short}/{self.flag}" if self.fold_case and self.short else self.flag
        value, problem = read_value(self.rule, raw, named)
        return (self.read(None)[0], problem) if problem else (value, None)


def required_line(row: Flag) -> str:
    """The line asking for a required row left out: its dialect's ("" where the dialect asked already), else
    "--flag: required; FIX" (FIX's {flag} is the flag as spelled)."""
    asked = current().asked
    return asked[row.name] if row.name in asked else f"{row.flag}: required; {row.required.format(flag=row.flag)}"


def setting_row(name: str, *, default: Any, commands: tuple[str, ...], extra: str = "", **own: Any) -> Flag:
    """The row of a trainer setting that a command shares with the trainer: help, kind, bounds and fix from
    the contract's row (elxpk_contract/settings.py), `extra` ending the help with what the command adds,
    `default` and `own` (doc, doc_default, metavar, default_text, panel) the command's own. Its value is read
    by the contract's rule (`Flag.read`), so the trainer and every command that takes it refuse the same
    values with the same line."""
    row = setting(name)
    kind = {"int": INT, "float": FLOAT, "bool": BOOL}.get(row.type, TEXT)
    low, above = (None, row.low) if row.low_open else (row.low, None)
    return Flag(name, kind, f"{row.help[:1].upper()}{row.help[1:]}{extra}.", default=default, low=low, above=above,
                high=row.high, choices=row.choices, fix=row.fix, commands=commands, setting=name, **own)


def seed_row(help_text: str, *, commands: tuple[str, ...], default: int | None = None) -> Flag:
    """A command's own --seed (plan's --simulate, kill-slice's random pick): its own quantity, with the one
    rule of a seed, the trainer's (0 to 2**32 - 1: what jax's PRNG key and Python's random both take)."""
    row = setting("seed")
    return Flag("seed", INT, help_text, default=default, low=row.low, high=row.high, fix=row.fix, commands=commands)


_DEFAULT = object()  # read_all's `refused` when not given: a refused value reads as its row's default


def read_all(rows: tuple[Flag, ...], given: Mapping[str, Any], *,
             refused: Any = _DEFAULT) -> tuple[dict[str, Any], list[str]]:
    """Every row's value from `given` (name -> raw; a missing name is omitted), and one line per
    refused value, in the table's order: the one reader of every command's flags. A refused value reads as
    its row's default, or as `refused` where given (None: the checks that need it are skipped)."""
    values: dict[str, Any] = {}
    problems: list[str] = []
    for row in rows:
        values[row.name], problem = row.read(given.get(row.name))
        if problem:
            problems.append(problem)
            if refused is not _DEFAULT:
                values[row.name] = refused
    return values, problems


def merge_aliases(pairs: Mapping[str, tuple[Flag, Alias]], given: Mapping[str, Any], *,
                  read: Callable[[Flag, Alias, Any], Any] | None = None) -> tuple[dict[str, Any], list[str]]:
    """`given` (a command's flags: rows' keys and aliases' keys) with each alias's value under its row's name,
    read by `read` where the alias reads differently; one problem per quantity given in both spellings.
    `pairs` maps each alias's key to its row and itself (every command's one table of them)."""
    out = {key: value for key, value in given.items() if key not in pairs}
    problems = []
    for key, (row, alias) in pairs.items():
        value = given.get(key)
        if not given_value(value):
            continue
        if given_value(given.get(row.name)):
            fix = ("one quantity in gcluster's and elxpk's spelling; give one" if alias.dialect == GCLUSTER
                   else f"two spellings of one quantity; give {row.flag} only")  # an earlier one: the new one
            problems.append(f"{alias.spelling} and {row.flag}: {fix}")
        else:
            out[row.name] = read(row, alias, value) if read else value
    return out, problems


def alias_pairs(rows: tuple[Flag, ...]) -> dict[str, tuple[Flag, Alias]]:
    """Each alias's key, with its row and itself."""
    return {alias.key: (row, alias) for row in rows for alias in row.aliases}


def given_value(value: object) -> bool:
    """Whether a flag was given: Typer's omitted flags are None, False or empty."""
    return value is not None and value is not False and value != [] and value != ()


def free_text_flags(rows: tuple[Flag, ...]) -> tuple[str, ...]:
    """Every long spelling (aliases included) of the rows whose value is any text: the token after one is a
    user value, never rewritten as an option (elxpk/cli/main.py)."""
    return tuple(spelling for f in rows if f.free_text for spelling in (f.flag, *(a.spelling for a in f.aliases)))


def path_flags(rows: tuple[Flag, ...]) -> dict[str, str]:
    """Every spelling (aliases included) of the rows that name a file, and whether the command reads
    (INPUT) or writes (OUTPUT) it: what elxpk/cli/arg_checks.py compares."""
    return {spelling: f.path for f in rows if f.path for spelling in (f.flag, *(a.spelling for a in f.aliases))}


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def docs_table(rows: tuple[Flag, ...]) -> str:
    """`rows` as a Markdown table: flag, default, bounds or choices, what it does (hidden rows left out)."""
    lines = ["| flag | default | bounds | what it does |", "|---|---|---|---|"]
    for f in rows:
        if f.hidden:
            continue
        flag = f"{f.flag}/{f.off_flag}" if f.off_flag else f.flag
        name = f"`{flag} {f.metavar}`" if f.metavar and not f.choices else f"`{flag}`"
        if f.kind == LIST:
            name += " (repeatable)"
        shown = f.shown_default
        default_cell = f.doc_default or (f"`{shown}`" if shown else ("off" if f.kind == BOOL else "none"))
        bounds = ", ".join(f"`{c}`" for c in f.choices) if f.choices else _bounds(f)
        what = (f.doc or f.full_help_without_default()) + f.alias_sentence()
        lines.append(f"| {_cell(name)} | {_cell(default_cell)} | {bounds or '—'} | {_cell(what)} |")
    return "\n".join(lines) + "\n"


def _api_maximum(high: float) -> bool:
    """An upper bound that is only the API field's integer width (int32's or int64's maximum): the help and
    the docs say "at least" instead of a range no one reads (a value past it is still refused, by name)."""
    return high in (INT32[1], INT64[1])


def _bounds(f: Flag) -> str:
    high = None if f.high is None or _api_maximum(f.high) else f.high
    if f.above is not None:
        unit = "s" if f.kind == DURATION else ""
        return f"> {f.above}{unit}" + ("" if high is None else f", <= {high}{unit}")
    if f.low is not None and high is not None:
        return f"{f.low}..{high}"
    return f">= {f.low}" if f.low is not None else ""


def embed(page: str, rows: tuple[Flag, ...], begin: str, end: str) -> str:
    """`page` with the text between `begin` and `end` replaced by the current table of `rows`."""
    head, found, rest = page.partition(begin)
    _, found_end, tail = rest.partition(end)
    if not found or not found_end:
        raise ValueError(f"the page has no {begin!r} ... {end!r} block")
    return f"{head}{begin}\n{docs_table(rows)}{end}{tail}"
