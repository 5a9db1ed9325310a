"""The trainer's progress record: CHECKPOINT_DIR/elxpk-progress.json, what `workload status` shows of it.

`Progress.to_json()` is the exact dict written (with its version); `read_progress` parses the file's text,
or raises `RecordError` (one line). Standard library only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from elxpk_contract.event_records import EXECUTABLE_SOURCES, STARTUP_PHASES
from elxpk_contract.exit_codes import BY_CODE, FAIL_JOB
from elxpk_contract.record_fields import RecordError, parse_fields, to_json

PROGRESS_FILE = "elxpk-progress.json"  # in the checkpoint directory (local or gs://), next to the step dirs
# The primary process rewrites the record at most this often while steps complete: one small write per half
# minute per run, cheap on gs:// and fresh enough for status; a reader takes a step older than it as not current.
PROGRESS_PERIOD_S = 30.0
PROGRESS_BYTES = 2**20  # the record is ~300 bytes: its writer and every reader stop at this many


@dataclass(frozen=True, slots=True)
class Progress:
    """What `workload status` shows of a running trainer: CHECKPOINT_DIR/elxpk-progress.json.

    The primary trainer process rewrites it atomically (a whole object on gs://; write then rename on a
    local disk) at most every PROGRESS_PERIOD_S seconds while steps complete, after each committed
    checkpoint, and when it stops. A trainer that hangs stops rewriting it, so the ages grow."""

    steps_done: int  # completed steps: the next step to run
    step_time: float | None  # unix seconds when the last step completed; None before the first
    checkpoint_step: int | None  # the newest committed checkpoint's step; None before the first
    checkpoint_time: float | None  # unix seconds when it committed (or was restored from)
    updated_at: float  # unix seconds when this was written
    state: str = "running"  # running, done, stalled, preempted, failed
    # The run's attempt: the elastic loop's within this process plus those of the processes before it since
    # the run began (each JobSet restart is a new process, whose loop starts at 1; trainer/elastic/progress.py).
    attempt: int = 1
    # The trainer's seconds by what they went to (productive, rewound, restore, waiting, compile, checkpoint:
    # trainer/elastic/badput_meter.py), summed over the processes that wrote this record since `since`
    # (unix seconds), so `workload status` can split chip-hours by cause. Empty from an older trainer.
    badput: dict[str, float] = field(default_factory=dict)
    since: float | None = None
    # Why the trainer stopped, one line (--elastic-stop-on-repeat, the retry budget, a lost slice); "" when
    # it did not say. Whether that stop is for good is `exit_code`'s, not the text's: `gave_up()`.
    stopped: str = ""
    # The exit code (elxpk_contract.exit_codes) the process that wrote this stops with; None while it runs,
    # and in a record of a trainer older than the field. A retryable code (75 slice lost, 76 stalled, 77
    # preempted) means the group restart goes on; a FailJob code (70, 2) means the trainer gave up for good.
    exit_code: int | None = None
    # What a running process is doing (PROGRESS_PHASES): `restoring` from the attempt's start, `compiling` once
    # the state is there, `stepping` from its first step; written at each change, so `status --watch` tells a
    # restarted trainer that restores or compiles from one that hangs. "" from a trainer older than the field.
    phase: str = ""
    # The billed interval's two ends (elxpk/chip_hours.py billed_s), the very times of the run records that
    # `elxpk report` reads: `started_at` the first run_started of the run (carried over restarts; a new one
    # after a clean finish, whose gap report leaves out), `last_record_at` the newest event record. `workload
    # status` and the alerts bill a finished run from one to the other, as report does. None from a trainer
    # older than the fields.
    started_at: float | None = None
    last_record_at: float | None = None
    # A stop on SIGTERM (this process's or a peer's): whether it saved the stop step, and the steps its
    # restart rewinds (0 when it saved; trainer/elastic/drain.py). None for any other stop, and while it runs.
    drain_saved: bool | None = None
    drain_steps_lost: int | None = None
    # Unix seconds when the first step of the writer's current attempt ended (a new process's first step,
    # or the first after an in-process recovery): when the newest start or recovery ended, which a later
    # step does not overwrite (step_time moves on). The `recovered` alert times each fault to it. None
    # before that step, and from an older trainer.
    resumed_at: float | None = None
    # The speed of the steps since the previous write (elxpk_contract/speed.py, trainer/speed_log.py): tokens/s,
    # TFLOP/s per device and MFU (a fraction of the device's bf16 peak; None where no peak is known, e.g. a
    # CPU). None before a step, and from an older trainer.
    tokens_per_s: float | None = None
    tflops_per_device: float | None = None
    mfu: float | None = None
    # The writing process's start-up so far (its `startup` events: elxpk_contract.event_records.STARTUP_PHASES
    # -> seconds from the process's start) and how its step was made (EXECUTABLE_SOURCES, "" before): `status`
    # names a restart's phase by it, `kill-slice --watch` prints it. Empty from an older trainer.
    # `process_started_at`: the unix time the writing process started, which tells a new process's start-up
    # from that of a process that recovered in place (None from an older trainer).
    startup: dict[str, float] = field(default_factory=dict)
    startup_how: str = ""
    process_started_at: float | None = None

    def step_age(self, now: float) -> float | None:
        """Seconds since the last step completed, at unix time `now`."""
        return None if self.step_time is None else max(0.0, now - self.step_time)

    def checkpoint_age(self, now: float) -> float | None:
        return None if self.checkpoint_time is None else max(0.0, now - self.checkpoint_time)

    def gave_up(self) -> bool:
        """The trainer stopped for good: its exit code is one the Job fails at once (retrying reproduces it),
        not one the JobSet's restart retries. A record without a code (running, or an older trainer's) did not."""
        known = None if self.exit_code is None else BY_CODE.get(self.exit_code)
        return known is not None and known.action == FAIL_JOB

    def to_json(self) -> dict:
        return {"version": PROGRESS_VERSION, **to_json(self)}


PROGRESS_VERSION = 1
# The keys of Progress.badput: the trainer's seconds by what they went to (as elxpk/runs/report.py splits them).
BADPUT_KEYS = ("productive", "rewound", "restore", "waiting", "compile", "checkpoint")
PROGRESS_STATES = ("running", "done", "stalled", "preempted", "failed")
PROGRESS_PHASES = ("", "restoring", "compiling", "stepping")


def read_progress(text: str) -> Progress:
    """The progress record in `text` (the file's content); RecordError (one line) on anything else."""

    try:
        data = json.loads(text)
    except ValueError as exc:
        raise RecordError(f"{PROGRESS_FILE}: not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise RecordError(f"{PROGRESS_FILE}: expected a JSON object, got {type(data).__name__}")
    if data.get("version") != PROGRESS_VERSION:
        raise RecordError(f"{PROGRESS_FILE}: version {data.get('version')!r:.20}, this reader knows {PROGRESS_VERSION}")
    progress = parse_fields(Progress, {k: v for k, v in data.items() if k != "version"})
    if progress.state not in PROGRESS_STATES:
        raise RecordError(f"state {progress.state[:20]!r}: not one of {', '.join(PROGRESS_STATES)}")
    if progress.phase not in PROGRESS_PHASES:
        raise RecordError(f"phase {progress.phase[:20]!r}: not one of {', '.join(PROGRESS_PHASES[1:])}")
    if not set(progress.startup) <= set(STARTUP_PHASES) or progress.startup_how not in ("", *EXECUTABLE_SOURCES):
        raise RecordError(f"startup: phases are {', '.join(STARTUP_PHASES)}; how is one of "
                          f"{', '.join(EXECUTABLE_SOURCES)}")
    if progress.steps_done < 0 or (progress.checkpoint_step is not None and progress.checkpoint_step < 0):
        raise RecordError("steps_done, checkpoint_step: steps count from 0")
    return progress
