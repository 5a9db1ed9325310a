"""Measured costs from a run directory: step, save, restore and more.

Every figure is a median over the run's samples, so one slow first step or one slow save does not set
the plan. The run is read by the one reader of run directories (elxpk.runs.rundir.load_run) and used
through its typed records. Nothing here imports jax: a run directory is JSON lines plus checkpoints.
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from elxpk.columns import sorted_values
from elxpk.errors import UsageError
from elxpk.runs.rundir import load_run
from elxpk_contract.event_records import (
    CheckpointSaved,
    Event,
    FailureDetected,
    RestoreDone,
    RestoreStarted,
    RunFinished,
    RunStarted,
    SlicesReady,
)
from elxpk_contract.step_names import step_number


@dataclass(frozen=True)
class Calibration:
    run_dir: str | None
    step_time_s: float | None = None
    save_s: float | None = None
    save_method: str = ""
    restore_s: float | None = None
    replacement_s: float | None = None
    compile_s: float | None = None
    checkpoint_size_bytes: float | None = None
    num_slices: int | None = None
    checkpoint_period: int | None = None
    max_to_keep: int | None = None
    steps_sampled: int = 0
    saves_sampled: int = 0
    restores_sampled: int = 0
    notes: tuple[str, ...] = ()

    @classmethod
    def empty(cls) -> Calibration:
        return cls(run_dir=None)

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def _median(values: Sequence[float]) -> float:
    # Not statistics.median: importing statistics pulls in random, decimal and fractions (CLI start-up).
    ordered = sorted_values(values) if isinstance(values, array) else sorted(values)  # a column: chunk by chunk
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


_End = TypeVar("_End", bound=Event)


def _pairs(events: Sequence[Event], start: type[Event], end: type[_End]) -> list[tuple[float, _End]]:
    """(duration, end event) from each `start` event to the next `end` event."""
    out, began = [], None
    for e in events:
        if isinstance(e, start):
            began = e.time
        elif isinstance(e, end) and began is not None:
            out.append((e.time - began, e))
            began = None
    return out


def _newest_checkpoint_bytes(ckpt_dir: Path) -> float | None:
    """Bytes of the newest numbered step directory (orbax layout: one directory per step). A step number is
    ASCII digits (elxpk_contract.step_names); no link is followed, so a step linked to `/` is not summed."""
    try:
        return _step_bytes(ckpt_dir)
    except OSError:  # unreadable, or changed while listed: the size is not known, nothing else is wrong
        return None


def _step_bytes(ckpt_dir: Path) -> float | None:
    if not ckpt_dir.is_dir():
        return None
    steps = [(n, p) for p in ckpt_dir.iterdir() if (n := step_number(p.name)) is not None
             and p.is_dir() and not p.is_symlink()]
    if not steps:
        return None
    _, newest = max(steps, key=lambda pair: pair[0])
    total, pending = 0, [newest]
    while pending:
        with os.scandir(pending.pop()) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    pending.append(Path(entry.path))
                elif entry.is_file(follow_symlinks=False):
                    total += entry.stat(follow_symlinks=False).st_size
    return float(total)


def calibrate(run_dir: str | Path) -> Calibration:
    """Read `run_dir` (local or gs://); raise UsageError naming --from-run when it is not a usable run
    directory."""

    run = load_run(run_dir, flag="--from-run")
    if not run.metrics:
        raise UsageError(
            f"--from-run: {str(run_dir)!r} has no step records in metrics.jsonl; give the directory of a run "
            "that trained at least one step"
        )
    info, notes = run.info, []

    times = array("d", (t for t in run.metrics.step_time if t > 0))  # a column: a run may hold millions
    step_time = _median(times) if times else None
    # The trainer compiles ahead of each attempt's first step and reports it on restore_done.
    compiles = [e.compile_s for e in run.events_of(RestoreDone) if e.compile_s > 0]
    compile_s = _median(compiles) if compiles else None

    saves = run.events_of(CheckpointSaved)
    blocking = [e.blocking_s for e in saves if e.blocking_s > 0]
    save_s, save_method = None, ""
    if blocking:
        save_s, save_method = _median(blocking), "median blocking time of checkpoint_saved events"
    elif saves and times:
        start = next((e.time for e in run.events_of(RunStarted)), None)
        end = next((e.time for e in reversed(run.events_of(RunFinished))), None)
        # Not a save: recoveries, each session's restore of nothing, and every compile.
        recovering = sum(d for d, _ in _pairs(run.events, FailureDetected, RestoreDone))
        recovering += sum(d for d, done in _pairs(run.events, RestoreStarted, RestoreDone) if not done.from_checkpoint)
        recovering += sum(e.compile_s for e in run.events_of(RestoreDone))
        if start is not None and end is not None and end - start - sum(times) - recovering > 0:
            save_s = (end - start - sum(times) - recovering) / len(saves)
            notes.append("the run's checkpoint_saved events carry no blocking time; the save cost is estimated")
        save_method = "wall time not spent in steps or recoveries, per save (an upper bound)"

    # A cold start with nothing to restore also logs restore_started/restore_done (from_checkpoint false).
    restores = [d for d, done in _pairs(run.events, RestoreStarted, RestoreDone) if d >= 0 and done.from_checkpoint]
    restore_s = _median(restores) if restores else None
    if restore_s is None and save_s is not None:
        # A run that recovered live (the README's demo) never read a checkpoint back, but it wrote some: a
        # restore reads what a save wrote, from the same storage, so one save's time stands in for it rather
        # than refusing the plan. Said in the notes; --restore still wins.
        restore_s = save_s
        notes.append("the run never restored a checkpoint; the restore cost is estimated as one save's; "
                     "give --restore to use a measured one")
    replacement = None
    waits = [d for d, _ in _pairs(run.events, FailureDetected, SlicesReady) if d >= 0]
    backend = info.setting("slice_backend", str) if info else None
    if waits:
        if backend == "simulated":
            notes.append("replacement time not taken from a run with simulated slices; give --slice-replacement-time")
        else:
            replacement = _median(waits)

    # run.json records the checkpoint directory as the run saw it; a copied run keeps it beside itself.
    size = None
    recorded = info.setting("checkpoint_dir", str) if info else None
    # Sized on a local disk only: on gs:// the size is left to --checkpoint-size (a listing per object).
    for ckpt_dir in (recorded, "checkpoints"):
        if ckpt_dir is not None and size is None and "://" not in ckpt_dir and isinstance(run.path, Path):
            size = _newest_checkpoint_bytes(run.path / ckpt_dir)  # an absolute path replaces run_dir

    return Calibration(
        run_dir=str(run_dir),
        step_time_s=step_time,
        save_s=save_s,
        save_method=save_method,
        restore_s=restore_s,
        replacement_s=replacement,
        compile_s=compile_s,
        checkpoint_size_bytes=size,
        num_slices=run.num_slices,
        checkpoint_period=info.setting("checkpoint_period") if info else None,
        max_to_keep=info.setting("max_to_keep") if info else None,
        steps_sampled=len(times),
        saves_sampled=len(blocking) or len(saves),
        restores_sampled=len(restores),
        notes=tuple(notes),
    )
