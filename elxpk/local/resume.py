"""What an existing --run-dir holds, so a second `elxpk local run` on it resumes or extends it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from elxpk.runs.rundir import METRICS, load_run
from elxpk_contract.step_names import step_number


@dataclass(frozen=True)
class ExistingRun:
    path: Path
    steps_done: int  # steps that count, as recorded in metrics.jsonl
    checkpoint_steps: tuple[int, ...]  # committed step directories on disk (the trainer validates them)

    @property
    def fresh(self) -> bool:
        return self.steps_done == 0 and not self.checkpoint_steps

    def describe(self) -> str:
        ckpts = ", ".join(map(str, self.checkpoint_steps[-5:])) or "none"
        return (f"resuming {self.path}: {self.steps_done} steps recorded; checkpoints on disk: {ckpts}; "
                "the trainer restores the newest one that is committed and matches its digest")


def checkpoint_steps(checkpoint_dir: Path) -> tuple[int, ...]:
    """Numbered step directories (orbax finalises a step by renaming its tmp directory to the number); a
    step number is ASCII digits (elxpk_contract.step_names): `²` is no step, and no error either."""
    if not checkpoint_dir.is_dir():
        return ()
    found = ((step_number(p.name), p) for p in checkpoint_dir.iterdir())
    return tuple(sorted(step for step, p in found if step is not None and p.is_dir() and not p.is_symlink()))


def inspect_run_dir(run_dir: Path, checkpoint_dir: Path | None = None) -> ExistingRun:
    """What is there; a damaged record file is a UsageError naming --run-dir."""
    steps = len(load_run(run_dir, flag="--run-dir").final_indices()) if (run_dir / METRICS).is_file() else 0
    return ExistingRun(run_dir, steps, checkpoint_steps(checkpoint_dir or run_dir / "checkpoints"))
