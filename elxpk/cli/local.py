"""`elxpk local run`: the bundled trainer on this machine, a slice killed on purpose, and the recovery.

Its flags are rows (`with_flags`: help, default and bounds from the rows): its own in elxpk/local/flags.py,
and the settings it shares with the trainer (--steps, --num-slices, --checkpoint-period, --seed) as rows of
the contract table with the local defaults (`SHARED`), read by the contract's rule, so `--steps abc` gets
the trainer's own line.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from elxpk.cli.options import NO_FLAGS, with_flags
from elxpk.local import flags as table


@with_flags("local run", table.ROWS)
def run(flags: Mapping[str, Any] = NO_FLAGS) -> None:
    """Train here with simulated slices, kill one, and watch the run restore and continue."""
    from elxpk.local.options import LocalRunOptions
    from elxpk.local.run import local_run

    given = dict(flags)
    opts = LocalRunOptions.from_flags(trainer_args=tuple(given.pop("trainer_arg") or ()), **given)
    local_run(opts)
