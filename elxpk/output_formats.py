"""`-o/--output`: one vocabulary per kind of command, declared once as a flag row per kind (`OUTPUT_ROWS`).
Each command reads its -o row with its other flags (`Flag.read`, `read_all`), so a bad format is one more line
among the command's problems; elxpk/cli/options.py `output_option` makes the Typer option from the row."""

from __future__ import annotations

from elxpk.flag_rows import TEXT, Flag, either

# What `-o/--output` accepts for each kind of command. The first is the default.
OUTPUT_FORMATS: dict[str, tuple[str, ...]] = {
    "manifest": ("yaml", "json"),  # workload create: the rendered manifest
    "status": ("table", "json", "yaml"),  # workload status|list|wait
    "run": ("text", "json"),  # report, compare, events, checkpoint inspect, validate
    "plan": ("table", "json"),  # plan
}
_COMMANDS = {"manifest": ("create", "job submit"), "status": ("status", "list", "wait"),
             "run": ("report", "compare", "events", "checkpoint inspect", "validate"), "plan": ("plan",)}

# The -o/--output row of each kind: read case-insensitively and lower-cased (`fold_case`), refused as
# "-o/--output 'xml': use table, json or yaml".
OUTPUT_ROWS: dict[str, Flag] = {
    kind: Flag("output", TEXT, f"Output format: {either(formats)}.", default=formats[0], choices=formats,
               metavar="FORMAT", short="-o", fold_case=True, commands=_COMMANDS[kind])
    for kind, formats in OUTPUT_FORMATS.items()}
