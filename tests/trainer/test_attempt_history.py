"""--elastic-stop-on-repeat across group restarts (trainer/elastic/attempt_history.py): the history in a real
checkpoint directory, one AttemptHistory per simulated process (as each group restart is a new process)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from elxpk_contract.exit_codes import PREEMPTED, SLICE_LOST, USER_ERROR, TrainerStopped, user_error_codes
from trainer.elastic.attempt_history import (
    HISTORY_BYTES,
    HISTORY_FILE,
    KEEP,
    Attempt,
    AttemptHistory,
    repeats,
)


def restarts(ckpt: Path, limit: int, plan: list[tuple[int, str | None]]) -> list[int]:
    """Each (restored step, progress state the previous process left) as a new process; the 1-based
    attempts that stopped."""
    stopped = []
    for i, (restored, previous) in enumerate(plan, start=1):
        try:
            AttemptHistory(str(ckpt), limit).started(restored, previous)
        except TrainerStopped as stop:
            assert stop.code is USER_ERROR
            stopped.append(i)
    return stopped


def test_a_slice_dying_at_the_same_step_every_attempt_stops_within_its_count(tmp_path):
    """Slice 1 dies at step 10 with checkpoint period 4: the first attempt saves 4 and 8, every later one
    restores 8 and dies before 12. With N=3 the fourth start (after 3 failures) stops, with 70."""
    plan = [(0, None), (8, "running"), (8, "failed"), (8, "running")]
    assert restarts(tmp_path, 3, plan) == [4]
    saved = json.loads((tmp_path / HISTORY_FILE).read_text())
    assert "3 attempts in a row ended in class slice_lost with no checkpoint past step 8" in saved["stopped"]
    assert 70 in user_error_codes()  # FailJob: the JobSet fails instead of restarting again
    # A new workload on the same directory (the fault fixed) is not stopped by the old run's repeats.
    assert restarts(tmp_path, 3, [(8, "failed")]) == []


def test_progress_between_failures_starts_a_new_run(tmp_path):
    """A new checkpoint (12) ends the run of repeats at 8; the attempt that saved it is the first of the
    next run (as in process, where the run's first failure may follow progress)."""
    plan = [(0, None), (8, "running"), (8, "running"), (12, "running"), (12, "running")]
    assert restarts(tmp_path, 3, plan) == []
    assert restarts(tmp_path, 3, [(12, "running")]) == [1]  # the third failure leaving 12


def test_a_preemption_is_no_failure_and_breaks_the_run(tmp_path):
    plan = [(0, None), (8, "running"), (8, "running"), (8, "preempted"), (8, "running"), (8, "running")]
    assert restarts(tmp_path, 3, plan) == []


def test_off_records_but_never_stops(tmp_path):
    assert restarts(tmp_path, 0, [(8, "running")] * 6) == []
    assert len(json.loads((tmp_path / HISTORY_FILE).read_text())["attempts"]) == 6


def test_a_finished_run_starts_a_new_history(tmp_path):
    assert restarts(tmp_path, 2, [(0, None), (8, "running"), (8, "done"), (8, "running")]) == []


@pytest.mark.parametrize("content", [
    b"not json", b'{"attempts": 3}', b'{"attempts": [{"restored": "x"}]}', b"[]", b"\xff\xfe",
    b" " * (HISTORY_BYTES + 10),
    # What a hostile pass planted (issue 44): each was a traceback, then exit 70, before the first step.
    b'{"attempts": [{"restored": 1e999, "ended": ""}]}', b'{"attempts": ' + b"[" * 60_000,
    b'{"attempts": [{"restored": -3, "ended": ""}]}', b'{"attempts": [{"restored": 8, "ended": 1}]}',
    b'{"attempts": [], "run": 5}', b'{"attempts": [{"restored": true, "ended": ""}]}',
])
def test_a_history_that_is_not_ours_is_started_anew_with_a_warning(tmp_path, capsys, content):
    (tmp_path / HISTORY_FILE).write_bytes(content)
    assert restarts(tmp_path, 2, [(8, "running")]) == []
    assert "warning:" in capsys.readouterr().err
    assert json.loads((tmp_path / HISTORY_FILE).read_text())["attempts"] == [{"restored": 8, "ended": ""}]


def test_a_history_of_another_run_is_set_aside_with_a_warning(tmp_path, capsys):
    """An earlier JobSet on the same checkpoint directory crashed twice before its first save; a new, fixed
    run (another --run-id) is not stopped by its attempts, while the same run's restarts are counted."""
    for _ in range(2):
        AttemptHistory(str(tmp_path), 2, run_id="jobset-uid-a").started(0, "running")
    capsys.readouterr()
    AttemptHistory(str(tmp_path), 2, run_id="jobset-uid-b").started(0, "running")  # would stop run a
    assert "was written by run 'jobset-uid-a', this is run 'jobset-uid-b'" in capsys.readouterr().err
    saved = json.loads((tmp_path / HISTORY_FILE).read_text())
    assert saved["run"] == "jobset-uid-b" and saved["attempts"] == [{"restored": 0, "ended": ""}]
    AttemptHistory(str(tmp_path), 2, run_id="jobset-uid-b").started(0, "running")
    with pytest.raises(TrainerStopped):  # run b's own repeats still stop it
        AttemptHistory(str(tmp_path), 2, run_id="jobset-uid-b").started(0, "running")


def test_the_history_is_bounded(tmp_path):
    restarts(tmp_path, 0, [(i, "running") for i in range(KEEP + 20)])
    assert len(json.loads((tmp_path / HISTORY_FILE).read_text())["attempts"]) == KEEP


classes = st.sampled_from([SLICE_LOST.name, PREEMPTED.name])


@given(st.lists(st.tuples(st.integers(0, 3), classes), max_size=12), st.integers(0, 3))
def test_repeats_counts_only_failures_of_one_class_that_left_the_same_checkpoint(entries, now):
    attempts = [Attempt(r, c) for r, c in entries]
    run = repeats(attempts, now)
    assert 0 <= run <= len(attempts)
    tail = attempts[len(attempts) - run:]
    assert all(a.ended == SLICE_LOST.name for a in tail)
    lefts = [a.restored for a in tail[1:]] + [now] if tail else []
    assert all(left == now for left in lefts)


def test_the_stop_reaches_status_why_through_the_progress_record(tmp_path):
    """The trainer's end of run writes the record `workload status --why` reads: its first reason, since the
    history's stop (70) is for good."""
    from elxpk.cluster.diagnosis.why_recovery import trainer_stopped
    from elxpk_contract.progress_record import read_progress
    from trainer.clock import SystemClock
    from trainer.elastic.loop import stop_record
    from trainer.elastic.progress import STOPPED_FOR_GOOD, ProgressWriter

    writer = ProgressWriter(str(tmp_path), SystemClock())
    try:
        AttemptHistory(str(tmp_path), 1).started(8, "running")
        AttemptHistory(str(tmp_path), 1).started(8, "running")
    except TrainerStopped as stop:
        writer.finish(*stop_record(stop))
    progress = read_progress(writer.path.read_text())
    assert (progress.exit_code, progress.gave_up()) == (70, True)
    record = {**progress.to_json(), "gave_up": progress.gave_up()}
    [reason] = trainer_stopped(record, "train")
    assert reason.cause == "trainer-stopped"
    assert reason.text.startswith("the trainer gave up for good (exit 70 user_error): elastic: 1 attempts in a row "
                                  "ended in class slice_lost")
    assert trainer_stopped({**record, "gave_up": False}, "train") == [] and trainer_stopped(None, "train") == []
    # The next process on the directory reads it as a run that ended for good: a new run (issue 51, finding 7)
    assert ProgressWriter(str(tmp_path), SystemClock()).previous_state == STOPPED_FOR_GOOD


def test_every_process_stops_with_process_0(tmp_path):
    """The verdict is process 0's, shared: a process that is not 0 neither reads nor writes the history,
    and stops when process 0's shared value says so (else it would wait for process 0 in its first step)."""
    AttemptHistory(str(tmp_path), 1, primary=False, share=lambda value: 0).started(8, None)
    assert not (tmp_path / HISTORY_FILE).exists()
    with pytest.raises(TrainerStopped) as stop:
        AttemptHistory(str(tmp_path), 1, primary=False, share=lambda value: 1).started(8, None)
    assert stop.value.code is USER_ERROR and "process 0 stopped the run" in str(stop.value)
    shared = []
    AttemptHistory(str(tmp_path), 1, share=lambda value: shared.append(value) or value).started(8, None)
    assert shared == [0]


@pytest.mark.parametrize("ended", ["stopped by this history", "the last process exited with a code no restart follows"])
def test_a_stale_history_without_a_run_id_never_stops_a_new_run(tmp_path, capsys, ended):
    """Issue 51, finding 7: with no --run-id (by hand, another orchestrator) a history stopped a new, fixed
    run at once with 70. A run that ended for good is told apart without an id: its history says it stopped
    it, or the progress record says its last process exited 70 (or 2), which no orchestrator restarts."""
    from tests.support.clock import ManualClock
    from trainer.elastic.progress import ProgressWriter

    if ended.startswith("stopped"):
        assert restarts(tmp_path, 2, [(0, None), (8, "running"), (8, "running")]) == [3]
        previous = ProgressWriter(str(tmp_path), ManualClock()).previous_state  # no record: None
    else:
        assert restarts(tmp_path, 0, [(8, "running")] * 4) == []  # the setting off: 4 failures recorded
        writer = ProgressWriter(str(tmp_path), ManualClock())
        writer.finish("failed", "the user's code raised", 70)
        previous = ProgressWriter(str(tmp_path), ManualClock()).previous_state
    capsys.readouterr()
    assert restarts(tmp_path, 2, [(8, previous)]) == []  # the new run starts
    assert "is the history of a run that ended" in capsys.readouterr().err
    assert json.loads((tmp_path / HISTORY_FILE).read_text())["attempts"] == [{"restored": 8, "ended": ""}]
    assert restarts(tmp_path, 2, [(8, "running"), (8, "running")]) == [2]  # its own repeats still count
