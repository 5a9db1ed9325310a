"""`elxpk local run` from validated options to a finished run directory with its report.

Before anything is written: the run directory must be creatable (no file on its path), an existing run
must have been trained with the same model, data and seed (its run.json fingerprint), and no other
`local run` may hold the directory (an flock on RUN_DIR/.elxpk-lock, released when the process exits).
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from elxpk.errors import ElxpkError, UsageError
from elxpk.local.inprocess import run_in_process
from elxpk.local.options import LocalRunOptions, in_local_words
from elxpk.local.progress import RunProgress
from elxpk.local.resume import ExistingRun, inspect_run_dir
from elxpk.local.supervisor import GroupPlan, GroupSupervisor, Kill
from elxpk.local.view import make_view
from elxpk.outfile import write_text
from elxpk.runs.report import build_report
from elxpk.runs.rundir import load_info, load_run
from elxpk.runs.words import plural
from elxpk_contract.exit_codes import SLICE_LOST, TrainerStopped
from elxpk_contract.settings import TrainerConfig
from elxpk_contract.storage_full import storage_full_is_infrastructure, unwritable_is_usage
from elxpk_contract.transient import describe, transient_cause

LOCK = ".elxpk-lock"


@dataclass(frozen=True)
class LocalRunResult:
    existing: ExistingRun
    faults: tuple[str, ...]
    trained: bool  # False when the run directory already had every step asked for
    report: object | None  # elxpk.runs.report.RunReport


def _kills(faults: tuple[str, ...]):
    return tuple(Kill(int(k), int(s)) for k, s in (spec.split("@") for spec in faults))


def _train(opts: LocalRunOptions, cfg: TrainerConfig, faults: tuple[str, ...], progress: RunProgress,
           out: TextIO, dataset) -> None:
    with make_view(progress, opts.live, out) as view:
        if opts.mode == "multi-controller":
            plan = GroupPlan(config=cfg, kills=_kills(faults), revive_after=opts.revive_after)
            GroupSupervisor(plan, view.observe).run()
        else:
            run_in_process(cfg, view.observe, dataset=dataset)


def check_run_dir(run_dir: Path) -> None:
    """A run directory must be a directory, or creatable: no file anywhere on its path."""
    for path in (run_dir, *run_dir.parents):
        if path.exists() and not path.is_dir():
            where = "is a file" if path == run_dir else f"is under {path}, which is a file"
            raise UsageError(f"--run-dir {run_dir}: {where}; give a new or an existing run directory")


def check_same_configuration(existing: ExistingRun, cfg: TrainerConfig) -> None:
    """A resumed run must train what its checkpoints hold; refused here, before anything is written."""

    info = load_info(existing.path, "--run-dir")
    if info is not None and cfg.data is not None:  # the trainer fingerprints the --data it opens: so does this
        from trainer.data.data import open_dataset

        cfg = open_dataset(cfg)[0]
    if info is None or info.fingerprint == cfg.fingerprint():
        return
    mine = cfg.fingerprint_fields()
    differ = [f"{name} {info.fingerprint_fields.get(name)!r} there, {mine[name]!r} now"
              for name in mine if info.fingerprint_fields.get(name) != mine[name]]
    raise UsageError(f"--run-dir {existing.path}: holds a run of another configuration "
                     f"({'; '.join(differ) or 'fingerprint ' + info.fingerprint}); use its settings to resume "
                     "it, or a new --run-dir")


@contextmanager
def run_dir_lock(run_dir: Path) -> Iterator[None]:
    """Hold RUN_DIR/.elxpk-lock exclusively; a second `local run` on the directory is refused at once.

    flock, not a pid file: the kernel releases it when this process exits, however it exits.
    """
    with unwritable_is_usage("--run-dir", run_dir, creating=True):  # the run's first write: read-only is the user's, exit 2
        run_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(run_dir / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            raise UsageError(f"--run-dir {run_dir}: another `elxpk local run` (pid {holder}) is using it; "
                             "wait for it to finish, or give another --run-dir") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock


def local_run(
    opts: LocalRunOptions,
    *,
    out: TextIO | None = None,
    clock: Callable[[], float] = time.time,
    dataset=None,
) -> LocalRunResult:
    """Train (or resume, or extend) in opts.run_dir, then write report.json and report.png there."""
    out = out or sys.stdout
    check_run_dir(opts.run_dir)
    existing = inspect_run_dir(opts.run_dir)
    faults = opts.faults_for(fresh=existing.fresh)
    with in_local_words():
        cfg = opts.trainer_config(faults)
    from elxpk_storage.checkpoint_files import refuse_unsafe_checkpoints

    given = "checkpoint_dir" in opts.model  # else RUN_DIR/checkpoints
    refuse_unsafe_checkpoints(cfg.checkpoint_path, "--trainer-arg=--checkpoint-dir" if given else "--run-dir")
    check_same_configuration(existing, cfg)
    created = [p for p in (opts.run_dir, *opts.run_dir.parents) if not p.exists()]  # deepest first
    try:
        # Every write of the run (the trainer's checkpoints and records, the supervisor's events, the report)
        # that runs out of space ends as one line with exit 74, as the trainer's own storage_full code.
        with storage_full_is_infrastructure(f"--run-dir {opts.run_dir}",
                                            then="the checkpoints and records written so far are intact"), \
                transient_is_retryable():
            return _locked_run(opts, existing, faults, cfg, out, clock, dataset)
    except UsageError:
        _remove_if_untouched(created)  # a refusal from inside the trainer (memory, data) leaves nothing behind
        raise


@contextmanager
def transient_is_retryable() -> Iterator[None]:
    """A transient failure of the host or the storage inside the block (elxpk_contract.transient: out of
    memory, a thread that cannot start, storage unavailable) ends the command as the trainer ends: exit 75,
    retryable, one line, never an internal error (exit 1) with a traceback's last line."""
    try:
        yield
    except ElxpkError:
        raise
    except Exception as exc:
        if transient_cause(exc) is None:
            raise
        raise TrainerStopped(SLICE_LOST, f"retryable (exit {SLICE_LOST.code}): {describe(exc)}; the checkpoints "
                                         "and records written so far are intact: run the same command again to "
                                         "resume") from None


