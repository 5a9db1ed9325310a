"""The trainer's exit codes: what `python -m trainer` returns, and what each tells the layer above it.

Three classes, and no code inside the shell's and the signals' range (126-165: 126/127 cannot run,
128+N killed by signal N, e.g. 137 SIGKILL, 143 SIGTERM) so a code never reads as a signal:

- done: 0.
- user or deterministic error: retrying reproduces it, so the Job should fail at once (`FailJob`).
  2 bad settings (nothing was written): every setting that can be checked before training is checked
  then, a checkpoint of another configuration included; 70 an error raised through the training code (the
  model, step, optimizer or data modules: elxpk_contract/failure_classes.py USER_CODE), or the same failure
  repeating with no progress (--elastic-stop-on-repeat). Nothing else is 70: an exception the trainer
  cannot classify is 1.
- retryable infrastructure failure: the group restart is the retry (`Count` against the restart
  budget), or for a preemption nothing is consumed (`Ignore`, as for a pod's `DisruptionTarget`).
  75 a slice was lost or a peer died (also: the in-process retry budget ran out on slice losses), or
  another transient infrastructure failure (elxpk_contract.transient: out of memory, host or device;
  storage unavailable, slow, or denying access, a 401 or 403 included; a restore retries these 3 times
  first, trainer/ckpt/transient_retry.py, and never sets a step aside for them);
  76 no step completed within the stall timeout (a hung collective or checkpoint I/O);
  77 preempted: SIGTERM arrived, the trainer saved what it could within the grace period and stopped;
  124 the slices did not come back within `elastic_timeout_seconds`;
  74 a write ran out of space (no space left, a quota, a file-size limit: elxpk_contract.storage_full):
  the previous checkpoint is intact, and a restart resumes from it once space is freed.
- 1 is left for what the trainer did not classify (an interpreter crash, an error outside the run):
  not known to be the user's, so it is counted, never `FailJob`. Codes the trainer never returns (137
  after a SIGKILL, 134 after jax aborts a survivor whose peer missed its heartbeats) are left to the
  orchestrator's default, which counts them.

The launcher renders `EXIT_CODES` into a Job's `podFailurePolicy` (action per code) and the JobSet's
`failurePolicy` (the FailJob codes end the JobSet). Standard library only.
"""

from __future__ import annotations

from typing import NamedTuple

from elxpk_contract.errors import CheckFailed

FAIL_JOB, COUNT, IGNORE = "FailJob", "Count", "Ignore"  # podFailurePolicy actions


class ExitCode(NamedTuple):
    code: int
    name: str
    meaning: str
    retryable: bool  # False: retrying reproduces it (fail the workload at once)
    action: str  # the podFailurePolicy action the launcher renders for it: FailJob, Count or Ignore


DONE = ExitCode(0, "done", "every step ran and the last checkpoint committed", False, "")
BAD_SETTINGS = ExitCode(2, "bad_settings", "a setting is invalid or contradicts the hardware; nothing was written",
                        False, FAIL_JOB)
USER_ERROR = ExitCode(70, "user_error", "an error raised through the training code or its data (model, step, "
                      "optimizer, data pipeline), or a repeated failure with no progress: deterministic",
                      False, FAIL_JOB)
SLICE_LOST = ExitCode(75, "slice_lost", "a slice was lost or a peer died (or the in-process retry budget ran out "
                      "on slice losses), or a transient infrastructure failure (out of memory, storage unavailable "
                      "or denying access): restart the group", True, COUNT)
STALLED = ExitCode(76, "stalled", "no step completed within the stall timeout (hung collective or checkpoint "
                   "I/O); the stacks are in RUN_DIR/stalls/", True, COUNT)
PREEMPTED = ExitCode(77, "preempted", "SIGTERM (preemption, eviction, drain): saved within the grace period if "
                     "possible, then stopped", True, IGNORE)
TIMEOUT = ExitCode(124, "timeout", "too few slices came back within --elastic-timeout-seconds", True, COUNT)
STORAGE_FULL = ExitCode(74, "storage_full", "a checkpoint or run-record write ran out of space (ENOSPC, a quota "
                        "EDQUOT, a file-size limit EFBIG): the previous checkpoint is intact; free space, and the "
                        "restart resumes from it", True, COUNT)
UNCLASSIFIED = ExitCode(1, "unclassified", "a failure the trainer did not classify; counted, never failed at once",
                        True, COUNT)

EXIT_CODES: tuple[ExitCode, ...] = (DONE, BAD_SETTINGS, USER_ERROR, SLICE_LOST, STALLED, PREEMPTED, TIMEOUT,
                                    STORAGE_FULL, UNCLASSIFIED)
BY_CODE: dict[int, ExitCode] = {c.code: c for c in EXIT_CODES}


def user_error_codes() -> list[int]:
    """The codes a Job's podFailurePolicy fails at once (action FailJob)."""
    return [c.code for c in EXIT_CODES if c.action == FAIL_JOB]


def retryable_codes() -> list[int]:
    return [c.code for c in EXIT_CODES if c.retryable]


class TrainerStopped(CheckFailed):
    """The trainer stops on purpose with a code of the table (the elastic loop gives up, a stall that
    cannot be recovered in process, a preemption); `exit_code` is that code's."""

    def __init__(self, code: ExitCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.exit_code = code.code
