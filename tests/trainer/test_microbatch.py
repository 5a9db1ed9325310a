"""Gradient accumulation (--gradient-accumulation-steps, issue 48; trainer/core/microbatch.py).

- The step really runs the microbatches one after the other (a scan of the count), and each holds every
  device's share of the batch.
- With the deterministic reduction the count is part of what fixes the bits, as --global-batch is: at the same
  count the step is bitwise equal on every subset of the job's slices, and a whole run through a resize and a
  scale-up is bitwise equal to the uninterrupted one, every example once.
- Counts 1, 2 and 4 compute the same step up to float rounding: a sum inside one matmul cannot be cut in two
  without changing how it rounds (docs/trainer.md says what bitwise across counts would cost).
- The memory estimate holds one microbatch's activations and one more gradient, and a batch that does not cut
  is refused naming the flag, from `python -m trainer` as a user runs it.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import numpy as np
import pytest

from tests.support.runs import STEPS, run_trainer, tiny_config
from tests.trainer.test_bitwise_resize import _assert_bitwise_run, _same_bits, _steps_on


def test_the_split_gives_every_device_its_share_of_every_microbatch():
    from trainer.core import microbatch

    rows = np.arange(8)
    pieces = np.asarray(microbatch.split(rows, 2))
    assert pieces.tolist() == [[0, 2, 4, 6], [1, 3, 5, 7]]
    # Two devices hold rows 0-3 and 4-7: each microbatch has two rows on each.
    assert all(sorted((p // 4).tolist()) == [0, 0, 1, 1] for p in pieces)
    assert np.asarray(microbatch.example_index(1, 2, 4)).tolist() == pieces[1].tolist()


@pytest.mark.parametrize("reduction", ["on", "off"])
def test_the_step_scans_over_the_microbatches(tmp_path, reduction):
    import jax

    from trainer.core import mesh as meshlib
    from trainer.core import step as steplib
    from trainer.core.state import state_target

    cfg = tiny_config(tmp_path, gradient_accumulation_steps=4, global_batch=16, deterministic_reduction=reduction)
    mesh = meshlib.build_mesh({0: jax.devices()[:2], 1: jax.devices()[2:4]}, [0, 1])
    tokens = jax.ShapeDtypeStruct((16, cfg.seq_len + 1), np.int32, sharding=meshlib.batch_sharded(mesh))
    jaxpr = str(jax.make_jaxpr(steplib.step_fn(cfg, mesh))(state_target(cfg, mesh), tokens, np.int32(0)))
    assert "length=4" in jaxpr and "scan" in jaxpr
    one = dataclasses.replace(cfg, gradient_accumulation_steps=1)
    assert "length=4" not in str(jax.make_jaxpr(steplib.step_fn(one, mesh))(state_target(one, mesh), tokens,
                                                                              np.int32(0)))


@pytest.mark.slow
def test_at_one_count_the_step_is_bitwise_equal_on_every_subset_of_slices(tmp_path):
    """2 x 2 (FSDP): the microbatches are cut inside the per-shard program, so a survivor carrying two shards
    runs each shard's microbatches as its full-width slice did (3 x 1 and 4 x 1 are test_bitwise_resize's)."""
    cfg = tiny_config(tmp_path, global_batch=16, gradient_accumulation_steps=2)
    full_losses, full_params = _steps_on(cfg, [0, 1])
    for active in ([0], [1]):
        losses, params = _steps_on(cfg, active)
        assert losses == full_losses, active
        assert _same_bits(params, full_params), active


@pytest.mark.slow
def test_a_resize_and_scale_up_with_microbatches_is_bitwise(tmp_path):
    reference = run_trainer(tmp_path / "reference", gradient_accumulation_steps=2)
    run = run_trainer(tmp_path / "resize", faults=["1@6+10"], elastic_min_slice_count=1, gradient_accumulation_steps=2)
    assert {tuple(r["slices"]) for r in run.metrics} == {(0, 1), (0,)}
    _assert_bitwise_run(run, reference)
    assert len(run.metrics) >= STEPS


@pytest.mark.parametrize("reduction", ["on", "off"])
def test_counts_1_2_and_4_compute_the_same_step_up_to_rounding(tmp_path, reduction):
    runs = {}
    for count in (1, 2, 4):
        cfg = tiny_config(tmp_path, gradient_accumulation_steps=count, global_batch=16, dropout=0.0,
                          deterministic_reduction=reduction)
        runs[count] = _steps_on(cfg, [0, 1], steps=3)
    losses, params = runs[1]
    for count in (2, 4):
        got_losses, got_params = runs[count]
        assert np.allclose([float.fromhex(x) for x in got_losses], [float.fromhex(x) for x in losses], rtol=1e-6)
        for a, b in zip(got_params, params, strict=True):
            assert np.allclose(a, b, rtol=1e-4, atol=1e-6)


def test_the_estimate_holds_one_microbatch_and_one_more_gradient(tmp_path):
    from trainer.core.memory import _sharded_bytes, estimate
    from trainer.core.state import abstract_state

    cfg = tiny_config(tmp_path, global_batch=16)
    target = abstract_state(cfg)
    one = estimate(cfg, target, 2, 4)
    four = estimate(dataclasses.replace(cfg, gradient_accumulation_steps=4), target, 2, 4)
    assert four.gradients - one.gradients == _sharded_bytes(target["params"], 2) > 0  # the running sum
    assert four.activations < one.activations / 2


def test_a_batch_that_does_not_cut_is_refused_naming_the_flag(repo_root, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "trainer", "--print-config", "--run-dir", str(tmp_path / "run"),
                           "--global-batch", "8", "--num-slices", "2", "--devices-per-slice", "2",
                           "--gradient-accumulation-steps", "3"],
                          cwd=repo_root, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert "Traceback" not in proc.stderr
    assert any("--global-batch 8: must divide evenly over 2 slice(s) x 2 devices x --gradient-accumulation-steps 3"
               in line for line in lines), proc.stderr
    assert not (tmp_path / "run").exists()
