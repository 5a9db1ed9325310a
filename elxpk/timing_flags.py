"""The times of a run that `workload create`/`validate` and `plan` both take, declared once: one name, one
help, one row per quantity (elxpk/flag_rows.py), shared through `commands=`.

`workload create` lists them in its table (elxpk/create/flags.py) as they are; `plan` (elxpk/plan/flags.py)
shows them in its one panel with its own docs-table words and defaults (`for_plan`). Before this table, plan
spelled two of them `--checkpoint-save` and `--replacement`: those stay as plan's aliases of the same rows
(`EARLIER` spellings; both spellings given is exit 2 naming both). Ground of the stages: standard library and
elxpk.flag_rows only.
"""

from __future__ import annotations

from typing import Any

from elxpk.flag_rows import DURATION, EARLIER, INPUT, TEXT, Alias, Flag

PANEL = "Timeouts and budgets"  # `workload create`'s help panel of the times and budgets
_CREATE = ("create", "validate")
_HINT = "Also used by the checkpoint_period hint."

SLICE_MTBF = Flag(
    "slice_mtbf", DURATION, "Mean time between failures of ONE slice (e.g. 3d; the job fails N times as often).",
    panel=PANEL, above=0, option=True, commands=("create", "plan"),
    create_help="With --step-time, prints a checkpoint_period hint.",
    doc="a duration (`3d`); with `--step-time` (or `--from-run`), the planner's `checkpoint_period` hint is "
    "printed on stderr")
STEP_TIME = Flag(
    "step_time", DURATION, "Seconds per training step (e.g. 1.5s); workload create and validate check the stall "
    "timeout (--stall-timeout-seconds) against it.", panel=PANEL, above=0, option=True, commands=(*_CREATE, "plan"),
    create_help="With --slice-mtbf, prints a checkpoint_period hint.")
CHECKPOINT_SAVE_TIME = Flag(
    "checkpoint_save_time", DURATION, "How long a checkpoint save blocks training (e.g. 45s; with async "
    "checkpointing, only the blocking part); workload create and validate check the grace period "
    "(--termination-grace-period-seconds) and the stall timeout against it.", panel=PANEL, above=0, option=True,
    commands=(*_CREATE, "plan"), create_help=_HINT,
    doc="the timeouts are checked against it, and the hint uses it (else it assumes a 20 s save)")
SLICE_REPLACEMENT_TIME = Flag(
    "slice_replacement_time", DURATION, "How long a lost slice takes to come back (e.g. 12m; failure detection "
    "included); workload create and validate check the elastic timeout (--elastic-timeout-seconds, "
    "ELXPK_ELASTIC_TIMEOUT_SECONDS) against it.", panel=PANEL, above=0, option=True, commands=(*_CREATE, "plan"),
    create_help=_HINT,
    doc="the timeouts are checked against it, and the hint uses it (else it assumes a 100 s replacement)")
FROM_RUN = Flag(
    "from_run", TEXT, "A run directory whose measured step, save and replacement times stand in for --step-time, "
    "--checkpoint-save-time and --slice-replacement-time (each flag given wins).", panel=PANEL,
    metavar="RUN_DIR", option=True, commands=(*_CREATE, "plan"), path=INPUT,
    doc="its measured step, save and replacement times (`elxpk plan --from-run`'s reader) stand in for the three "
    "flags above; a flag given wins")

FLAGS: tuple[Flag, ...] = (SLICE_MTBF, STEP_TIME, CHECKPOINT_SAVE_TIME, SLICE_REPLACEMENT_TIME, FROM_RUN)

# plan's spellings before it took create's: aliases of the same rows, in plan only (create never had them).
PLAN_ALIASES = {"checkpoint_save_time": (Alias("--checkpoint-save", dialect=EARLIER),),
                "slice_replacement_time": (Alias("--replacement", dialect=EARLIER),)}


def for_plan(row: Flag, **words: Any) -> Flag:
    """`row` as `plan` shows it: in its one panel, with its earlier spelling, and `words` (its docs-table
    `doc`/`doc_default`, its own `default`) where plan says more than create; the name and help stay."""
    return row._replace(panel=None, aliases=PLAN_ALIASES.get(row.name, ()), **words)
