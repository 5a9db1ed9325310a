"""Stall detection (issue 15): an injected hang is noticed by the watchdog, its stacks are kept, and the
run recovers as from a lost slice, bit for bit equal to the uninterrupted run, every example once."""

from __future__ import annotations

import numpy as np
import pytest

from elxpk.runs.compare import compare_runs
from elxpk.runs.rundir import load_run as load_run_dir
from elxpk_contract.progress_record import PROGRESS_FILE, read_progress
from elxpk_contract.stall import STALL_FLOOR_S, STALL_MIN_STEPS, STALL_STEP_MULTIPLE, effective_stall_timeout
from tests.support.clock import ManualClock
from tests.support.runs import PERIOD, STEPS, run_trainer
from trainer.elastic.watchdog import StallWatchdog

HANG_STEP = 6
STALL_TIMEOUT_S = 3.0  # the tiny model's steps take milliseconds; a few seconds is a clear hang


@pytest.fixture(scope="module")
def hang_run(tmp_path_factory):
    """Slice 1 hangs before step 6 (no error); the watchdog marks it lost; it is back 0.2 s later."""
    return run_trainer(tmp_path_factory.mktemp("hang"), faults=[f"1@hang:{HANG_STEP}"], revive_after=0.2,
                       stall_timeout_seconds=STALL_TIMEOUT_S)


def test_hang_is_detected_with_its_stacks_and_recovered_as_a_lost_slice(hang_run):
    (stall,) = hang_run.events_named("stall_detected")
    assert stall["step"] == HANG_STEP and stall["slices"] == [1] and stall["action"] == "recover"
    assert stall["timeout_s"] == STALL_TIMEOUT_S and stall["since_s"] >= STALL_TIMEOUT_S
    stacks = (hang_run.run_dir / stall["stacks"]).read_text(encoding="utf-8")
    assert stall["stacks"].startswith("stalls/") and "_hang_if_due" in stacks  # where the main thread hung
    assert 'Thread "MainThread"' in stacks and 'Thread "elxpk-stall-watchdog"' in stacks
    (failure,) = hang_run.events_named("failure_detected")
    assert failure["slices_lost"] == [1] and "simulated stall of slice 1" in failure["error"]
    names = [e["event"] for e in hang_run.events]
    assert names.index("stall_detected") < names.index("failure_detected") < names.index("first_step_after_recovery")
    restore = hang_run.events_named("restore_done")[-1]
    assert restore["step"] == (HANG_STEP // PERIOD) * PERIOD
    assert hang_run.result.attempts == 2 and hang_run.result.final_step == STEPS


def test_hang_run_is_bitwise_equal_to_the_uninterrupted_run_with_every_example_once(hang_run, reference_run):
    comparison = compare_runs(load_run_dir(reference_run.run_dir), load_run_dir(hang_run.run_dir))
    assert comparison.passed, comparison.failures()
    assert comparison.bitwise_equal == len(comparison.steps) == STEPS
    assert comparison.examples_b.exactly_once and comparison.examples_b.unique == STEPS * hang_run.cfg.global_batch
    import jax

    for a, b in zip(jax.tree.leaves(reference_run.result.params), jax.tree.leaves(hang_run.result.params),
                    strict=True):
        assert np.array_equal(np.asarray(a), np.asarray(b))


def test_no_stall_is_reported_by_runs_whose_steps_complete(reference_run, pause_resume_run):
    # Restore, compile and the wait for the revived slice happen while the watchdog is disarmed.
    assert not reference_run.events_named("stall_detected")
    assert not pause_resume_run.events_named("stall_detected")


def test_progress_file_names_the_last_step_and_checkpoint(hang_run):
    progress = read_progress((hang_run.run_dir / "checkpoints" / PROGRESS_FILE).read_text(encoding="utf-8"))
    last = hang_run.metrics[-1]
    assert progress.state == "done" and progress.steps_done == STEPS and progress.attempt == 2
    assert progress.step_time == last["time"]
    committed = hang_run.events_named("checkpoint_committed")[-1]
    assert progress.checkpoint_step == committed["step"] == STEPS
    assert progress.checkpoint_time is not None and progress.checkpoint_time >= committed["time"]


@pytest.fixture
def watchdog():
    clock = ManualClock(100.0)
    dog = StallWatchdog(10.0, clock, on_stall=lambda stall: None)
    yield dog, clock
    dog.close()


def test_watchdog_is_due_only_while_armed_and_past_the_timeout(watchdog):
    dog, clock = watchdog
    clock.now += 1_000
    assert dog.due() is None  # disarmed: compile, restore and the wait for slices never count
    dog.arm(4, [0, 1])
    clock.now += 9.5
    assert dog.due() is None
    dog.beat(5)
    clock.now += 9.5
    assert dog.due() is None  # a completed step restarts the count
    clock.now += 1.0
    stall = dog.due()
    assert stall is not None and stall.step == 5 and stall.active == (0, 1) and stall.since_s == 10.5
    dog.disarm()
    assert dog.due() is None


def test_watchdog_fires_once_from_its_thread():
    import threading

    clock, fired, seen = ManualClock(100.0), threading.Event(), []
    dog = StallWatchdog(5.0, clock, on_stall=lambda stall: (seen.append(stall), fired.set()))
    try:
        dog.arm(3, [0])
        clock.now += 6.0
        assert fired.wait(60), "the watchdog thread never fired"
        assert [s.step for s in seen] == [3] and dog.due() is None  # disarmed after firing
    finally:
        dog.close()


@pytest.fixture
def recovered_stall():
    """A watchdog whose stall response recovers in process (it returns), already fired at step 3 on a manual
    clock: (clock, watchdog, event set by on_stuck, the seconds on_stuck was given)."""
    import threading

    clock, recovered, stuck, seen = ManualClock(100.0), threading.Event(), threading.Event(), []
    dog = StallWatchdog(5.0, clock, on_stall=lambda stall: recovered.set(),
                        on_stuck=lambda stall, waited: (seen.append(waited), stuck.set()))
    try:
        dog.arm(3, [0])
        clock.now += 6.0
        assert recovered.wait(60), "the watchdog thread never fired"
        yield clock, dog, stuck, seen
    finally:
        dog.close()


def test_a_recovery_that_does_not_take_hold_is_escalated_after_one_more_timeout(recovered_stall):
    clock, _, stuck, seen = recovered_stall
    clock.now += 4.9
    assert not stuck.wait(1.5)  # within the bound: the recovery may still take hold
    clock.now += 0.2
    assert stuck.wait(60), "a recovery whose step never returned was not escalated"
    assert seen and seen[0] >= 5.0


def test_a_recovery_that_takes_hold_is_never_escalated(recovered_stall):
    clock, dog, stuck, _ = recovered_stall
    dog.disarm()  # the hung step raised: the attempt left its step loop
    clock.now += 60.0
    assert not stuck.wait(1.5)


def test_auto_timeout_follows_the_median_step_interval_with_a_floor():
    assert effective_stall_timeout(7.5, [100.0] * 50) == 7.5  # an explicit value is used as given
    assert effective_stall_timeout(0, [100.0] * (STALL_MIN_STEPS - 1)) == STALL_FLOOR_S  # too few measured
    assert effective_stall_timeout(0, [0.5] * STALL_MIN_STEPS) == STALL_FLOOR_S  # fast steps: the floor
    slow = [1.0, 1.0, 100.0, 100.0, 100.0, 9_999.0]  # the median, not the mean: one outlier moves nothing
    assert effective_stall_timeout(0, slow) == STALL_STEP_MULTIPLE * 100.0
