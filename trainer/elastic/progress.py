"""Progress publication: CHECKPOINT_DIR/elxpk-progress.json, what `elxpk workload status` reads.

The checkpoint directory is the one place both sides already share: on a cluster it is a `gs://` path in
the JobSet's env (ELXPK_CHECKPOINT_DIR), readable by the launcher without exec'ing into a pod or
parsing logs; locally it is a directory. The record is `elxpk_contract.progress_record.Progress`; the launcher
calls `records.read_progress` on the file's text.

Only the primary process writes. It rewrites the whole file atomically (a single object upload on an
object store; write to a temporary name, then rename, on a local disk) at most every `period_s` seconds
while steps complete, at once after a checkpoint commits, and when the trainer stops. A hung trainer
stops writing, so the ages the reader computes grow: that is the stall signal for a human.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections.abc import Callable

from elxpk_contract.progress_record import (
    PROGRESS_BYTES,
    PROGRESS_FILE,
    PROGRESS_PERIOD_S,
    Progress,
    read_progress,
)
from elxpk_contract.record_fields import RecordError
from elxpk_contract.records import written
from elxpk_contract.setting_rules import said
from elxpk_contract.speed import Speed
from elxpk_storage import checkpoint_files as ckpt_storage
from trainer.clock import Clock
from trainer.elastic.badput_meter import BadputMeter
from trainer.elastic.drain import DrainOutcome

STOPPED_FOR_GOOD = "stopped"  # previous_state of a process whose exit code no restart follows


class ProgressWriter:
    def __init__(self, checkpoint_path: str, clock: Clock, *, enabled: bool = True,
                 period_s: float = PROGRESS_PERIOD_S, meter: BadputMeter | None = None,
                 speed: Callable[[], Speed | None] | None = None) -> None:
        self.path = ckpt_storage.checkpoint_root(checkpoint_path, said("checkpoint_dir")) / PROGRESS_FILE
        self._clock = clock
        self._enabled = enabled
        self._period_s = period_s
        self._next_write = 0.0
        self._meter = meter  # where the time went, published with each write (for status's chip-hours)
        self._speed = speed  # the steps' speed since the previous write (trainer/speed_log.py SpeedLog.recent)
        self.progress = Progress(0, None, None, None, clock.time(), since=clock.time())
        self.previous_state: str | None = None  # the state the previous process left (attempt history reads it)
        self._resumed = False  # this process's first step is done (its time is `resumed_at`)
        # The attempts of the processes before this one on the run: under multi-controller every JobSet restart
        # is a new process whose elastic loop starts again at 1, so the published attempt adds this to it.
        self._attempts_before = 0
        if enabled:
            self._carry_over_checkpoint_time()

    def _carry_over_checkpoint_time(self) -> None:
        """A restarted trainer restores a checkpoint it did not commit: keep its commit time if the
        previous process published it."""
        try:
            # Bounded, and never through a link or into a FIFO: a record past PROGRESS_BYTES is no record of ours
            data = ckpt_storage.read_bounded(self.path, PROGRESS_BYTES)
            if len(data) > PROGRESS_BYTES:
                return
            previous = read_progress(data.decode("utf-8"))
        except (OSError, RecordError, UnicodeDecodeError):
            return
        # A process that stopped for good (an exit code the Job fails at once) is restarted by no orchestrator:
        # whatever starts on this directory next is a new run, with or without a run id (attempt_history).
        self.previous_state = STOPPED_FOR_GOOD if previous.gave_up() else previous.state
        # A restart (any state but a clean finish or a stop for good) goes on counting the run's attempts;
        # this process is the next one from its start, so a restart that dies before its first step counts too.
        restarted = previous.state != "done" and not previous.gave_up()
        self._attempts_before = max(previous.attempt, 0) if restarted else 0
        self.progress = Progress(previous.steps_done, previous.step_time, previous.checkpoint_step,
                                 previous.checkpoint_time, previous.updated_at, "running", self._attempts_before + 1,
                                 since=self.progress.since)
        if self._meter is not None and previous.since is not None:
            try:  # the previous process's totals go on: the record covers every process since `since`
                # A run that finished cleanly ends its billed stretch (report leaves out the gap after it): the
                # next process, more --steps or a new workload on the same directory, begins a new one.
                ended = previous.state == "done"
                self._meter.carry(previous.badput, previous.steps_done, None if ended else previous.started_at,
                                  None if ended else previous.last_record_at)
            except (TypeError, ValueError):  # a record that is not ours: its totals are not carried
                return
            self.progress = dataclasses.replace(self.progress, since=previous.since)

    def step_done(self, steps_done: int, at: float, attempt: int) -> None:
        """A step completed at unix time `at`; written when the period has passed since the last write, and at
        once for the first step of a new attempt or process (the phase turns to `stepping`): that step's time
        is when the recovery ended, which `kill-slice --watch` and `status` read, and which stays in
        `resumed_at` until the next attempt (the `recovered` alert reads it). `attempt` is the elastic loop's
        within this process; the record's counts every attempt of the run (each restart's process goes on)."""
        attempt += self._attempts_before
        new_attempt = attempt != self.progress.attempt or not self._resumed
        first = self.progress.phase != "stepping"
        self._update(steps_done=steps_done, step_time=at, attempt=attempt, state="running", phase="stepping")
        if new_attempt:  # the recovery (or the start) ended here; later steps move step_time on, not this
            self._resumed = True
            self._update(resumed_at=at)
        if new_attempt or first or self._clock.monotonic() >= self._next_write:
            self.write()

    def phase(self, phase: str) -> None:
        """The process begins `phase` (restoring, compiling): written at once, so a reader sees a restarted
        trainer restore and compile rather than the previous process's stop or its last step aging."""
        if phase != self.progress.phase:
            self._update(phase=phase, state="running", stopped="", exit_code=None)
            self.write()

    def startup(self, phases: dict[str, float], how: str, started_at: float) -> None:
        """This process's start-up so far (trainer/startup.py): carried by the next write, not written now
        (each phase that matters to a reader comes with a write of its own: restoring, compiling, stepping)."""
        self._update(startup=dict(phases), startup_how=how, process_started_at=started_at)

    def checkpoint(self, step: int, at: float | None) -> None:
        """The newest committed checkpoint is `step` (committed or restored at `at`); written at once."""
        if step == self.progress.checkpoint_step:
            return  # a restore of the step already published keeps its commit time
        self._update(checkpoint_step=step, checkpoint_time=at)
        self.write()

    def finish(self, state: str, stopped: str = "", exit_code: int | None = None,
               drain: DrainOutcome | None = None) -> None:
        """The trainer stops: done, stalled, preempted or failed (`stopped`: why, where it said; `exit_code`:
        the code it exits with, which tells a stop the group restart retries from one for good; `drain`:
        a stop on SIGTERM's save and the steps it lost)."""
        self._update(state=state, stopped=stopped, exit_code=exit_code,
                     drain_saved=drain.saved if drain is not None else None,
                     drain_steps_lost=drain.steps_lost if drain is not None else None)
        self.write()

    def _update(self, **changes) -> None:
        self.progress = dataclasses.replace(self.progress, **changes)

    def write(self) -> None:
        if not self._enabled:
            return
        self._next_write = self._clock.monotonic() + self._period_s
        self._update(updated_at=self._clock.time())
        if self._meter is not None:
            self._update(badput=self._meter.totals(), started_at=self._meter.started_at,
                         last_record_at=self._meter.last_record_at)
        speed = self._speed() if self._speed is not None else None
        if speed is not None:
            self._update(tokens_per_s=round(speed.tokens_per_s, 3), tflops_per_device=round(speed.tflops_per_device, 6),
                         mfu=None if speed.mfu is None else round(speed.mfu, 6))
        text = json.dumps(written(self.progress), sort_keys=True) + "\n"
        try:
            ckpt_storage.write_whole(self.path, text, tmp_name=f".{PROGRESS_FILE}.{os.getpid()}.partial")
        except OSError as exc:  # publishing progress must never stop training
            print(f"warning: cannot write {self.path}: {exc}", file=sys.stderr, flush=True)
