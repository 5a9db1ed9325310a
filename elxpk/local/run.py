"""`elxpk local run` from validated options to a finished run directory with its report."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO

from elxpk.errors import UsageError
from elxpk.local.options import LocalRunOptions
from elxpk.local.progress import RunProgress
from elxpk.local.resume import ExistingRun, inspect_run_dir
from elxpk.local.view import make_view


@dataclass(frozen=True)
class LocalRunResult:
    existing: ExistingRun
    faults: tuple[str, ...]
    trained: bool  # False when the run directory already had every step asked for
    report: object | None  # elxpk.runs.report.RunReport


def _kills(faults: tuple[str, ...]):
    from elxpk.local.supervisor import Kill

    return tuple(Kill(int(k), int(s)) for k, s in (spec.split("@") for spec in faults))


def _train(opts: LocalRunOptions, faults: tuple[str, ...], progress: RunProgress, out: TextIO, dataset) -> None:
    with make_view(progress, opts.live, out) as view:
        if opts.mode == "multi-controller":
            from elxpk.local.supervisor import GroupPlan, GroupSupervisor

            plan = GroupPlan(
                run_dir=opts.run_dir, num_processes=opts.num_slices, devices_per_process=opts.devices_per_slice,
                trainer_args=tuple(opts.trainer_flags()), kills=_kills(faults),
                revive_after=opts.revive_after,
            )
            GroupSupervisor(plan, view.observe).run()
        else:
            from elxpk.local.inprocess import run_in_process

            run_in_process(opts, faults, view.observe, dataset=dataset)


def local_run(
    opts: LocalRunOptions,
    *,
    out: TextIO | None = None,
    clock: Callable[[], float] = time.time,
    dataset=None,
) -> LocalRunResult:
    """Train (or resume, or extend) in opts.run_dir, then write report.json and report.png there."""
    out = out or sys.stdout
    if opts.run_dir.exists() and not opts.run_dir.is_dir():
        raise UsageError(f"--run-dir {opts.run_dir}: is a file; give a new or an existing run directory")
    existing = inspect_run_dir(opts.run_dir)
    faults = opts.faults_for(fresh=existing.fresh)
    trained = existing.steps_done < opts.steps
    if not existing.fresh:
        print(existing.describe(), file=out, flush=True)
    if trained:
        mode = f"{opts.mode}, {opts.num_slices} slice(s)"
        plan = f"kill {', '.join(faults)}" if faults else "no faults"
        print(f"training {opts.steps} steps in {opts.run_dir} ({mode}; {plan})", file=out, flush=True)
        progress = RunProgress(total_steps=opts.steps, num_slices=opts.num_slices, clock=clock)
        _train(opts, faults, progress, out, dataset)
    else:
        print(f"{opts.run_dir} already has {existing.steps_done} steps; pass --steps above "
              f"{existing.steps_done} to extend it", file=out, flush=True)
    report = write_report(opts, out) if opts.report else None
    return LocalRunResult(existing, faults, trained, report)


def write_report(opts: LocalRunOptions, out: TextIO):
    from elxpk.runs.plots import write_report_png
    from elxpk.runs.report import build_report
    from elxpk.runs.rundir import load_run

    run = load_run(opts.run_dir, flag="--run-dir")
    report = build_report(run)
    (opts.run_dir / "report.json").write_text(json.dumps(report.to_dict(), indent=2) + "\n")
    png = write_report_png(run, report, opts.run_dir / "report.png")
    print(f"goodput {100 * report.goodput:.1f}% over {report.wall_s:.1f} s; "
          f"{len(report.recoveries)} recovery(ies); report: {opts.run_dir / 'report.json'}, {png}", file=out)
    for rec in report.recoveries:
        print(f"  {rec.describe()}", file=out)
    return report
