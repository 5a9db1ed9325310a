"""Resize: continue on the survivor with the same global batch, then scale back up (items ii, iii).

Bitwise (--deterministic-reduction on, the default, trainer/core/reduction.py): the survivor computes the lost
slice's shard of the batch with the same per-shard program and the partial gradients are added in shard
order, so the losses equal the uninterrupted run's bit for bit (more in test_bitwise_resize.py).
"""

from __future__ import annotations

import pytest

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


def _compiled_bytes(cfg, slices: list[int], donate: bool) -> int:
    import jax

    from trainer.clock import SystemClock
    from trainer.core import mesh as meshlib
    from trainer.core import step as steplib

    devices = jax.devices()
    per = cfg.devices_per_slice
    mesh = meshlib.build_mesh({s: devices[s * per:(s + 1) * per] for s in range(cfg.num_slices)}, slices)
    compiled, _ = steplib.StepCache(cfg, SystemClock(), donate=donate).get(mesh)
    assert compiled.bytes_per_device is not None
    return compiled.bytes_per_device


@pytest.mark.parametrize("recovery", ["checkpoint", "live"])
def test_a_resize_that_does_not_fit_the_devices_waits_for_the_slice_instead(tmp_path, recovery):
    """4 slices of one device, resize allowed down to 1: on 3 survivors each carries two shards and the step
    needs more memory than a device has (XLA's own figure, checked before the step runs). The run does not
    fail: it records the refusal, waits for the slice, and resumes at full width, bitwise as ever."""
    from elxpk_contract.faults import FaultSchedule
    from tests.support.clock import ManualClock
    from tests.support.runs import load_run, run_trainer, tiny_config
    from trainer.core.memory import estimate
    from trainer.core.state import abstract_state
    from trainer.elastic.loop import train
    from trainer.elastic.slices import SimulatedSlices

    # No remat: under this limit --remat-policy auto would pick a policy, and the figures below are none's.
    cfg = tiny_config(tmp_path / "refused", num_slices=4, devices_per_slice=1, global_batch=12,
                      elastic_min_slice_count=1, recovery=recovery, remat_policy="none")
    donate = recovery == "checkpoint"  # live recovery keeps the step's input, so its step needs more
    full, three = _compiled_bytes(cfg, [0, 1, 2, 3], donate), _compiled_bytes(cfg, [0, 2, 3], donate)
    limit = three - 1  # one byte short for the survivors
    assert full < limit < three  # the premise: the survivors' step needs more per device than the full one
    assert estimate(cfg, abstract_state(cfg), 1, 4, donates=donate).total <= limit  # the start-up check passes
    # Time moves only when the trainer sleeps: the slice is still down when the survivors are tried, however
    # long the failure handling takes on a loaded machine, and back after the wait's sixth poll.
    clock = ManualClock()
    backend = SimulatedSlices(4, 1, FaultSchedule.parse(["1@6"], revive_after=0.3), clock, memory_limit_bytes=limit)
    run = load_run(cfg, train(cfg, backend=backend, clock=clock), cfg.run_dir)

    (refused,) = run.events_named("resize_refused")
    assert refused["slices"] == [0, 2, 3] and refused["min_slices"] == 4
    assert refused["needed_bytes"] == three and refused["limit_bytes"] == limit
    assert {tuple(r["slices"]) for r in run.metrics} == {(0, 1, 2, 3)}  # no step ran on the survivors
    assert not [e for e in run.events_named("failure_detected") if e["step"] != 6]  # one failure, no retry spent
    reference = run_trainer(tmp_path / "ref", num_slices=4, devices_per_slice=1, global_batch=12)
    restore = run.events_named("restore_done")[-1]
    assert restore["slices"] == [0, 1, 2, 3] and restore["state_source"] == recovery  # live: no rewind
    got, ref = run.last_by_step(), reference.last_by_step()
    assert [got[s]["loss"] for s in range(STEPS)] == [ref[s]["loss"] for s in range(STEPS)]
    ids = [i for s in range(STEPS) for i in range(*got[s]["examples"])]
    assert ids == list(range(STEPS * cfg.global_batch))
