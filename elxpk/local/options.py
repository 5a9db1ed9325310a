"""LocalRunOptions: every `elxpk local run` flag, validated before anything is read or written.

The settings it shares with the trainer (steps, num_slices, checkpoint_period, seed, the model) are
checked by the contract table (elxpk_contract.settings), so `local run` and the trainer refuse the same
values with the same message, and `trainer_config()` builds the trainer's `TrainerConfig` directly.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elxpk.errors import UsageError
from elxpk.flag_records import read_record
from elxpk.local import flags as table
from elxpk.local.flags import DEFAULT_CHECKPOINT_PERIOD, DEFAULT_KILL_STEP, DEFAULT_STEPS
from elxpk_contract.faults import FaultSchedule
from elxpk_contract.presets import MODEL_PRESETS
from elxpk_contract.settings import (
    ALL_SLICES,
    FIELDS,
    TrainerConfig,
    check_setting,
    default,
    flag_name,
)
from elxpk_contract.spelling import Spelling, spoken_as

DEFAULT_REVIVE_AFTER: float = table.default("revive_after")
# The wait for slices probes this often: a short poll keeps the local recovery snappy.
POLL_SECONDS = 0.2
# In-process runs call a step stalled after this long (a hang, `--kill-slice K@hang:STEP`, is seconds away
# from its recovery); the local model's steps take milliseconds. --trainer-arg=--stall-timeout-seconds wins.
STALL_TIMEOUT_SECONDS = 5.0
# A model sized so the default run takes about a minute on 2 CPU cores and its loss visibly falls;
# the trainer's own defaults are sized for a bigger machine. --trainer-arg settings win over these.
LOCAL_MODEL: dict[str, Any] = {**MODEL_PRESETS["micro"], "learning_rate": 1e-2}  # the `micro` preset's shape
# What `local run` sets itself (its flags and modes); --trainer-arg may not override them.
_OWN = {"run_dir", "steps", "num_slices", "checkpoint_period", "seed", "devices_per_slice", "slice_backend",
        "elastic_enabled", "elastic_min_slice_count", "elastic_poll_seconds", "fault", "revive_after",
        "process_id", "num_processes", "coordinator"}
_STEP_KILL = re.compile(r"(\d+)@(\d+)", re.ASCII)


@dataclass(frozen=True)
class LocalRunOptions:
    run_dir: Path
    steps: int = DEFAULT_STEPS
    num_slices: int = default("num_slices")
    devices_per_slice: int = default("devices_per_slice")  # virtual CPU devices: 2 per simulated slice
    checkpoint_period: int = DEFAULT_CHECKPOINT_PERIOD
    kill_slice: tuple[str, ...] = ()  # as given; empty means "default" (see faults_for)
    no_faults: bool = False
    revive_after: float = DEFAULT_REVIVE_AFTER
    mode: str = table.default("mode")
    seed: int = default("seed")
    live: bool | None = None  # None: a live view when stdout is a terminal
    report: bool = True
    model: dict[str, Any] = field(default_factory=lambda: dict(LOCAL_MODEL))  # model settings, checked
    revive_given: bool = False  # --revive-after was given: the resize demo's default kill then uses it

    def trainer_config(self, faults: tuple[str, ...] = ()) -> TrainerConfig:
        """The trainer's configuration for this run (the local run never reads ELXPK_* variables).

        In-process modes carry the faults and the elastic settings; multi-controller is not elastic in
        process (the supervisor restarts the group), and the supervisor injects its kills itself.
        """
        in_process = self.mode != "multi-controller"
        return TrainerConfig(
            run_dir=str(self.run_dir), steps=self.steps, checkpoint_period=self.checkpoint_period, seed=self.seed,
            num_slices=self.num_slices, devices_per_slice=self.devices_per_slice, slice_backend="simulated",
            elastic_enabled=in_process, elastic_min_slice_count=self.min_slice_count,
            elastic_poll_seconds=POLL_SECONDS, fault=faults if in_process else (),
            revive_after=self.revive_after if in_process else None,
            **{"stall_timeout_seconds": STALL_TIMEOUT_SECONDS if in_process else 0.0, **self.model},
        )

    def faults_for(self, fresh: bool) -> tuple[str, ...]:
        """The kill specs: as given; on a fresh run without fault flags, one kill of the last slice."""
        if self.no_faults:
            return ()
        if self.kill_slice:
            return self.kill_slice
        if fresh and self.num_slices >= 2 and DEFAULT_KILL_STEP < self.steps:
            kill = f"{self.num_slices - 1}@{DEFAULT_KILL_STEP}"
            if self.mode == "resize" and not self.revive_given and DEFAULT_KILL_STEP + 2 < self.steps:
                # Back after --revive-after's 1 s, the slice returned while the survivor still compiled its
                # narrower step (about 5 s here), so the resize never trained a step on it: the demo's slice
                # comes back halfway through the remaining steps instead, after the survivor trained them.
                kill += f"+{DEFAULT_KILL_STEP + (self.steps - DEFAULT_KILL_STEP) // 2}"
            return (kill,)
        return ()

    @property
    def min_slice_count(self) -> int:
        """MaxText's elastic_min_slice_count: -1 waits for all slices, 1 resizes onto any survivor."""
        return 1 if self.mode == "resize" else ALL_SLICES

    @classmethod
    def from_flags(
        cls,
        *,
        run_dir: str | None = None,
        steps: int | str | None = None,
        num_slices: int | str | None = None,
        checkpoint_period: int | str | None = None,
        kill_slice: list[str] | tuple[str, ...] | None = None,
        no_faults: bool = False,
        revive_after: str | float | None = None,
        mode: str | None = None,
        seed: int | str | None = None,
        live: bool | None = None,
        report: bool = True,
        trainer_args: tuple[str, ...] = (),
    ) -> LocalRunOptions:
        """Check every flag and report every problem at once (UsageError, one line per flag). Omitted (None):
        the row's default."""
        given = {"run_dir": run_dir, "steps": steps, "num_slices": num_slices, "checkpoint_period": checkpoint_period,
                 "seed": seed, "mode": mode, "revive_after": revive_after}
        # Each value alone, by its row (one line naming the flag); a refused one is None: the checks that
        # need it are skipped.
        own, problems = read_record(table.LocalFlags, table.ROWS, given, refused=None)
        # the rows `local run` shares with the trainer, whole (LocalRunOptions has a field of each name)
        shared = {name: value for name, value in own.as_dict().items() if name in _SHARED}
        mode, revive = own.mode, own.revive_after
        kills = tuple(k.strip() for k in (kill_slice or ()))
        if mode == "resize" and own.num_slices is not None and own.num_slices < 2:
            problems.append("--mode resize: needs --num-slices 2 or more (it continues on the survivors)")
        if kills and no_faults:
            problems.append("--no-faults: conflicts with --kill-slice; give one of them")
        problems.extend(_kill_problems(kills, own.num_slices, own.steps, mode, revive))
        run_dir_value, run_dir_problem = check_setting("run_dir", own.run_dir)
        if run_dir_problem:
            problems.append(run_dir_problem)
        elif "://" in str(run_dir_value):  # the supervisor tails and appends to its files: this machine's disk
            problems.append(f"--run-dir {run_dir_value}: `elxpk local run` needs a local directory (it watches and "
                            "appends to the run's files); give one, e.g. elxpk-run, and read a trainer's gs:// run "
                            "with `elxpk report`")
        model = dict(LOCAL_MODEL)
        problems.extend(_model_overrides(trainer_args, model))
        if problems or mode is None or revive is None:  # a refused value (None) is among the problems
            raise UsageError(*problems)
        opts = cls(run_dir=Path(run_dir_value), kill_slice=kills, no_faults=no_faults, revive_after=revive, mode=mode,
                   live=live, report=report, model=model, revive_given=revive_after is not None, **shared)
        with in_local_words():
            opts.trainer_config(opts.faults_for(fresh=True))  # the trainer's cross-field checks, before any I/O
        return opts


