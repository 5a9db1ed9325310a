"""Recovery from live replicas (--recovery live): a slice loss resumes at the failed step, from the
survivors' copy of the state, with no checkpoint read and no step executed twice; and each case where
that copy cannot be trusted falls back to the checkpoint and says why."""

from __future__ import annotations

import numpy as np
import pytest

from tests.support.runs import PERIOD, STEPS, run_trainer

KILL = 9  # not a multiple of PERIOD: a checkpoint recovery would rewind to 8


def _flat(params) -> list[np.ndarray]:
    import jax

    return [np.asarray(leaf) for leaf in jax.tree.leaves(params)]


def _each_step_once_each_example_once(run) -> None:
    steps = [r["step"] for r in run.metrics]
    assert steps == list(range(STEPS)), steps  # no step re-executed, no duplicate record
    ids = [i for r in run.metrics for i in range(*r["examples"])]
    assert ids == list(range(STEPS * run.cfg.global_batch))


def _bitwise_equal(run, reference) -> None:
    ref, got = reference.last_by_step(), run.last_by_step()
    assert [got[s]["loss"] for s in range(STEPS)] == [ref[s]["loss"] for s in range(STEPS)]
    for a, b in zip(_flat(reference.result.params), _flat(run.result.params), strict=True):
        np.testing.assert_array_equal(a, b)


def _live_restores(run) -> list[dict]:
    return [e for e in run.events_named("restore_done") if e["state_source"] == "live"]


@pytest.fixture(scope="module")
def live_pause(tmp_path_factory):
    return run_trainer(tmp_path_factory.mktemp("live-pause"), faults=[f"1@{KILL}"], revive_after=0.0,
                       recovery="live")


def test_pause_resume_rebuilds_the_failed_step_from_the_survivor(live_pause, reference_run):
    run = live_pause
    (failure,) = run.events_named("failure_detected")
    (restore,) = _live_restores(run)
    assert failure["step"] == KILL and restore["step"] == KILL and restore["slices"] == [0, 1]
    assert restore["from_checkpoint"] is False and restore["live_fallback"] == "" and restore["rebuild_s"] > 0
    (first,) = run.events_named("first_step_after_recovery")
    assert first["step"] == KILL
    names = [e["event"] for e in run.events]
    i = names.index("failure_detected")
    order = [names.index(n, i) for n in ("slices_ready", "restore_done", "first_step_after_recovery")]
    assert order == sorted(order)
    assert not run.events_named("checkpoint_skipped")
    _each_step_once_each_example_once(run)
    _bitwise_equal(run, reference_run)


def test_run_json_carries_the_memory_cost_of_the_live_state(live_pause, pause_resume_run):
    import json

    memory = json.loads((live_pause.run_dir / "run.json").read_text())["memory"]
    # One more share of the state per device: the step's input is kept while its output is written.
    assert memory["live_recovery_bytes_per_device"] == memory["state_bytes_per_device"] > 0
    # --recovery checkpoint: the step donates its input, nothing extra is kept.
    memory = json.loads((pause_resume_run.run_dir / "run.json").read_text())["memory"]
    assert memory["live_recovery_bytes_per_device"] == 0 < memory["state_bytes_per_device"]


@pytest.mark.parametrize("recovery", ["live", "checkpoint"])
def test_a_slice_lost_while_the_step_runs_discards_its_output(tmp_path, reference_run, recovery):
    """K@mid:S: the step was dispatched (and, with --recovery checkpoint, donated its input) when the loss
    surfaces at the wait for its result. Live: resume at S from the survivor's copy of the input; checkpoint:
    rewind to the newest checkpoint. Either way the failed step's output is never used, every example is
    trained on exactly once in the result, and the run is bitwise the uninterrupted one."""
    run = run_trainer(tmp_path, faults=[f"1@mid:{KILL}"], revive_after=0.0, recovery=recovery)
    (failure,) = run.events_named("failure_detected")
    assert failure["step"] == KILL and "while running step" in failure["error"]
    (restore,) = [e for e in run.events_named("restore_done") if e["step"] > 0]
    if recovery == "live":
        assert restore["state_source"] == "live" and restore["step"] == KILL
        _each_step_once_each_example_once(run)
    else:
        assert restore["state_source"] == "checkpoint" and restore["step"] == KILL - KILL % PERIOD
        ids = [i for s, r in sorted(run.last_by_step().items()) for i in range(*r["examples"])]
        assert ids == list(range(STEPS * run.cfg.global_batch))  # the rewound steps replayed the same examples
    _bitwise_equal(run, reference_run)


def test_resize_with_the_slice_kept_away_continues_on_the_survivor(tmp_path, reference_run):
    run = run_trainer(tmp_path, faults=[f"1@{KILL}"], recovery="live", elastic_min_slice_count=1)
    (restore,) = _live_restores(run)
    assert restore["step"] == KILL and restore["slices"] == [0]
    assert [r["slices"] for r in run.metrics] == [[0, 1]] * KILL + [[0]] * (STEPS - KILL)
    _each_step_once_each_example_once(run)
    # Up to the failure the trajectory is the reference's, bit for bit (after it, issue 12's territory).
    ref = reference_run.last_by_step()
    assert [r["loss"] for r in run.metrics[:KILL + 1]] == [ref[s]["loss"] for s in range(KILL + 1)]


