"""`elxpk local run`: the bundled trainer on this machine, a slice killed on purpose, and the recovery.

Its own flags are rows of elxpk/local/flags.py (`with_flags`: help, default and bounds from the rows). The
settings it shares with the trainer take their flag, help and bounds from the contract table
(elxpk/cli/options.py `setting_option`) and are checked by it (as text, so `--steps abc` gets the trainer's
own message); their local defaults are in elxpk/local/flags.py too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from elxpk.cli.options import NO_FLAGS, setting_option, with_flags
from elxpk.local import flags as table
from elxpk_contract.settings import default


@with_flags("local run", table.FLAGS)
def run(
    flags: Mapping[str, Any] = NO_FLAGS,
    steps: Annotated[str, setting_option("steps", extra="; more than done extends a run", metavar="N")
                     ] = str(table.DEFAULT_STEPS),
    num_slices: Annotated[str, setting_option("num_slices", extra=" (simulated, 2 CPU devices each)", metavar="S")
                          ] = str(default("num_slices")),
    checkpoint_period: Annotated[str, setting_option("checkpoint_period", metavar="P")
                                 ] = str(table.DEFAULT_CHECKPOINT_PERIOD),
    seed: Annotated[str, setting_option("seed", metavar="X")] = str(default("seed")),
) -> None:
    """Train here with simulated slices, kill one, and watch the run restore and continue."""
    from elxpk.local.options import LocalRunOptions
    from elxpk.local.run import local_run

    given = dict(flags)
    opts = LocalRunOptions.from_flags(
        steps=steps, num_slices=num_slices, checkpoint_period=checkpoint_period, seed=seed,
        trainer_args=tuple(given.pop("trainer_arg") or ()), **given,
    )
    local_run(opts)
