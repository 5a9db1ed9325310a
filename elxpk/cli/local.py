"""`elxpk local run`: the bundled trainer on this machine, a slice killed on purpose, and the recovery.

The settings it shares with the trainer take their flag, help and bounds from the contract table
(elxpk/cli/options.py `setting_option`) and are checked by it
(as text, so `--steps abc` gets the trainer's own message); the local defaults are in local/options.py.
"""

from __future__ import annotations

from typing import Annotated

import typer

from elxpk.cli.options import setting_option
from elxpk.local import options as defaults
from elxpk_contract.settings import default


def run(
    run_dir: Annotated[str, typer.Option("--run-dir", metavar="DIR", help="Run directory; an existing one is resumed.")] = "elxpk-run",
    steps: Annotated[str, setting_option("steps", extra="; more than done extends a run", metavar="N")
                     ] = str(defaults.DEFAULT_STEPS),
    num_slices: Annotated[str, setting_option("num_slices", extra=" (simulated, 2 CPU devices each)", metavar="S")
                          ] = str(default("num_slices")),
    checkpoint_period: Annotated[str, setting_option("checkpoint_period", metavar="P")
                                 ] = str(defaults.DEFAULT_CHECKPOINT_PERIOD),
    kill_slice: Annotated[
        list[str] | None,
        typer.Option("--kill-slice", metavar="K@STEP", help="Kill slice K at step S: K@S (repeatable); also K@mid:S (while step S runs), K@save:S, K@data:S, "
                     "K@restore, K@hang:S (K stops making progress; the 5 s stall timeout recovers it), and "
                     "K@sick:S (K dies at S and comes back failing its health check: never rejoins). "
                     "Default on a fresh run: "
                     f"the last slice at step {defaults.DEFAULT_KILL_STEP}."),
    ] = None,
    no_faults: Annotated[bool, typer.Option("--no-faults", help="Inject no fault (a reference run).")] = False,
    revive_after: Annotated[
        str, typer.Option("--revive-after", metavar="SECONDS", help="Seconds until a killed slice is back (e.g. 2, 1.5s).")
    ] = str(defaults.DEFAULT_REVIVE_AFTER),
    mode: Annotated[
        str, typer.Option("--mode", metavar="MODE", help="pause-resume, resize (continue on survivors) or multi-controller.")
    ] = "pause-resume",
    seed: Annotated[str, setting_option("seed", metavar="X")] = str(default("seed")),
    live: Annotated[
        bool | None, typer.Option("--live/--plain", help="Live view or plain lines [default: live on a terminal].")
    ] = None,
    trainer_arg: Annotated[
        list[str] | None, typer.Option("--trainer-arg", hidden=True, help="A model setting, e.g. --d-model=64.")
    ] = None,
) -> None:
    """Train here with simulated slices, kill one, and watch the run restore and continue."""
    from elxpk.local.options import LocalRunOptions
    from elxpk.local.run import local_run

    opts = LocalRunOptions.from_flags(
        run_dir=run_dir, steps=steps, num_slices=num_slices, checkpoint_period=checkpoint_period,
        kill_slice=kill_slice, no_faults=no_faults, revive_after=revive_after, mode=mode, seed=seed,
        live=live, trainer_args=tuple(trainer_arg or ()),
    )
    local_run(opts)

