"""Goodput and badput of one run: where the wall time went.

- goodput = productive step time / wall time; productive = the steps that count, less their compile time.
- badput: rewound steps (executions a rewind made void), restore, waiting for slices, compile, checkpoint
  blocking, and other (start-up, imports, tracing: the rest of the wall time).
- wall time spans the run's sessions; the gap after a session that ended cleanly (`run_finished`, e.g.
  before `--steps` was extended) is not counted, the gap after a crash is.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from elxpk.runs.examples import ExampleAccount, account
from elxpk.runs.recoveries import Recovery, recoveries, with_catch_up
from elxpk.runs.rundir import Run, loss_value

_CHECKPOINT_BLOCKING_KEYS = ("blocking_s", "block_s", "duration_s", "save_s")


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
    recoveries: tuple[Recovery, ...]
    sessions: int
    examples: ExampleAccount
    final_loss: float | None
    checkpoints_committed: int
    checkpoints_skipped: int
    damaged_lines: int

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
            "badput": self.badput.to_dict(),
            "recoveries": [r.to_dict() for r in self.recoveries],
            "examples": self.examples.to_dict(),
            "final_loss": self.final_loss,
            "checkpoints": {"committed": self.checkpoints_committed, "skipped": self.checkpoints_skipped},
            "damaged_lines": self.damaged_lines,
        }


def _t(event: dict) -> float | None:
    value = event.get("time")
    return float(value) if isinstance(value, (int, float)) else None


def wall_time(events: tuple[dict, ...]) -> tuple[float, int]:
    """(wall seconds, sessions) from event times; a session starts at each run_started."""
    timed = sorted((e for e in events if _t(e) is not None), key=_t)
    if not timed:
        return 0.0, 0
    sessions: list[list[dict]] = []
    for e in timed:
        if e.get("event") == "run_started" or not sessions:
            sessions.append([])
        sessions[-1].append(e)
    wall = 0.0
    for i, session in enumerate(sessions):
        start, end = _t(session[0]), max(_t(e) for e in session)
        wall += end - start
        clean = any(e.get("event") == "run_finished" for e in session)
        if i + 1 < len(sessions) and not clean:
            wall += max(0.0, _t(sessions[i + 1][0]) - end)  # a crash: the restart counts
    return wall, len(sessions)


def _step_time(record: dict) -> float:
    value = record.get("step_time_s")
    return float(value) if isinstance(value, (int, float)) else 0.0


def compile_times(metrics: tuple[dict, ...]) -> list[float]:
    """Compile seconds inside each record's step time.

    A record that reports `compile_s` is taken at its word. Otherwise the first step of each attempt
    (the first record, and each one that does not follow its predecessor's step) is assumed to compile,
    and its excess over the median step time is counted.
    """
    if any(isinstance(r.get("compile_s"), (int, float)) for r in metrics):
        return [float(r.get("compile_s") or 0.0) for r in metrics]
    times = [_step_time(r) for r in metrics]
    if not times:
        return []
    median = statistics.median(times)
    out = [0.0] * len(metrics)
    for i, record in enumerate(metrics):
        prev = metrics[i - 1].get("step") if i else None
        step = record.get("step")
        if i == 0 or not isinstance(prev, int) or not isinstance(step, int) or step != prev + 1:
            out[i] = max(0.0, times[i] - median)
    return out


def compile_outside_steps(events: tuple[dict, ...]) -> float | None:
    """Compile time the trainer reports on its events (it compiles ahead of the step it times).

    The trainer reports each attempt's compile as `compile_s` on `restore_done` (0 when it reused the
    executable). Runs written before that carry it only on other events, e.g. a recompile on
    `first_step_after_recovery`.
    """
    def reported(names: tuple[str, ...] | None) -> list[float]:
        return [float(e["compile_s"]) for e in events if isinstance(e.get("compile_s"), (int, float))
                and (names is None or e.get("event") in names)]

    values = reported(("restore_done",)) or reported(None)
    return sum(values) if values else None


def checkpoint_blocking(events: tuple[dict, ...]) -> float:
    total = 0.0
    for e in events:
        if e.get("event") != "checkpoint_saved":
            continue
        for key in _CHECKPOINT_BLOCKING_KEYS:
            if isinstance(e.get(key), (int, float)):
                total += float(e[key])
                break
    return total


def restore_time(events: tuple[dict, ...]) -> float:
    """Every restore, the resume of a fresh session included: each restore_started to its restore_done."""
    total, started = 0.0, None
    for e in events:
        if e.get("event") == "restore_started":
            started = _t(e)
        elif e.get("event") == "restore_done" and started is not None and _t(e) is not None:
            total += _t(e) - started
            started = None
    return total


def build_report(run: Run) -> RunReport:
    metrics = run.metrics
    final = run.final_records()
    ahead = compile_outside_steps(run.events)
    # A trainer that compiles ahead of its first step says so; then step times hold no compile.
    compile_s = compile_times(metrics) if ahead is None else [0.0] * len(metrics)
    last_index = {r["step"]: i for i, r in enumerate(metrics) if isinstance(r.get("step"), int)}
    productive = rewound = 0.0
    for i, record in enumerate(metrics):
        if not isinstance(record.get("step"), int):
            continue
        net = max(0.0, _step_time(record) - compile_s[i])
        if last_index[record["step"]] == i:
            productive += net
        else:
            rewound += net
    found = tuple(with_catch_up(recoveries(run.events), metrics))
    waiting = sum(r.slices_ready_s for r in found if r.slices_ready_s is not None)
    restore = restore_time(run.events)
    ckpt = checkpoint_blocking(run.events)
    wall, sessions = wall_time(run.events)
    if wall <= 0.0:  # no timed events: the best we know is the sum of step times
        wall = sum(_step_time(r) for r in metrics)
    compile_total = sum(compile_s) + (ahead or 0.0)
    other = max(0.0, wall - productive - rewound - restore - waiting - compile_total - ckpt)
    last_step = max(final) if final else None
    return RunReport(
        run_dir=str(run.path),
        steps=len(final),
        last_step=last_step,
        executed=sum(1 for r in metrics if isinstance(r.get("step"), int)),
        wall_s=wall,
        productive_s=productive,
        badput=Badput(rewound, restore, waiting, compile_total, ckpt, other),
        recoveries=found,
        sessions=sessions,
        examples=account(final),
        final_loss=loss_value(final[last_step]) if final else None,
        checkpoints_committed=len(run.events_named("checkpoint_committed")),
        checkpoints_skipped=len(run.events_named("checkpoint_skipped")),
        damaged_lines=run.damaged_lines,
    )


def _pct(part: float, whole: float) -> str:
    return f"{100.0 * part / whole:5.1f}%" if whole > 0 else "    -"


def render_text(report: RunReport) -> list[str]:
    """The human form of a report, one line per item."""
    w = report.wall_s
    lines = [
        f"run {report.run_dir}: {report.steps} steps (last {report.last_step}), "
        f"{report.executed - report.steps} rewound, {report.sessions} session(s)",
        f"goodput {100.0 * report.goodput:.1f}%: {report.productive_s:.2f} s productive of {w:.2f} s wall",
        "badput:",
    ]
    for name, value in report.badput.to_dict().items():
        label = name.removesuffix("_s").replace("_", " ")
        lines.append(f"  {label:<22} {value:8.2f} s {_pct(value, w)}")
    lines.append(f"recoveries: {len(report.recoveries)}")
    for i, rec in enumerate(report.recoveries, 1):
        lines.append(f"  {i}. {rec.describe()}")
        marks = [("detect", 0.0), ("slices ready", rec.slices_ready_s), ("restored", rec.restored_s),
                 ("first new step", rec.first_step_s)]
        if rec.caught_up_s is not None and rec.failure_step is not None and rec.rewound_steps:
            marks.append((f"step {rec.failure_step + 1}", rec.caught_up_s))
        lines.append("     " + " -> ".join(f"{n} {v:+.2f} s" if v is not None else f"{n} ?" for n, v in marks))
    ex = report.examples
    verdict = "each example exactly once" if ex.exactly_once else f"{ex.duplicates} duplicate, {ex.gaps} missing"
    lines.append(f"examples: {ex.unique} consumed by {ex.steps} steps; {verdict}")
    if report.final_loss is not None:
        lines.append(f"final loss {report.final_loss:.6f}")
    lines.append(f"checkpoints: {report.checkpoints_committed} committed, {report.checkpoints_skipped} skipped")
    if report.damaged_lines:
        lines.append(f"note: {report.damaged_lines} torn line(s) from a killed writer were skipped")
    return lines