def _remove_if_untouched(created: list[Path]) -> None:
    """Remove the directories this run created, if they hold nothing but its lock."""
    for path in created:
        try:
            (path / LOCK).unlink(missing_ok=True)
            path.rmdir()
        except OSError:  # something was written after all: keep it
            return


def _locked_run(opts: LocalRunOptions, existing: ExistingRun, faults: tuple[str, ...], cfg: TrainerConfig,
                out: TextIO, clock: Callable[[], float], dataset) -> LocalRunResult:
    with run_dir_lock(opts.run_dir):
        existing = inspect_run_dir(opts.run_dir)  # again, now that no other run can change it
        trained = existing.steps_done < opts.steps
        if not existing.fresh:
            print(existing.describe(), file=out, flush=True)
        if trained:
            mode = f"{opts.mode}, {plural(opts.num_slices, 'slice')}"
            plan = f"kill {', '.join(faults)}" if faults else "no faults"
            print(f"training {opts.steps} steps in {opts.run_dir} ({mode}; {plan})", file=out, flush=True)
            progress = RunProgress(total_steps=opts.steps, num_slices=opts.num_slices, clock=clock)
            with in_local_words():  # the trainer's refusals (memory, data, topology) in this command's flags
                _train(opts, cfg, faults, progress, out, dataset)
        else:
            print(f"{opts.run_dir} already has {existing.steps_done} steps; pass --steps above "
                  f"{existing.steps_done} to extend it", file=out, flush=True)
        report = write_report(opts, out) if opts.report else None
    return LocalRunResult(existing, faults, trained, report)


def write_report(opts: LocalRunOptions, out: TextIO):
    from elxpk.runs.plots import write_report_png

    run = load_run(opts.run_dir, flag="--run-dir")
    report = build_report(run)
    # report.json and report.png are elxpk's names: rewritten at each run, never through a link (elxpk/outfile.py)
    write_text(str(opts.run_dir / "report.json"), json.dumps(report.to_dict(), indent=2) + "\n", flag="--run-dir",
               own="replace")
    png = write_report_png(run, report, opts.run_dir / "report.png", own="replace")
    print(f"goodput {100 * report.goodput:.1f}% over {report.wall_s:.1f} s; "
          f"{plural(len(report.recoveries), 'recovery')}; report: {opts.run_dir / 'report.json'}, {png}", file=out)
    for rec in report.recoveries:
        print(f"  {rec.describe()}", file=out)
    return report