def test_scale_up_gives_the_returning_slice_the_survivors_state(tmp_path):
    run = run_trainer(tmp_path, faults=["1@6+10"], recovery="live", elastic_min_slice_count=1)
    restores = _live_restores(run)
    assert [(r["step"], r["slices"]) for r in restores] == [(6, [0]), (10, [0, 1])]
    (scale_up,) = run.events_named("scale_up")
    assert scale_up["step"] == 10
    # Nothing went through storage for the return: only the periodic checkpoints were saved.
    assert all(e["step"] % PERIOD == 0 for e in run.events_named("checkpoint_saved"))
    _each_step_once_each_example_once(run)


def test_kill_during_a_save_resumes_after_the_last_completed_step(tmp_path, reference_run):
    run = run_trainer(tmp_path, faults=["1@save:8"], revive_after=0.0, recovery="live")
    (failure,) = run.events_named("failure_detected")
    (restore,) = _live_restores(run)
    assert "checkpoint of step 8" in failure["error"]
    # The failed commit surfaces at a step's end (or a save's start): every step recorded before is kept.
    assert restore["step"] == len([r for r in run.metrics if r["time"] < failure["time"]]) > 8
    _each_step_once_each_example_once(run)
    _bitwise_equal(run, reference_run)


def test_kill_in_the_data_loader_resets_the_data_position_to_the_step(tmp_path, reference_run):
    run = run_trainer(tmp_path, faults=["1@data:5"], revive_after=0.0, recovery="live")
    (restore,) = _live_restores(run)
    assert restore["step"] == 5
    _each_step_once_each_example_once(run)  # the batch fetched for the failed step is fetched again once
    _bitwise_equal(run, reference_run)


def test_two_failures_in_a_row_both_recover_live(tmp_path, reference_run):
    run = run_trainer(tmp_path, faults=["1@9", "0@10"], revive_after=0.0, recovery="live")
    assert [e["step"] for e in run.events_named("failure_detected")] == [9, 10]
    assert [(r["step"], r["slices"]) for r in _live_restores(run)] == [(9, [0, 1]), (10, [0, 1])]
    _each_step_once_each_example_once(run)
    _bitwise_equal(run, reference_run)


