"""The flags of `elxpk checkpoint inspect DIR`, declared once as rows (elxpk/flag_rows.py): elxpk/cli/checkpoint.py
gets its Typer options from them (elxpk/cli/options.py `with_flags`) and reads them with `flag_rows.read_all`;
the image's pre-start check (elxpk/checkpoints/__main__.py) reads --checkpoint-period with the same row, so
both refuse the same values with the same line; the command reads them, then -o, into `InspectFlags`.
Standard library, elxpk.flag_rows and elxpk.flag_records only."""

from __future__ import annotations

from elxpk.errors import UsageError
from elxpk.flag_records import Record
from elxpk.flag_rows import BOOL, Flag, setting_row

COMMAND = "checkpoint inspect"

# The trainer setting's row (read by the contract's rule, as `plan`, `local run` and the trainer read it).
CHECKPOINT_PERIOD = setting_row(
    "checkpoint_period", default=None, commands=(COMMAND,), metavar="STEPS",
    extra=", as the run was given; a gap of two periods or more with no committed save is a finding",
    default_text="the smallest gap between the saves found")

INSPECT: tuple[Flag, ...] = (
    CHECKPOINT_PERIOD,
    Flag("quarantine", BOOL, "Move torn steps to DIR/elxpk-quarantine/<step>-<ms>/ (never deleted), as the trainer "
         "does, so a MaxText restart restores the newest whole step. Only while nothing writes to DIR.",
         default=False, commands=(COMMAND,)),
)



class InspectFlags(Record):
    """INSPECT's values, then -o's."""

    checkpoint_period: int | None
    quarantine: bool
    output: str


def checkpoint_period(text: str | None) -> int | None:
    """--checkpoint-period as typed: the period (None when not given); UsageError naming the flag otherwise."""
    value, problem = CHECKPOINT_PERIOD.read(text)
    if problem:
        raise UsageError(problem)
    return value
