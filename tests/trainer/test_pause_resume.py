"""Pause-and-resume: a slice loss mid-run is invisible in the results, bit for bit (issue items i, ii)."""

from __future__ import annotations

import numpy as np

from tests.support.runs import KILL_STEP, PERIOD, STEPS


def _flat(params) -> list[np.ndarray]:
    import jax

    return [np.asarray(leaf) for leaf in jax.tree.leaves(params)]


def test_reference_run_is_complete_and_learns(reference_run):
    last = reference_run.last_by_step()
    assert sorted(last) == list(range(STEPS)) and len(reference_run.metrics) == STEPS
    losses = [float.fromhex(last[s]["loss"]) for s in range(STEPS)]
    assert np.mean(losses[-4:]) < np.mean(losses[:4])  # a trainer whose loss never moves tests nothing
    assert all(r["slices"] == [0, 1] for r in reference_run.metrics)


def test_kill_is_detected_and_recovered_in_the_same_process(pause_resume_run):
    run = pause_resume_run
    (failure,) = run.events_named("failure_detected")
    assert failure["step"] == KILL_STEP and failure["error"].startswith("DATA_LOSS:")
    restore = run.events_named("restore_done")[-1]
    assert restore["step"] == (KILL_STEP // PERIOD) * PERIOD and restore["from_checkpoint"] is True
    (first,) = run.events_named("first_step_after_recovery")
    assert first["step"] == restore["step"] and first["recovery_s"] > 0
    names = [e["event"] for e in run.events]
    order = ["failure_detected", "slices_ready", "restore_started", "restore_done", "first_step_after_recovery"]
    positions = [names.index(n, names.index("failure_detected")) for n in order]
    assert positions == sorted(positions)
    assert run.result.attempts == 2 and run.result.recoveries == 1


def test_events_name_the_lost_slice_and_each_attempts_compile(pause_resume_run):
    run = pause_resume_run
    (failure,) = run.events_named("failure_detected")
    assert failure["slices_lost"] == [1]
    restores = run.events_named("restore_done")
    assert len(restores) == 2
    for restore in restores:  # compile_s: the wait for the step after the restore (made beside it), 0 when reused
        assert restore["compile_s"] == 0.0 or restore["compile_needed"]
    assert restores[1]["compile_s"] == 0.0  # the retry on the same mesh
    # `time` is the restore's end although the event is written after the compile.
    started = run.events_named("restore_started")
    assert all(s["time"] <= r["time"] for s, r in zip(started, restores, strict=True))


def test_metric_records_carry_their_end_time(pause_resume_run):
    run = pause_resume_run
    times = [r["time"] for r in run.metrics]
    assert times == sorted(times)
    first = run.events_named("run_started")[0]["time"]
    last = run.events_named("run_finished")[-1]["time"]
    assert first < times[0] and times[-1] <= last
    (failure,) = run.events_named("failure_detected")
    (back,) = run.events_named("first_step_after_recovery")
    rerun = [r for r in run.metrics if r["time"] > failure["time"]]
    assert rerun[0]["step"] == back["step"] and rerun[0]["time"] <= back["time"]


def test_same_mesh_retry_reuses_the_compiled_step(pause_resume_run):
    (first,) = pause_resume_run.events_named("first_step_after_recovery")
    assert first["recompiled"] is False
    assert pause_resume_run.result.compiles <= 1


def test_every_step_loss_is_bitwise_identical_to_the_uninterrupted_run(reference_run, pause_resume_run):
    ref, got = reference_run.last_by_step(), pause_resume_run.last_by_step()
    assert sorted(got) == list(range(STEPS))
    assert [got[s]["loss"] for s in range(STEPS)] == [ref[s]["loss"] for s in range(STEPS)]
    # Steps that ran twice (after the rewind) gave the same loss both times.
    for record in pause_resume_run.metrics:
        assert record["loss"] == ref[record["step"]]["loss"]
    assert len(pause_resume_run.metrics) == STEPS + KILL_STEP - (KILL_STEP // PERIOD) * PERIOD


def test_final_params_are_bitwise_identical(reference_run, pause_resume_run):
    for a, b in zip(_flat(reference_run.result.params), _flat(pause_resume_run.result.params), strict=True):
        assert a.tobytes() == b.tobytes()


def test_every_example_is_consumed_exactly_once(reference_run, pause_resume_run):
    batch = reference_run.cfg.global_batch
    for run in (reference_run, pause_resume_run):
        last = run.last_by_step()
        ids = [i for s in range(STEPS) for i in range(*last[s]["examples"])]
        assert ids == list(range(STEPS * batch))


def test_metric_records_follow_the_contract(pause_resume_run):
    for record in pause_resume_run.metrics:
        assert set(record) >= {"step", "loss", "lr", "step_time_s", "examples", "slices"}
        assert np.float32(float.fromhex(record["loss"])) == float.fromhex(record["loss"])
        first, end = record["examples"]
        assert end - first == pause_resume_run.cfg.global_batch
    for event in pause_resume_run.events:
        assert isinstance(event["time"], float) and "step" in event


def test_run_json_records_config_fingerprint_and_versions(reference_run):
    import json

    body = json.loads((reference_run.run_dir / "run.json").read_text())
    assert body["fingerprint"] == reference_run.cfg.fingerprint()
    assert body["config"]["steps"] == STEPS and body["versions"]["jax"]
    assert body["model"]["params"] > 0


def test_checkpoints_are_numbered_step_dirs_each_with_a_digest(reference_run):
    ckpt = reference_run.run_dir / "checkpoints"
    steps = sorted(int(p.name) for p in ckpt.iterdir() if p.is_dir())
    assert steps == [8, 12, 16]  # max_to_keep=3
    assert all((ckpt / str(s) / "elxpk_digest.json").is_file() for s in steps)
    committed = [e["step"] for e in reference_run.events_named("checkpoint_committed")]
    assert committed == [4, 8, 12, 16]