_SHARED = frozenset(row.name for row in table.SHARED)
# The trainer settings `local run` has a flag for, as it spells them: its rows of the same name, and --kill-slice
# (the trainer's --fault); the rest of what it sets itself has no flag here.
_LOCAL_SPELLING = {"fault": "--kill-slice", **{row.name: row.flag for row in table.ROWS if row.name in FIELDS}}


def local_name(name: str) -> str:
    """The trainer setting `name` as `local run` takes it: its own flags as they are, every other setting as
    --trainer-arg=--NAME (what it sets itself without a flag keeps the trainer's name)."""
    if name in _LOCAL_SPELLING:
        return _LOCAL_SPELLING[name]
    return f"--trainer-arg={flag_name(name)}" if name in FIELDS and name not in _OWN else flag_name(name)


def in_local_words() -> contextlib.AbstractContextManager[None]:
    """The trainer's checks and run within it name their settings as `local run` takes them."""
    return spoken_as(Spelling(namer=local_name))


def _model_overrides(args: tuple[str, ...], model: dict[str, Any]) -> list[str]:
    """--trainer-arg=--NAME=VALUE: a trainer setting outside what local run sets, checked by the table."""

    problems = []
    for arg in args:
        flag, _, raw = arg.partition("=")
        name = flag.removeprefix("--").replace("-", "_")
        if not flag.startswith("--") or not _ or name not in FIELDS or name in _OWN or FIELDS[name].internal:
            problems.append(f"--trainer-arg {arg!r}: use --NAME=VALUE for a trainer setting that local run does "
                            "not set itself, e.g. --trainer-arg=--d-model=64")
            continue
        value, problem = check_setting(name, raw, flag_name(name))
        if problem:
            problems.append(f"--trainer-arg={problem}")
        else:
            model[name] = value
    return problems


