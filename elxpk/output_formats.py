"""`-o/--output`: one vocabulary per kind of command, checked by one function (the CLI and the spec use it)."""

from __future__ import annotations

from elxpk.errors import UsageError

# What `-o/--output` accepts for each kind of command. The first is the default.
OUTPUT_FORMATS: dict[str, tuple[str, ...]] = {
    "manifest": ("yaml", "json"),  # workload create: the rendered manifest
    "status": ("table", "json", "yaml"),  # workload status|list|wait
    "run": ("text", "json"),  # report, compare
    "plan": ("table", "json"),  # plan
}


def output_problem(kind: str, value: str) -> str | None:
    """One line naming the flag and the accepted words, or None when `value` is one of them."""
    formats = OUTPUT_FORMATS[kind]
    if value.lower() in formats:
        return None
    return f"-o/--output {value!r}: use {', '.join(formats[:-1])} or {formats[-1]}"


def output_format(kind: str, value: str) -> str:
    """`value` checked against the kind's vocabulary (case-insensitive), lower-cased; UsageError if not."""
    problem = output_problem(kind, value)
    if problem:
        raise UsageError(problem)
    return value.lower()
