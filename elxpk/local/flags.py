"""`elxpk local run`'s own flags, declared once: type, default, bounds, help (elxpk/flag_rows.py's row type).

elxpk/cli/local.py gets its Typer parameters from these rows (`with_flags`), LocalRunOptions
(elxpk/local/options.py) reads each value with its row (`Flag.read`: the kind, choices and bounds, one line
naming the flag) and takes the defaults from here, and docs/local.md's flag table is generated from them
(`embed`). The settings `local run` shares with the trainer (--steps, --num-slices, --checkpoint-period,
--seed) come from the contract (elxpk_contract/settings.py). Standard library only: read on every start.
"""

from __future__ import annotations

from typing import Any

from elxpk import flag_rows
from elxpk.flag_rows import BOOL, DURATION, LIST, TEXT, Flag

MODES = ("pause-resume", "resize", "multi-controller")
# A kill at step 120 of the default 300-step run: its first minute shows a recovery.
DEFAULT_KILL_STEP = 120
_LOCAL = ("local run",)

FLAGS: tuple[Flag, ...] = (
    Flag("run_dir", TEXT, "Run directory; an existing one is resumed.", default="elxpk-run", metavar="DIR",
         commands=_LOCAL),
    Flag("kill_slice", LIST, "Kill slice K at step S: K@S (repeatable); also K@mid:S (while step S runs), "
         "K@save:S, K@data:S, K@restore, K@hang:S (K stops making progress; the 5 s stall timeout recovers "
         "it), and K@sick:S (K dies at S and comes back failing its health check: never rejoins).",
         metavar="K@STEP", commands=_LOCAL,
         default_text=f"on a fresh run, the last slice at step {DEFAULT_KILL_STEP}"),
    Flag("no_faults", BOOL, "Inject no fault (a reference run).", default=False, commands=_LOCAL),
    Flag("mode", TEXT, "pause-resume, resize (continue on survivors) or multi-controller.",
         default="pause-resume", choices=MODES, metavar="MODE", commands=_LOCAL),
    Flag("revive_after", DURATION, "Seconds until a killed slice is back (e.g. 2, 1.5s).", default="1s",
         low=0, metavar="SECONDS", commands=_LOCAL, fix="seconds, e.g. 2 or 1.5s"),
    Flag("live", BOOL, "Live view or plain lines.", off_flag="--plain", commands=_LOCAL,
         default_text="live on a terminal"),
    Flag("trainer_arg", LIST, "A model setting, e.g. --d-model=64.", hidden=True, commands=_LOCAL),
)

BY_NAME: dict[str, Flag] = {f.name: f for f in FLAGS}


def default(name: str) -> Any:
    """The row's default as `local run` uses it (a duration in seconds)."""
    return BY_NAME[name].read(None)[0]


BEGIN = "<!-- local-flag-table:begin (generated from elxpk/local/flags.py) -->"
END = "<!-- local-flag-table:end -->"


def embed(page: str) -> str:
    """`page` with the text between BEGIN and END replaced by the current table."""
    return flag_rows.embed(page, FLAGS, BEGIN, END)
