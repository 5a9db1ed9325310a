"""Resize: continue on the survivor with the same global batch, then scale back up (items ii, iii).

Bitwise (--deterministic-reduction on, the default, trainer/reduction.py): the survivor computes the lost
slice's shard of the batch with the same per-shard program and the partial gradients are added in shard
order, so the losses equal the uninterrupted run's bit for bit (more in test_bitwise_resize.py).
"""

from __future__ import annotations

from tests.support.runs import PERIOD, RESIZE_KILL_STEP, RESIZE_REVIVE_STEP, STEPS


def test_survivor_trains_alone_then_full_width_returns(resize_run):
    last = resize_run.last_by_step()
    restored_at = (RESIZE_KILL_STEP // PERIOD) * PERIOD
    for step in range(STEPS):
        alone = restored_at <= step < RESIZE_REVIVE_STEP
        assert last[step]["slices"] == ([0] if alone else [0, 1]), step
    (scale_up,) = resize_run.events_named("scale_up")
    assert scale_up["step"] == RESIZE_REVIVE_STEP and scale_up["returning"] == [1]


def test_scale_up_checkpoints_first_so_nothing_is_rewound(resize_run):
    restores = resize_run.events_named("restore_done")
    assert [r["step"] for r in restores] == [0, (RESIZE_KILL_STEP // PERIOD) * PERIOD, RESIZE_REVIVE_STEP]
    assert RESIZE_REVIVE_STEP in [e["step"] for e in resize_run.events_named("checkpoint_committed")]
    steps_run = [r["step"] for r in resize_run.metrics]
    assert steps_run.count(RESIZE_REVIVE_STEP) == 1  # the step at the scale-up ran once


def test_losses_equal_the_reference_bitwise(reference_run, resize_run):
    ref, got = reference_run.last_by_step(), resize_run.last_by_step()
    assert [got[s]["loss"] for s in range(STEPS)] == [ref[s]["loss"] for s in range(STEPS)]


def test_examples_exactly_once_under_resize(resize_run):
    last = resize_run.last_by_step()
    ids = [i for s in range(STEPS) for i in range(*last[s]["examples"])]
    assert ids == list(range(STEPS * resize_run.cfg.global_batch))


def test_back_at_full_width_reuses_the_first_compile(resize_run):
    first_steps = resize_run.events_named("first_step_after_recovery")
    assert [e["reason"] for e in first_steps] == ["failure", "scale_up"]
    assert first_steps[1]["recompiled"] is False  # the two-slice mesh was compiled before
