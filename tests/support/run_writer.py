"""A small writer of synthetic run directories, for report/compare tests, through the typed records of
elxpk_contract/records.py (so it writes exactly what the trainer writes).

Everything it writes follows from the FakeRun fields, so tests compute their expectations from the same
inputs instead of hard-coding them. Time is simulated (an injected start time), never read from a clock.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from elxpk_contract.records import Metric, RunInfo, make_event


def executed_steps(steps: int, rewinds: tuple[tuple[int, int], ...]) -> list[int]:
    """The steps in the order a run executes them: at each (failed, restored) it goes back to `restored` and
    redoes the steps since."""
    order, step, pending = [], 0, list(rewinds)
    while step < steps:
        if pending and step == pending[0][0]:
            step = pending.pop(0)[1]
        order.append(step)
        step += 1
    return order


@dataclass(frozen=True)
class FakeRun:
    steps: int = 40
    batch: int = 8
    step_time: float = 0.1
    compile_time: float = 1.0  # the first compile: before step 0, reported on restore_done
    checkpoint_period: int = 10
    checkpoint_blocking: float = 0.05
    failures: tuple[tuple[int, int], ...] = ()  # (step at which a slice is lost, checkpoint step restored)
    lost_slice: int = 1
    num_slices: int = 2
    wait_s: float = 0.5  # failure detected -> slices ready
    restore_s: float = 0.2
    first_step_delay: float = 0.0  # restore done -> start of the first new step
    repeat_batch_after_restore: bool = False  # the data-loader bug: replay the last batch after a restore
    loss_scale: float = 1.0
    host_gap: float = 0.0  # time between steps outside their step_time_s (host work, logging)
    cold_restart: bool = False  # each failure ends the session; a new one (run_started) restores
    # Each failure is SIGTERM heard by this process, the records' writer (a `preempted` event, no
    # failure_detected), and a new session restores (cold_restart implied). None: failure_detected.
    preempted_heard_by: int | None = None
    preempted_heard_slice: int | None = None  # that process's slice, as a multi-controller trainer records it
    run_id: str = ""  # run_started's run id (a cluster's JobSet UID)
    t0: float = 1_700_000_000.0
    extra_events: tuple[dict, ...] = field(default_factory=tuple)


def loss_at(step: int, first_example: int, scale: float = 1.0) -> np.float32:
    """A loss that depends on the step and on the data, like a real one."""
    return np.float32(scale * (3.0 / (1.0 + 0.05 * step) + 1e-3 * ((first_example // 8) % 5)))


def write_run(path: Path, spec: FakeRun, *, torn_tail: bool = False) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    metrics: list[dict] = []
    events: list[dict] = []
    t = spec.t0
    slices = list(range(spec.num_slices))

    def event(name: str, step: int | None, **details) -> None:
        events.append(make_event(name, t, step, **details).to_json())

    event("run_started", 0, slices=slices, run_id=spec.run_id)
    # The trainer restores (nothing, on a fresh run), then compiles before step 0.
    event("restore_started", 0, slices=slices)
    event("restore_done", 0, from_checkpoint=False, compile_needed=True, compile_s=spec.compile_time)
    t += spec.compile_time
    pending = list(spec.failures)
    step, shift, first_after = 0, 0, False
    while step < spec.steps:
        if pending and step == pending[0][0]:
            failed, restored = pending.pop(0)
            if spec.preempted_heard_by is None:
                event("failure_detected", failed, slices_lost=[spec.lost_slice])
            else:
                event("preempted", failed, checkpoint_step=restored, heard_by=spec.preempted_heard_by,
                      heard_slice=spec.preempted_heard_slice)
            t += spec.wait_s
            if spec.cold_restart or spec.preempted_heard_by is not None:  # a new session starts and restores
                event("run_started", 0, slices=slices, run_id=spec.run_id)
            event("slices_ready", failed, slices=slices)
            event("restore_started", restored, slices=slices)
            t += spec.restore_s
            event("restore_done", restored, slices=slices, compile_s=0.0)
            t += spec.first_step_delay
            step, first_after = restored, not (spec.cold_restart or spec.preempted_heard_by is not None)
            if spec.repeat_batch_after_restore:
                shift += 1
        first = (step - shift) * spec.batch
        t += spec.host_gap + spec.step_time
        metrics.append(Metric(step=step, loss=float(loss_at(step, first, spec.loss_scale)).hex(), lr=1e-3,
                              step_time_s=spec.step_time, examples=(first, first + spec.batch),
                              slices=tuple(slices), time=t).to_json())
        if first_after:
            event("first_step_after_recovery", step)
            first_after = False
        step += 1
        if step % spec.checkpoint_period == 0:
            t += spec.checkpoint_blocking
            event("checkpoint_saved", step, blocking_s=spec.checkpoint_blocking)
            event("checkpoint_committed", step)
    event("run_finished", step)
    events.extend(spec.extra_events)
    lines = "".join(json.dumps(m) + "\n" for m in metrics)
    if torn_tail:
        lines += '{"step": 99999, "loss": "0x1.8p'  # a writer killed mid-line
    (path / "metrics.jsonl").write_text(lines)
    (path / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    (path / "run.json").write_text(json.dumps(run_info({"num_slices": spec.num_slices, "steps": spec.steps}).to_json()))
    return path


def run_info(config: dict, started_at: float = 1_700_000_000.0) -> RunInfo:
    """A run.json for a synthetic run: the given config, a fingerprint of it."""
    import hashlib

    fingerprint = hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:16]
    return RunInfo(config=config, fingerprint=fingerprint, fingerprint_fields={}, versions={},
                   started_at=started_at, slice_backend=str(config.get("slice_backend", "simulated")))
