"""`--elastic-stop-on-repeat` across group restarts: CHECKPOINT_DIR/elxpk-attempts.json.

In multi-controller every retry is a group restart, a new process, so the in-process repeat counter of
trainer.elastic.policy never sees more than one failure. The checkpoint directory is what every attempt
shares (gs:// on a cluster), so process 0 keeps the attempts there: each one's restored step, and how it
ended. At an attempt's start, once it knows the step it restores, process 0 closes the previous entry and
judges the run; when the last N attempts failed in one class and each left the same newest checkpoint
(no step past the first one's was ever saved), it stops with USER_ERROR (70): the code whose
podFailurePolicy action is FailJob, so the JobSet fails instead of restarting again (a 75 would be
counted and restarted until --max-restarts runs out, which is the loop this setting exists to end).

How an attempt ended is read from the progress record its process 0 left (trainer.elastic.progress):
`preempted` (a SIGTERM honoured at a step boundary: the group was alive, so it is no failure of the run and
it breaks a run of repeats); anything else (`failed`, or `running` when the process died without a word,
as a lost VM or a peer's abort leaves it) is the group losing a member, class slice_lost. The
granularity is the checkpoint, not the step: a new process cannot know how far its predecessor got
between saves, only what it saved.

Only process 0 reads and writes the file; its verdict reaches every process of the group (`share`: a
broadcast from process 0, the collective every attempt's start already passes through), so they all stop
together: a process 0 that stopped alone would wait at jax.distributed's shutdown barrier for peers that
wait in their first step for it.

The file carries the run's identity (`--run-id`, ELXPK_RUN_ID: the launcher renders the JobSet's UID, the
same for every group restart of one JobSet). A history written under another identity is an earlier run's
that left it in the same checkpoint directory (one that crashed before its first save would otherwise stop
a new, fixed run before its first step): it is set aside with a warning and a new history starts.

The file is small (at most KEEP entries), read bounded, and never stops training when it cannot be read
or written: anything unreadable (not JSON, the wrong shape, `1e999` for a step, JSON nested too deep for the
parser) is a warning and a fresh history, and a failed write is a warning (the run then behaves as without
the setting).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass

from elxpk_contract.exit_codes import PREEMPTED, SLICE_LOST, USER_ERROR, TrainerStopped
from elxpk_contract.setting_rules import said
from elxpk_storage import checkpoint_files as ckpt_storage
from trainer.elastic.progress import STOPPED_FOR_GOOD

HISTORY_FILE = "elxpk-attempts.json"
HISTORY_BYTES = 64 * 1024
KEEP = 64  # entries kept: enough for any --elastic-stop-on-repeat worth setting, bounded for the read


@dataclass(frozen=True)
class Attempt:
    restored: int  # the step the attempt started from (0: nothing restored)
    ended: str = ""  # the class it ended in (an exit code's name); "" while it runs


def ended_class(progress_state: str | None) -> str:
    """How the previous attempt ended, from the state its process 0 left in the progress record."""
    return PREEMPTED.name if progress_state == "preempted" else SLICE_LOST.name


def repeats(attempts: list[Attempt], restored_now: int) -> int:
    """How many attempts in a row, ending with the last, failed in one class (not a preemption) and left
    `restored_now` as the newest checkpoint (each one's successor restored the same step)."""
    run, left = 0, restored_now
    cls = attempts[-1].ended if attempts else ""
    for previous in reversed(attempts):
        if previous.ended in ("", PREEMPTED.name) or previous.ended != cls or left != restored_now:
            break
        run += 1
        left = previous.restored
    return run


def why_stopped(run: int, cls: str, step: int, limit: int) -> str:
    return (f"elastic: {run} attempts in a row ended in class {cls} with no checkpoint past step {step} "
            f"(each group restart restored step {step} and failed before the next save); stopping "
            f"({said('elastic_stop_on_repeat')} {limit}) instead of restarting again")


class AttemptHistory:
    """Process 0's record of the attempts of a multi-controller run, in the checkpoint directory."""

    def __init__(self, checkpoint_path: str, stop_on_repeat: int, *, primary: bool = True,
                 share: Callable[[int], int] = lambda value: value, run_id: str | None = None) -> None:
        self.path = ckpt_storage.checkpoint_root(checkpoint_path, said("checkpoint_dir")) / HISTORY_FILE
        self.limit = stop_on_repeat
        self.run_id = run_id or ""
        self.primary = primary
        self.share = share  # process 0's value, on every process

    def started(self, restored: int, previous_state: str | None) -> None:
        """This attempt restored step `restored`; `previous_state` is the progress record's state before
        this process started (None: no record). Raises TrainerStopped(USER_ERROR), on every process, when
        process 0 finds that the run repeats."""
        stopped = self._judge(restored, previous_state) if self.primary else ""
        if self.share(1 if stopped else 0):
            raise TrainerStopped(USER_ERROR, stopped or f"elastic: process 0 stopped the run "
                                 f"({said('elastic_stop_on_repeat')}): its log and the progress record say why")

    def _judge(self, restored: int, previous_state: str | None) -> str:
        """Process 0: close the previous entry, add this one, and say why to stop ("" to go on)."""
        attempts, ended_for_good = self._read()
        if attempts and attempts[-1].ended == "":
            attempts[-1] = Attempt(attempts[-1].restored, ended_class(previous_state))
        # A new run on a finished directory: its attempts are not these. Finished: it completed, its last
        # process stopped with a code no restart follows, or this history stopped it. Told apart so without
        # a run id too (by hand, another orchestrator), where a stale history used to stop a fixed run (70).
        if previous_state in ("done", STOPPED_FOR_GOOD) or ended_for_good:
            if attempts:
                _warned(f"{self.path} is the history of a run that ended ({previous_state or 'stopped'}): "
                        "a new run, a new history")
            attempts = []
        run = repeats(attempts, restored)
        attempts = [*attempts, Attempt(restored)][-KEEP:]
        stopped = ""
        if self.limit and run >= self.limit:
            stopped = why_stopped(run, attempts[-2].ended, restored, self.limit)
            attempts[-1] = Attempt(restored, USER_ERROR.name)
        self._write(attempts, stopped)
        return stopped

    def _read(self) -> tuple[list[Attempt], bool]:
        """(the attempts of this run, whether the history says it stopped the run for good)."""
        try:
            data = ckpt_storage.read_bounded(self.path, HISTORY_BYTES)
        except FileNotFoundError:
            return [], False
        except OSError as exc:
            return _warned(f"cannot read {self.path}: {exc}"), False
        try:
            if len(data) > HISTORY_BYTES:
                raise ValueError(f"longer than {HISTORY_BYTES} bytes")
            record = json.loads(data.decode("utf-8"))
            attempts = [_attempt(e) for e in record["attempts"]][-KEEP:]
            written_by, stopped = record.get("run", ""), record.get("stopped", "")
            if not isinstance(written_by, str) or not isinstance(stopped, str):
                raise TypeError(f"its run id is a {type(written_by).__name__}, its stop a {type(stopped).__name__}")
        # Not ours, or not whole: start a new history. RecursionError: JSON nested deeper than the parser
        # goes; OverflowError: int(1e999); AttributeError: `record` is not an object.
        except (ValueError, KeyError, TypeError, OverflowError, RecursionError, AttributeError) as exc:
            return _warned(f"{self.path} is no attempt history ({type(exc).__name__}: {str(exc)[:100]}); "
                           "starting a new one"), False
        if written_by != self.run_id:
            return _warned(f"{self.path} was written by run {written_by!r:.80}, this is run {self.run_id!r:.80}: "
                           "an earlier run's attempts, not counted; a new history replaces it"), False
        return attempts, bool(stopped)

    def _write(self, attempts: list[Attempt], stopped: str) -> None:
        text = json.dumps({"attempts": [{"restored": a.restored, "ended": a.ended} for a in attempts],
                           "run": self.run_id, "stopped": stopped}, sort_keys=True) + "\n"
        try:
            ckpt_storage.write_whole(self.path, text, tmp_name=f".{HISTORY_FILE}.{os.getpid()}.partial")
        except OSError as exc:  # the history must never stop training
            _warned(f"cannot write {self.path}: {exc}")


def _attempt(entry: dict) -> Attempt:
    """One entry as written; a step that is no whole number >= 0 (`1e999`, `-3`, `"x"`) is refused."""
    restored = entry["restored"]
    if isinstance(restored, bool) or not isinstance(restored, int) or restored < 0:
        raise ValueError(f"restored is {restored!r:.40}, not a step")
    if not isinstance(entry["ended"], str):
        raise TypeError(f"ended is a {type(entry['ended']).__name__}")
    return Attempt(restored, entry["ended"][:40])


def _warned(message: str) -> list[Attempt]:
    print(f"warning: {message}", file=sys.stderr, flush=True)
    return []
