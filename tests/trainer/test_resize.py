"""Resize: continue on the survivor with the same global batch, then scale back up (items ii, iii).

Not bitwise: on one slice each device reduces 4 examples instead of 2, so the cross-device sum of the
gradient is added up in a different order; float32 addition is not associative, so the last bits of
the loss can differ. The math (global batch, learning rate, data order) is unchanged.
"""

from __future__ import annotations

import numpy as np

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


def test_losses_match_the_reference_within_1e6_relative(reference_run, resize_run):
    ref, got = reference_run.last_by_step(), resize_run.last_by_step()
    a = np.array([float.fromhex(ref[s]["loss"]) for s in range(STEPS)])
    b = np.array([float.fromhex(got[s]["loss"]) for s in range(STEPS)])
    np.testing.assert_allclose(b, a, rtol=1e-6, atol=0)


def test_examples_exactly_once_under_resize(resize_run):
    last = resize_run.last_by_step()
    ids = [i for s in range(STEPS) for i in range(*last[s]["examples"])]
    assert ids == list(range(STEPS * resize_run.cfg.global_batch))


def test_back_at_full_width_reuses_the_first_compile(resize_run):
    first_steps = resize_run.events_named("first_step_after_recovery")
    assert [e["reason"] for e in first_steps] == ["failure", "scale_up"]
    assert first_steps[1]["recompiled"] is False  # the two-slice mesh was compiled before
