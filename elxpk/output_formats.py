"""`-o/--output`: one vocabulary per kind of command, declared once as a flag row per kind (`OUTPUT_ROWS`),
which `Flag.read` reads with the command's other flags (the CLI and the spec use it)."""

from __future__ import annotations

from elxpk.errors import UsageError
from elxpk.flag_rows import TEXT, Flag

# What `-o/--output` accepts for each kind of command. The first is the default.
OUTPUT_FORMATS: dict[str, tuple[str, ...]] = {
    "manifest": ("yaml", "json"),  # workload create: the rendered manifest
    "status": ("table", "json", "yaml"),  # workload status|list|wait
    "run": ("text", "json"),  # report, compare
    "plan": ("table", "json"),  # plan
}
_COMMANDS = {"manifest": ("create",), "status": ("status", "list", "wait"),
             "run": ("report", "compare", "events", "checkpoint inspect"), "plan": ("plan",)}


def words(formats: tuple[str, ...]) -> str:
    """"table, json or yaml": the formats as the help and the message say them."""
    return ", ".join(formats[:-1]) + f" or {formats[-1]}"


# The row of `-o/--output` of each kind: its value read case-insensitively (`fold_case`), lower-cased.
OUTPUT_ROWS: dict[str, Flag] = {
    kind: Flag("output", TEXT, f"Output format: {words(formats)}.", default=formats[0], choices=formats,
               metavar="FORMAT", short="-o", fold_case=True, commands=_COMMANDS[kind])
    for kind, formats in OUTPUT_FORMATS.items()}


def output_problem(kind: str, value: str) -> str | None:
    """One line naming the flag and the accepted words, or None when `value` is one of them."""
    return OUTPUT_ROWS[kind].read(value)[1]


def output_format(kind: str, value: str) -> str:
    """`value` checked against the kind's vocabulary (case-insensitive), lower-cased; UsageError if not."""
    fmt, problem = OUTPUT_ROWS[kind].read(value)
    if problem:
        raise UsageError(problem)
    return str(fmt)