def _fallback(run) -> dict:
    (failure,) = run.events_named("failure_detected")
    restore = run.events_named("restore_done")[-1]
    assert restore["state_source"] == "checkpoint" and restore["from_checkpoint"] is True
    assert restore["step"] == (failure["step"] // PERIOD) * PERIOD  # rewound to the newest checkpoint
    return restore


def test_every_slice_lost_falls_back_to_the_checkpoint(tmp_path, reference_run):
    run = run_trainer(tmp_path, faults=[f"0@{KILL}", f"1@{KILL}"], revive_after=0.0, recovery="live")
    assert "every slice of the mesh was lost" in _fallback(run)["live_fallback"]
    _bitwise_equal(run, reference_run)


def test_a_fingerprint_that_disagrees_falls_back_to_the_checkpoint(tmp_path, monkeypatch, reference_run):
    from trainer.elastic import live_recovery

    honest = live_recovery.survivor_copy
    corrupted: list[int] = []

    def flip_one(x, survivor_mesh):  # the survivors' buffer of the first array reads off by one
        copy = honest(x, survivor_mesh)
        if not corrupted and not isinstance(copy, str):
            corrupted.append(1)
            return copy + np.ones((), copy.dtype)
        return copy

    monkeypatch.setattr(live_recovery, "survivor_copy", flip_one)
    run = run_trainer(tmp_path, faults=[f"1@{KILL}"], revive_after=0.0, recovery="live")
    reason = _fallback(run)["live_fallback"]
    assert reason.startswith(f"the rebuilt state does not match the survivors' state of step {KILL}")
    assert "fingerprint mismatch" in reason
    _bitwise_equal(run, reference_run)


def test_recovery_checkpoint_rewinds_without_a_fallback_reason(pause_resume_run):
    restore = pause_resume_run.events_named("restore_done")[-1]  # the shared runs use --recovery checkpoint
    assert restore["state_source"] == "checkpoint" and restore["live_fallback"] == ""


def test_a_state_sharded_across_slices_has_no_complete_replica():
    import jax
    from jax.sharding import NamedSharding, PartitionSpec

    from trainer.core import mesh
    from trainer.elastic import live_recovery

    devices = jax.devices()[:4]
    slice_devices = {0: devices[:2], 1: devices[2:]}
    full = mesh.build_mesh(slice_devices, [0, 1])
    host = np.arange(64, dtype=np.float32).reshape(8, 8)
    across = jax.device_put(host, NamedSharding(full, PartitionSpec("slice", "data")))
    within = jax.device_put(host, NamedSharding(full, PartitionSpec(None, "data")))
    state = {"a": within, "b": across}
    kept = live_recovery.keep(3, state, {"global_next_index": 24}, [0, 1])
    rebuilt, reason = live_recovery.rebuild(kept, slice_devices, [0], [0, 1])
    assert rebuilt is None and reason is not None and "split across slices" in reason
    # Only the replicated one: rebuilt from slice 0 alone onto both slices, bit for bit.
    kept = live_recovery.keep(3, {"a": within}, {"global_next_index": 24}, [0, 1])
    rebuilt, reason = live_recovery.rebuild(kept, slice_devices, [0], [0, 1])
    assert reason is None
    np.testing.assert_array_equal(np.asarray(rebuilt["a"]), host)
    assert rebuilt["a"].sharding == within.sharding


def test_a_multi_controller_backend_cannot_recover_live():
    from tests.support.runs import tiny_config
    from trainer.elastic import live_recovery
    from trainer.elastic.slices import MultiControllerSlices, SimulatedSlices

    cfg = tiny_config("unused", recovery="live")
    reason = live_recovery.unavailable(cfg, MultiControllerSlices.__new__(MultiControllerSlices))
    assert reason is not None and "multi-controller" in reason and "aborts" in reason
    assert live_recovery.unavailable(cfg, SimulatedSlices.__new__(SimulatedSlices)) is None
    assert live_recovery.unavailable(tiny_config("unused"), SimulatedSlices.__new__(SimulatedSlices)) == (
        "--recovery checkpoint")


def test_each_slice_is_checked_on_its_own_replica():
    """One reduction on the mesh gives each slice its own replica's fingerprint, so a bad copy on one slice
    cannot hide behind another's result; survivors that disagree are not trusted."""
    import jax
    from jax.sharding import NamedSharding, PartitionSpec

    from trainer.core import mesh
    from trainer.elastic import live_recovery

    devices = jax.devices()[:4]
    slice_devices = {0: devices[:2], 1: devices[2:]}
    full = mesh.build_mesh(slice_devices, [0, 1])
    host = np.arange(4096, dtype=np.float32).reshape(64, 64)
    bad = host.copy()
    bad[5, 7] = -1.0
    sharding = NamedSharding(full, PartitionSpec(None, "data"))
    index = sharding.devices_indices_map(host.shape)
    pieces = [jax.device_put((bad if d in slice_devices[1] else host)[index[d]], d) for d in devices]
    split_brain = jax.make_array_from_single_device_arrays(host.shape, sharding, pieces)
    first, second = live_recovery.replica_fingerprints({"w": split_brain}, full)
    assert first != second
    kept = live_recovery.keep(3, {"w": split_brain}, {"global_next_index": 24}, [0, 1])
    rebuilt, reason = live_recovery.rebuild(kept, slice_devices, [0, 1], [0, 1])
    assert rebuilt is None and reason is not None and reason.startswith("the surviving slices disagree on step 3")
    # Slice 0 alone is intact: its replica is what slice 1 receives.
    rebuilt, reason = live_recovery.rebuild(kept, slice_devices, [0], [0, 1])
    assert reason is None
    np.testing.assert_array_equal(np.asarray(rebuilt["w"].addressable_shards[-1].data),
                                  host[index[devices[3]]])


@pytest.mark.parametrize("recovery", ["live", "checkpoint"])
def test_the_step_donates_its_input_state_only_where_recovery_does_not_need_it(tmp_path, recovery):
    """Live recovery rests on the step keeping its input: a step that donated it would leave nothing to
    recover from when it fails midway. With --recovery checkpoint the input's buffers become the output
    (issue 10: one state share less per device). Fails if either side of that changes."""
    import jax

    from tests.support.runs import tiny_config
    from trainer.clock import SystemClock
    from trainer.core import mesh, step
    from trainer.elastic import live_recovery
    from trainer.elastic.slices import MultiControllerSlices, SimulatedSlices

    cfg = tiny_config(tmp_path, recovery=recovery)
    devices = jax.devices()[:4]
    full = mesh.build_mesh({0: devices[:2], 1: devices[2:]}, [0, 1])
    # The backends' class attributes are what the decision reads (no backend need be started for it).
    donate = live_recovery.step_donates(cfg, SimulatedSlices)  # type: ignore[arg-type]
    assert donate == (recovery == "checkpoint")
    assert live_recovery.step_donates(cfg, MultiControllerSlices)  # type: ignore[arg-type]  # no live path
    cache = step.StepCache(cfg, SystemClock(), donate=donate)
    compiled, _ = cache.get(full)
    state = cache.init_state(full)
    tokens = mesh.put_batch(np.zeros((cfg.global_batch, cfg.seq_len + 1), np.int32), full)
    new_state, _ = compiled.executable(state, tokens, jax.device_put(np.int32(0), mesh.replicated(full)))
    jax.block_until_ready(new_state)
    deleted = [leaf.is_deleted() for leaf in jax.tree.leaves(state)]
    assert all(deleted) if donate else not any(deleted)
