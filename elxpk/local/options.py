"""LocalRunOptions: every `elxpk local run` flag, validated before anything is read or written."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from elxpk.errors import UsageError
from elxpk.units import parse_duration

MODES = ("pause-resume", "resize", "multi-controller")
# A fresh run with no fault flags gets one kill, so the first thing a user sees is a recovery.
DEFAULT_STEPS = 300
DEFAULT_CHECKPOINT_PERIOD = 50
DEFAULT_KILL_STEP = 120
DEFAULT_REVIVE_AFTER = 1.0
# A model sized so the default run takes about a minute on 2 CPU cores and its loss visibly falls;
# the trainer's own defaults are sized for a bigger machine. --trainer-arg flags come after and win.
LOCAL_MODEL = ("--d-model", "128", "--n-layers", "2", "--n-heads", "4", "--d-ff", "512", "--seq-len", "32",
               "--vocab-size", "256", "--learning-rate", "1e-2")
_STEP_KILL = re.compile(r"^(\d+)@(\d+)$")


@dataclass(frozen=True)
class LocalRunOptions:
    run_dir: Path
    steps: int = DEFAULT_STEPS
    num_slices: int = 2
    devices_per_slice: int = 2
    checkpoint_period: int = DEFAULT_CHECKPOINT_PERIOD
    kill_slice: tuple[str, ...] = ()  # as given; empty means "default" (see faults_for)
    no_faults: bool = False
    revive_after: float = DEFAULT_REVIVE_AFTER
    mode: str = "pause-resume"
    seed: int = 0
    live: bool | None = None  # None: a live view when stdout is a terminal
    report: bool = True
    trainer_args: tuple[str, ...] = field(default=())  # extra trainer flags (model size in tests/bench)

    def trainer_flags(self) -> list[str]:
        """The trainer flags every mode shares; the local run never reads ELXPK_* variables."""
        return [
            "--run-dir", str(self.run_dir),
            "--steps", str(self.steps),
            "--checkpoint-period", str(self.checkpoint_period),
            "--devices-per-slice", str(self.devices_per_slice),
            "--seed", str(self.seed),
            *LOCAL_MODEL,
            *self.trainer_args,
        ]

    def faults_for(self, fresh: bool) -> tuple[str, ...]:
        """The kill specs: as given; on a fresh run without fault flags, one kill of the last slice."""
        if self.no_faults:
            return ()
        if self.kill_slice:
            return self.kill_slice
        if fresh and self.num_slices >= 2 and DEFAULT_KILL_STEP < self.steps:
            return (f"{self.num_slices - 1}@{DEFAULT_KILL_STEP}",)
        return ()

    @property
    def min_slice_count(self) -> int:
        """MaxText's elastic_min_slice_count: -1 waits for all slices, 1 resizes onto any survivor."""
        return 1 if self.mode == "resize" else -1

    @classmethod
    def from_flags(
        cls,
        *,
        run_dir: str,
        steps: int,
        num_slices: int,
        checkpoint_period: int,
        kill_slice: list[str] | tuple[str, ...] | None,
        no_faults: bool,
        revive_after: str | float,
        mode: str,
        seed: int,
        live: bool | None = None,
        report: bool = True,
        trainer_args: tuple[str, ...] = (),
    ) -> LocalRunOptions:
        """Check every flag and report every problem at once (UsageError, one line per flag)."""
        problems: list[str] = []
        kills = tuple(k.strip() for k in (kill_slice or ()))
        if steps < 1:
            problems.append(f"--steps {steps}: must be at least 1, e.g. --steps {DEFAULT_STEPS}")
        if num_slices < 1:
            problems.append(f"--num-slices {num_slices}: must be at least 1, e.g. --num-slices 2")
        if checkpoint_period < 1:
            problems.append(f"--checkpoint-period {checkpoint_period}: must be at least 1, e.g. 50")
        if seed < 0:
            problems.append(f"--seed {seed}: must be 0 or more")
        if mode not in MODES:
            problems.append(f"--mode {mode!r}: use one of {', '.join(MODES)}")
        if mode == "resize" and num_slices < 2:
            problems.append("--mode resize: needs --num-slices 2 or more (it continues on the survivors)")
        if kills and no_faults:
            problems.append("--no-faults: conflicts with --kill-slice; give one of them")
        try:
            revive = parse_duration(revive_after)
            if revive < 0:
                raise ValueError("must be 0 or more")
        except ValueError as exc:
            problems.append(f"--revive-after {revive_after!r}: {exc}; give seconds, e.g. 2 or 1.5s")
            revive = DEFAULT_REVIVE_AFTER
        problems.extend(_kill_problems(kills, num_slices, steps, mode))
        if not str(run_dir).strip():
            problems.append("--run-dir: must not be empty")
        if problems:
            raise UsageError(*problems)
        return cls(
            run_dir=Path(run_dir),
            steps=steps,
            num_slices=num_slices,
            checkpoint_period=checkpoint_period,
            kill_slice=kills,
            no_faults=no_faults,
            revive_after=revive,
            mode=mode,
            seed=seed,
            live=live,
            report=report,
            trainer_args=tuple(trainer_args),
        )


def _kill_problems(kills: tuple[str, ...], num_slices: int, steps: int, mode: str) -> list[str]:
    problems = []
    for spec in kills:
        match = _STEP_KILL.match(spec)
        if mode == "multi-controller" and not match:
            problems.append(f"--kill-slice {spec!r}: multi-controller kills a process at a step; use K@STEP, e.g. 1@120")
            continue
        if not match:
            problems.extend(_trainer_grammar(spec, num_slices))
            continue
        k, step = int(match.group(1)), int(match.group(2))
        if k >= num_slices:
            problems.append(
                f"--kill-slice {spec!r}: slice {k} does not exist with --num-slices {num_slices} "
                f"(slices are 0..{num_slices - 1})"
            )
        if steps >= 1 and step >= steps:
            problems.append(f"--kill-slice {spec!r}: step {step} is never reached with --steps {steps}; "
                            f"kill at a step below {steps}")
    return problems


def _trainer_grammar(spec: str, num_slices: int) -> list[str]:
    """The trainer's richer fault grammar (K@save:S, K@data:S, K@restore, +REVIVE): its own checks."""
    try:
        from trainer.faults import FaultSchedule
    except ImportError:  # the trainer extra is not installed: only K@STEP is understood here
        return [f"--kill-slice {spec!r}: expected K@STEP, e.g. 1@120"]
    try:
        schedule = FaultSchedule.parse([spec])
    except ValueError as exc:
        return [line.replace("--fault", "--kill-slice", 1) for line in str(exc).splitlines()]
    return [p.replace("--fault", "--kill-slice", 1) for p in schedule.problems(num_slices)]
