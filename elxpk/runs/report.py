"""Goodput and badput of one run: where the wall time went.

- goodput = productive step time / wall time; productive = the step times of the steps that count (the
  trainer compiles before an attempt's first step and reports it on restore_done, so step times hold none).
- badput: rewound steps (executions a rewind made void), restore, waiting for slices (within one process:
  a group restart's gap is start-up), compile, checkpoint blocking, and other (start-up, imports, tracing:
  the rest of the wall time). The same split as the progress record's totals that `workload status` bills.
- wall time spans the run's sessions; the gap after a session that ended cleanly (`run_finished`, e.g.
  before `--steps` was extended) is not counted, the gap after a crash is.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass

from elxpk.chip_hours import Session, billed_s
from elxpk.runs.drains import Drain, drains
from elxpk.runs.examples import ExampleAccount, account_columns
from elxpk.runs.failure_causes import CauseCount, NoProgress, count_causes, no_progress_runs
from elxpk.runs.recoveries import RecoveryTimeline, recoveries, with_catch_up
from elxpk.runs.recovery_victims import with_victims
from elxpk.runs.run_speed import RunSpeed, run_speed
from elxpk.runs.rundir import Run
from elxpk.runs.startups import StartupTimeline, startups
from elxpk.runs.words import plural
from elxpk_contract.event_records import (
    CheckpointCommitted,
    CheckpointSaved,
    CheckpointSkipped,
    Event,
    RejoinRefused,
    RestoreDone,
    RestoreStarted,
    RunFinished,
    RunStarted,
    Startup,
)


@dataclass(frozen=True)
class Badput:
    rewound_s: float
    restore_s: float
    waiting_s: float
    compile_s: float
    checkpoint_s: float
    other_s: float

    def to_dict(self) -> dict[str, float]:
        return {
            "rewound_steps_s": self.rewound_s,
            "restore_s": self.restore_s,
            "waiting_for_slices_s": self.waiting_s,
            "compile_s": self.compile_s,
            "checkpoint_blocking_s": self.checkpoint_s,
            "other_s": self.other_s,
        }


@dataclass(frozen=True)
class RunReport:
    run_dir: str
    steps: int  # steps that count
    last_step: int | None
    executed: int  # step executions, rewound ones included
    wall_s: float
    productive_s: float
    badput: Badput
    recoveries: tuple[RecoveryTimeline, ...]
    sessions: int
    examples: ExampleAccount
    final_loss: float | None
    checkpoints_committed: int
    checkpoints_skipped: int
    damaged_lines: int
    failure_causes: tuple[CauseCount, ...] = ()
    no_progress: tuple[NoProgress, ...] = ()
    rejoins_refused: tuple[RejoinRefused, ...] = ()  # returning slices that failed their health check
    live_prepare_s: float = 0.0  # the live-recovery checks' compile, beside the step's (not badput of its own)
    drains: tuple[Drain, ...] = ()  # stops on SIGTERM: saved on the way out or not, the steps each lost
    speed: RunSpeed | None = None  # tokens/s, TFLOP/s per device, MFU of the steps that count
    startups: tuple[StartupTimeline, ...] = ()  # each process's start, phase by phase (elxpk/runs/startups.py)

    @property
    def goodput(self) -> float:
        return self.productive_s / self.wall_s if self.wall_s > 0 else 0.0

    def to_dict(self) -> dict:
        return {
            "run_dir": self.run_dir,
            "steps": self.steps,
            "last_step": self.last_step,
            "executed_steps": self.executed,
            "rewound_steps": self.executed - self.steps,
            "sessions": self.sessions,
            "wall_s": self.wall_s,
            "productive_s": self.productive_s,
            "goodput": self.goodput,
            "speed": self.speed.to_dict() if self.speed is not None else None,
            "badput": self.badput.to_dict(),
            "recoveries": [r.to_dict() for r in self.recoveries],
            "examples": self.examples.to_dict(),
            "final_loss": self.final_loss,
            "checkpoints": {"committed": self.checkpoints_committed, "skipped": self.checkpoints_skipped},
            "damaged_lines": self.damaged_lines,
            "failures_by_cause": [g.to_dict() for g in self.failure_causes],
            "no_progress": [n.to_dict() for n in self.no_progress],
            "rejoins_refused": [{"step": e.step, "slices": list(e.slices), "reason": e.reason}
                                for e in self.rejoins_refused],
            "live_prepare_s": self.live_prepare_s,
            "drains": [d.to_dict() for d in self.drains],
            "startups": [t.to_dict() for t in self.startups],
        }


def sessions_of(events: tuple[Event, ...]) -> list[Session]:
    """The run's sessions in time order (a session starts at each run_started): first and last record times,
    and whether it finished cleanly (run_finished)."""
    grouped: list[list[Event]] = []
    # A process's start-up phases (issue 49) are dated from before its run_started, and every process of a group
    # writes them: they bound no session, or each process's imports would open one, and the billed interval
    # would differ from the progress record's (run_started to the last write) that status and the alerts bill.
    for e in sorted((e for e in events if not isinstance(e, Startup)), key=lambda e: e.time):
        if isinstance(e, RunStarted) or not grouped:
            grouped.append([])
        grouped[-1].append(e)
    return [Session(g[0].time, max(e.time for e in g), any(isinstance(e, RunFinished) for e in g)) for g in grouped]


def wall_time(events: tuple[Event, ...]) -> tuple[float, int]:
    """(wall seconds, sessions) from event times: the billed interval (elxpk/chip_hours.py billed_s), which
    `workload status` and the alerts compute from the same two times in the progress record."""
    sessions = sessions_of(events)
    return billed_s(sessions), len(sessions)


def restore_time(events: tuple[Event, ...]) -> float:
    """Every restore, the resume of a fresh session included: each restore_started to its restore_done."""
    total, started = 0.0, None
    for e in events:
        if isinstance(e, RestoreStarted):
            started = e.time
        elif isinstance(e, RestoreDone) and started is not None:
            total += e.time - started
            started = None
    return total


def build_report(run: Run, incidents: Sequence[dict] = ()) -> RunReport:
    """`incidents`: the cluster's incident record (`report --incidents`), which names the victim of each
    recovery whose trainer records name none (elxpk/runs/recovery_victims.py)."""
    metrics = run.metrics  # columns: every executed step, in execution order
    order, last = metrics.last_records()  # the record that counts for each step, by step; a flag per record
    productive = rewound = 0.0
    for step_time, counts in zip(metrics.step_time, last, strict=True):
        # The trainer compiles before an attempt's first step (restore_done's compile_s): step times are net.
        if counts:
            productive += step_time
        else:
            rewound += step_time
    every_slice = tuple(sorted({s for e in run.events_of(RunStarted) for s in e.slices}))
    found = tuple(with_victims(with_catch_up(recoveries(run.events, metrics), metrics), incidents, every_slice))
    # Within one process only, as the progress record's meter counts it (trainer/elastic/badput_meter.py), so
    # `report` and `workload status` split one loss alike: a group restart's gap (the failure to the new
    # process's slices_ready: pods replaced, imports, devices) is the new process's start-up, `other` in both.
    waiting = sum(r.slices_ready_s for r in found if r.slices_ready_s is not None and not r.cold_restart)
    restore = restore_time(run.events)
    ckpt = sum(e.blocking_s for e in run.events_of(CheckpointSaved))
    # restore_done's live_prepare_s is not here: those compiles ran in the background, beside the steps.
    compile_total = sum(e.compile_s for e in run.events_of(RestoreDone))
    wall, sessions = wall_time(run.events)
    if wall <= 0.0:  # no events: the best we know is the sum of step times
        wall = sum(metrics.step_time)
    other = max(0.0, wall - productive - rewound - restore - waiting - compile_total - ckpt)
    steps = array("q", (metrics.step[i] for i in order))
    last_step = steps[-1] if steps else None
    return RunReport(
        run_dir=str(run.path),
        steps=len(order),
        last_step=last_step,
        executed=len(metrics),
        wall_s=wall,
        productive_s=productive,
        badput=Badput(rewound, restore, waiting, compile_total, ckpt, other),
        recoveries=found,
        sessions=sessions,
        examples=account_columns(steps, array("q", (metrics.first[i] for i in order)),
                                 array("q", (metrics.end[i] for i in order))),
        final_loss=metrics.loss[order[-1]] if last_step is not None else None,
        checkpoints_committed=len(run.events_of(CheckpointCommitted)),
        checkpoints_skipped=len(run.events_of(CheckpointSkipped)),
        damaged_lines=run.damaged_lines,
        # every recovery, those the trainer wrote no failure_detected for included (process 0's SIGTERM)
        failure_causes=tuple(count_causes([(r.cause, r.failure_step) for r in found])),
        no_progress=tuple(no_progress_runs(run.events)),
        rejoins_refused=tuple(run.events_of(RejoinRefused)),
        live_prepare_s=sum(e.live_prepare_s for e in run.events_of(RestoreDone)),
        drains=tuple(drains(run.events)),
        speed=run_speed(run, order),
        startups=tuple(startups(run.events)),
    )


def _pct(part: float, whole: float) -> str:
    return f"{100.0 * part / whole:5.1f}%" if whole > 0 else "    -"


def render_text(report: RunReport) -> list[str]:
    """The human form of a report, one line per item."""
    w = report.wall_s
    lines = [
        f"run {report.run_dir}: {plural(report.steps, 'step')} done{_missing(report)}, "
        f"{report.executed - report.steps} rewound, {plural(report.sessions, 'session')}",
        f"goodput {100.0 * report.goodput:.1f}%: {report.productive_s:.2f} s productive of {w:.2f} s wall",
        *([report.speed.describe()] if report.speed is not None else []),
        "badput:",
    ]
    for name, value in report.badput.to_dict().items():
        label = name.removesuffix("_s").replace("_", " ")
        lines.append(f"  {label:<22} {value:8.2f} s {_pct(value, w)}")
    if report.live_prepare_s > 0:
        # What the live path's extra compile buys, said where its cost shows (it made the compile above slower).
        lines.append(f"  (compile ran beside {report.live_prepare_s:.2f} s of live-recovery checks compiled ahead: "
                     "what they buy is a recovery with no compile and no step rewound)")
    lines.append(f"recoveries: {len(report.recoveries)}")
    for i, rec in enumerate(report.recoveries, 1):
        lines.append(f"  {i}. {rec.describe()}")
        marks = [("detect", 0.0), ("slices ready", rec.slices_ready_s),
                 ("state rebuilt" if rec.live else "restored", rec.restored_s), ("first new step", rec.first_step_s)]
        if rec.caught_up_s is not None and rec.failure_step is not None and rec.rewound_steps:
            marks.append((f"step {rec.failure_step + 1}", rec.caught_up_s))
        lines.append("     " + " -> ".join(f"{n} {v:+.2f} s" if v is not None else f"{n} ?" for n, v in marks))
    if report.startups:  # where a (re)start's seconds went before its first step, from the process's start
        lines.append(f"start-ups: {len(report.startups)}")
        lines.extend(f"  {i}. {t.describe()}" for i, t in enumerate(report.startups, 1))
    if report.failure_causes:
        lines.append("failures by cause: " + ", ".join(
            f"{g.cause} {len(g.steps)} (at step {', '.join('?' if s is None else str(s) for s in g.steps)})"
            for g in report.failure_causes))
    lines.extend(n.describe() for n in report.no_progress)
    lines.extend(f"drain: {d.describe()}" for d in report.drains)
    lines.extend(f"slice {','.join(map(str, e.slices))} back at step {e.step} but failed its health check, kept "
                 f"out: {e.reason}" for e in report.rejoins_refused)
    ex = report.examples
    verdict = "each example exactly once" if ex.exactly_once else f"{ex.duplicates} duplicate, {ex.gaps} missing"
    lines.append(f"examples: {ex.unique} consumed by {plural(ex.steps, 'step')}; {verdict}")
    if report.final_loss is not None:
        lines.append(f"final loss {report.final_loss:.6f}")
    lines.append(f"checkpoints: {report.checkpoints_committed} committed, {report.checkpoints_skipped} skipped")
    if report.damaged_lines:
        torn = plural(report.damaged_lines, "torn line")
        lines.append(f"note: {torn} from a killed writer {'was' if report.damaged_lines == 1 else 'were'} skipped")
    return lines


def _missing(report: RunReport) -> str:
    """Steps done is the count of distinct steps; say so when they are not exactly 0..N-1."""
    if report.last_step is None or report.last_step + 1 == report.steps:
        return ""
    return f" (up to step {report.last_step}, {report.examples.missing_count} missing)"