def config_flags(cfg: TrainerConfig) -> list[str]:
    """The `python -m trainer` flags that reproduce `cfg` (every setting that differs from its default);
    the multi-controller supervisor starts its processes with them."""
    flags: list[str] = []
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if value == f.default:
            continue
        name = flag_name(f.name)
        if isinstance(value, bool):
            flags.append(name if value else "--no-" + name[2:])
        elif isinstance(value, tuple):
            for item in value:
                flags += [name, str(item)]
        else:
            flags += [name, repr(value) if isinstance(value, float) else str(value)]
    return flags


def _kill_problems(kills: tuple[str, ...], num_slices: int | None, steps: int | None, mode: str | None,
                   revive_after: float | None) -> list[str]:
    """Each kill spec against the slices and steps (None: that flag was refused; its checks are skipped).
    The contract's grammar and rules (elxpk_contract.faults), the same for every fault kind as the
    trainer's; multi-controller kills a process at a step, so it takes K@STEP only."""
    problems = []
    for spec in kills:
        if mode == "multi-controller" and not _STEP_KILL.fullmatch(spec):
            problems.append(f"--kill-slice {spec!r}: multi-controller kills a process at a step; use K@STEP, e.g. 1@120")
            continue
        problems.extend(_trainer_grammar(spec, num_slices, steps, revive_after))
    return problems


def _trainer_grammar(spec: str, num_slices: int | None, steps: int | None, revive_after: float | None) -> list[str]:
    """The trainer's fault grammar (K@S, K@mid:S, K@save:S, K@data:S, K@hang:S, K@sick:S, K@restore,
    +REVIVE): the contract's checks, named as this command's flag."""

    with in_local_words():
        try:
            schedule = FaultSchedule.parse([spec], revive_after)
        except ValueError as exc:
            return str(exc).splitlines()
        return schedule.problems(num_slices, steps) if num_slices is not None else []
