"""CHECKPOINT_DIR/elxpk-progress.json: written by the trainer (trainer/elastic/progress.py), read by the launcher
through `elxpk_contract.progress_record.read_progress`."""

from __future__ import annotations

import json

import pytest

from elxpk_contract.progress_record import PROGRESS_FILE, Progress, read_progress
from elxpk_contract.record_fields import RecordError
from tests.support.clock import ManualClock
from trainer.elastic.progress import ProgressWriter


def _read(tmp_path) -> Progress:
    return read_progress((tmp_path / PROGRESS_FILE).read_text(encoding="utf-8"))


def test_steps_are_published_at_most_every_period_and_checkpoints_at_once(tmp_path):
    clock = ManualClock()
    writer = ProgressWriter(str(tmp_path), clock, period_s=30.0)
    writer.step_done(1, at=1_000.5, attempt=1)  # the first step is published at once
    assert _read(tmp_path).steps_done == 1
    clock.now += 10
    writer.step_done(2, at=1_010.0, attempt=1)
    assert _read(tmp_path).steps_done == 1  # within the period: not rewritten
    writer.checkpoint(2, at=1_010.5)
    published = _read(tmp_path)
    assert (published.steps_done, published.step_time, published.checkpoint_step) == (2, 1_010.0, 2)
    assert published.checkpoint_time == 1_010.5 and published.updated_at == clock.now
    assert published.resumed_at == 1_000.5  # the first step of the attempt: later steps move step_time only
    clock.now += 30
    writer.step_done(3, at=1_040.0, attempt=2)
    assert (_read(tmp_path).steps_done, _read(tmp_path).attempt, _read(tmp_path).resumed_at) == (3, 2, 1_040.0)
    clock.now += 1
    again = ProgressWriter(str(tmp_path), clock)  # a group restart: a new process, its loop at attempt 1 again
    again.step_done(4, at=1_050.0, attempt=1)
    assert _read(tmp_path).resumed_at == 1_050.0  # its first step ended its recovery, written at once
    assert _read(tmp_path).attempt == 3  # the run's third attempt, not the new process's first
    writer.finish("done")
    assert _read(tmp_path).state == "done"
    assert [p.name for p in tmp_path.iterdir()] == [PROGRESS_FILE]  # the temporary file was renamed


def test_the_attempt_counts_every_group_restart_of_the_run(tmp_path):
    """Issue 52 L8: under multi-controller each JobSet restart is a new process whose elastic loop starts at 1;
    the record's attempt went on saying 1 across 9 restarts. It counts the run's attempts: a restart that died
    before its first step counts as one, and a new run (after a clean finish or a stop for good) starts at 1."""
    clock = ManualClock()
    ProgressWriter(str(tmp_path), clock).step_done(1, at=1_000.0, attempt=1)
    for restart in range(2, 11):  # 9 restarts, each a process that steps once and is killed (no finish)
        ProgressWriter(str(tmp_path), clock).step_done(restart, at=1_000.0 + restart, attempt=1)
        assert _read(tmp_path).attempt == restart
    dying = ProgressWriter(str(tmp_path), clock)
    dying.phase("restoring")  # killed while it restores: its attempt is published with the phase
    assert _read(tmp_path).attempt == 11
    gave_up = ProgressWriter(str(tmp_path), clock)
    gave_up.step_done(11, at=2_000.0, attempt=1)
    assert _read(tmp_path).attempt == 12
    gave_up.finish("failed", "elastic: 2 attempts in a row", exit_code=70)
    fresh = ProgressWriter(str(tmp_path), clock)  # a stop for good: whatever starts next is a new run
    fresh.step_done(12, at=2_100.0, attempt=1)
    assert _read(tmp_path).attempt == 1
    fresh.finish("done")
    ProgressWriter(str(tmp_path), clock).step_done(13, at=2_200.0, attempt=2)  # more --steps after a clean finish
    assert _read(tmp_path).attempt == 2


def test_a_restarted_trainer_keeps_the_commit_time_of_the_checkpoint_it_restores(tmp_path):
    clock = ManualClock()
    first = ProgressWriter(str(tmp_path), clock)
    first.checkpoint(8, at=1_000.0)
    clock.now += 500
    second = ProgressWriter(str(tmp_path), clock)
    second.checkpoint(8, at=clock.now)  # restored: committed by the first process, 500 s ago
    assert _read(tmp_path).checkpoint_time == 1_000.0
    assert _read(tmp_path).checkpoint_age(clock.now) == 500.0


def test_a_restarted_trainer_publishes_its_phases_at_once(tmp_path):
    """The previous process stopped (exit 77): the new one says `restoring`, then `compiling`, each at once and
    running again (no stale stop), and its first step at once though the period has not passed."""
    clock = ManualClock()
    first = ProgressWriter(str(tmp_path), clock)
    first.step_done(40, at=1_000.0, attempt=1)
    first.finish("preempted", "SIGTERM", exit_code=77)
    clock.now += 5
    second = ProgressWriter(str(tmp_path), clock)
    assert _read(tmp_path).state == "preempted"  # nothing written before the new process begins a phase
    second.phase("restoring")
    published = _read(tmp_path)
    assert (published.phase, published.state, published.exit_code, published.steps_done) == ("restoring", "running",
                                                                                              None, 40)
    clock.now += 3
    second.phase("compiling")
    assert (_read(tmp_path).phase, _read(tmp_path).updated_at) == ("compiling", clock.now)
    clock.now += 1
    second.step_done(33, at=clock.now, attempt=1)
    assert (_read(tmp_path).phase, _read(tmp_path).steps_done) == ("stepping", 33)


def test_reader_gives_ages_and_round_trips_what_the_writer_wrote():
    progress = Progress(steps_done=120, step_time=1_000.0, checkpoint_step=100, checkpoint_time=900.0,
                        updated_at=1_001.0, state="running", attempt=3)
    assert read_progress(json.dumps(progress.to_json())) == progress
    assert progress.step_age(1_060.0) == 60.0 and progress.checkpoint_age(1_060.0) == 160.0
    fresh = Progress(0, None, None, None, 5.0)
    assert fresh.step_age(10.0) is None and fresh.checkpoint_age(10.0) is None


@pytest.mark.parametrize(("text", "says"), [
    ("{", "not JSON"),
    ("[]", "expected a JSON object"),
    ('{"version": 2}', "version 2, this reader knows 1"),
    ('{"version": 1, "steps_done": 3}', "step_time: missing"),
    ('{"version": 1, "steps_done": "3", "step_time": null, "checkpoint_step": null, "checkpoint_time": null, '
     '"updated_at": 1}', "steps_done: expected a whole number"),
    ('{"version": 1, "steps_done": 3, "step_time": null, "checkpoint_step": null, "checkpoint_time": null, '
     '"updated_at": 1, "state": "sleeping"}', "state 'sleeping': not one of"),
    ('{"version": 1, "steps_done": 3, "step_time": null, "checkpoint_step": null, "checkpoint_time": null, '
     '"updated_at": 1, "phase": "napping"}', "phase 'napping': not one of restoring, compiling, stepping"),
    ('{"version": 1, "steps_done": -1, "step_time": null, "checkpoint_step": null, "checkpoint_time": null, '
     '"updated_at": 1}', "steps count from 0"),
])
def test_reader_refuses_anything_else_in_one_line(text, says):
    with pytest.raises(RecordError, match=says) as info:
        read_progress(text)
    assert "\n" not in str(info.value)
