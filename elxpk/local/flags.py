"""`elxpk local run`'s own flags, declared once: type, default, bounds, help (elxpk/flag_rows.py's row type).

elxpk/cli/local.py gets its Typer parameters from these rows (`with_flags`), LocalRunOptions
(elxpk/local/options.py) reads every value with its row (`read_all`: the kind, choices and bounds, one line
naming the flag) and takes the defaults from here, and docs/local.md's flag table is generated from them
(`embed`). The settings `local run` shares with the trainer (--steps, --num-slices, --checkpoint-period,
--seed) are rows of the contract table (`SHARED`, `setting_row`: read by the contract's rule, as the trainer
reads them) with the local defaults.
"""

from __future__ import annotations

from typing import Any

from elxpk import flag_rows
from elxpk.flag_records import Record
from elxpk.flag_rows import BOOL, DURATION, LIST, TEXT, Flag, setting_row
from elxpk_contract.settings import default as trainer_default

MODES = ("pause-resume", "resize", "multi-controller")
# The local run's defaults of the settings it shares with the trainer, where they differ from the trainer's:
# 300 steps with a kill at step 120 is a run of about a minute whose first minute shows a recovery;
# a checkpoint every 50 steps (the trainer's default is 100) makes that kill rewind 20 steps, not 20 of
# a 100-step period, so the recovery costs seconds while its rewind is still visible in the report.
DEFAULT_STEPS = 300
DEFAULT_CHECKPOINT_PERIOD = 50
DEFAULT_KILL_STEP = 120
_LOCAL = ("local run",)

FLAGS: tuple[Flag, ...] = (
    Flag("run_dir", TEXT, "Run directory; an existing one is resumed.", default="elxpk-run", metavar="DIR",
         commands=_LOCAL),
    Flag("kill_slice", LIST, "Kill slice K at step S: K@S (repeatable); also K@mid:S (while step S runs), "
         "K@save:S, K@data:S, K@restore, K@hang:S (K stops making progress; the 5 s stall timeout recovers "
         "it), and K@sick:S (K dies at S and comes back failing its health check: never rejoins).",
         metavar="K@STEP", commands=_LOCAL,
         default_text=f"on a fresh run, the last slice at step {DEFAULT_KILL_STEP}",
         doc_default=f"on a fresh run, the last slice at step {DEFAULT_KILL_STEP}"),
    Flag("no_faults", BOOL, "Inject no fault (a reference run).", default=False, commands=_LOCAL),
    Flag("mode", TEXT, "pause-resume, resize (continue on survivors) or multi-controller.",
         default="pause-resume", choices=MODES, metavar="MODE", commands=_LOCAL),
    Flag("revive_after", DURATION, "Seconds until a killed slice is back (e.g. 2, 1.5s).", default="1s",
         low=0, metavar="SECONDS", commands=_LOCAL, fix="seconds, e.g. 2 or 1.5s"),
    Flag("live", BOOL, "Live view or plain lines.", off_flag="--plain", commands=_LOCAL,
         default_text="live on a terminal", doc_default="live on a terminal"),
    Flag("trainer_arg", LIST, "A trainer setting that local run does not set itself, e.g. "
         "--trainer-arg=--recovery=checkpoint or --trainer-arg=--d-model=64.",
         metavar="--NAME=VALUE", commands=_LOCAL),
)

BY_NAME: dict[str, Flag] = {f.name: f for f in FLAGS}

# The trainer settings `local run` takes: the contract's rows (read by its rule), with the local run's defaults.
SHARED: tuple[Flag, ...] = (
    setting_row("steps", default=DEFAULT_STEPS, commands=_LOCAL,
                extra="; more than done extends a run",
                doc="train steps; more than a resumed run has done extends it"),
    setting_row("num_slices", default=trainer_default("num_slices"), commands=_LOCAL,
                extra=" (simulated, 2 CPU devices each)",
                doc="simulated slices, 2 virtual CPU devices each"),
    setting_row("checkpoint_period", default=DEFAULT_CHECKPOINT_PERIOD, commands=_LOCAL),
    setting_row("seed", default=trainer_default("seed"), commands=_LOCAL),
)
# Every row of `local run`, in --help's and the docs table's order: --run-dir, the shared settings, the rest.
ROWS: tuple[Flag, ...] = FLAGS[:1] + SHARED + FLAGS[1:]


class LocalFlags(Record):
    """ROWS' values as `local run` reads them (elxpk/local/options.py): a refused one is None, so every
    attribute may be."""

    run_dir: str | None
    steps: int | None
    num_slices: int | None
    checkpoint_period: int | None
    seed: int | None
    kill_slice: list[str] | None
    no_faults: bool | None
    mode: str | None
    revive_after: float | None
    live: bool | None
    trainer_arg: list[str] | None


def default(name: str) -> Any:
    """The row's default as `local run` uses it (a duration in seconds)."""
    return BY_NAME[name].read(None)[0]


BEGIN = "<!-- local-flag-table:begin (generated from elxpk/local/flags.py) -->"
END = "<!-- local-flag-table:end -->"


def embed(page: str) -> str:
    """`page` with the text between BEGIN and END replaced by the current table (the shared settings after
    --run-dir)."""
    return flag_rows.embed(page, ROWS, BEGIN, END)
