"""Mixed precision (--compute-dtype): float32 master state, bfloat16 matmuls, float32 loss (issue 10)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from elxpk_contract.errors import UsageError
from tests.support.runs import STEPS, run_trainer, tiny_config
from trainer.core.attention import resolve as resolve_attention
from trainer.core.precision import resolve_compute_dtype
from trainer.data.tokens import write_npy


def test_auto_is_bfloat16_on_gpu_and_tpu_and_float32_on_cpu():
    assert resolve_compute_dtype("auto", "tpu") == resolve_compute_dtype("auto", "gpu") == "bfloat16"
    assert resolve_compute_dtype("auto", "cpu") == "float32"
    assert resolve_compute_dtype("float32", "tpu") == "float32"
    assert resolve_compute_dtype("bfloat16", "cpu") == "bfloat16"
    assert resolve_compute_dtype("auto") == "float32"  # these tests run on CPU


def test_auto_attention_is_splash_on_tpu_cudnn_on_gpu_in_bfloat16_and_xla_elsewhere():
    assert resolve_attention("auto", "bfloat16", 2048, 128, "gpu") == "cudnn"
    assert resolve_attention("auto", "bfloat16", 2048, 128, "cpu") == "xla"
    assert resolve_attention("auto", "bfloat16", 2048, 64, "tpu") == "splash"  # MaxText's autoselected
    assert resolve_attention("auto", "float32", 2048, 64, "tpu") == "splash"
    assert resolve_attention("auto", "bfloat16", 64, 64, "tpu") == "xla"  # under 128 tokens
    assert resolve_attention("auto", "bfloat16", 2048, 96, "tpu") == "xla"  # a head width the kernel lacks
    assert resolve_attention("auto", "float32", 2048, 128, "gpu") == "xla"
    assert resolve_attention("auto", "bfloat16", 2048, 256, "gpu") == "xla"
    assert resolve_attention("xla", "bfloat16", 2048, 128, "tpu") == "xla"  # an explicit choice stands


def test_the_loss_and_gradients_are_float32_when_the_matmuls_are_bfloat16():
    import jax
    import jax.numpy as jnp

    from trainer.core.model import ModelShape, init_params, loss_fn

    shape32 = ModelShape(64, 16, 32, 2, 2, 64, 0.0)
    shape16 = ModelShape(64, 16, 32, 2, 2, 64, 0.0, compute_dtype="bfloat16")
    params = jax.tree.map(jnp.asarray, init_params(shape32, np.random.default_rng(0)))
    tokens = jnp.asarray(np.random.default_rng(1).integers(0, 64, (4, 17)), jnp.int32)
    # Jitted, as the trainer runs it: one compile each, not one per op (about 225 eagerly, 12 CPU s cold).
    loss16, grads16 = jax.jit(jax.value_and_grad(loss_fn), static_argnums=2)(params, tokens, shape16, None)
    loss32 = jax.jit(loss_fn, static_argnums=2)(params, tokens, shape32, None)
    assert loss16.dtype == jnp.float32
    assert {g.dtype for g in jax.tree.leaves(grads16)} == {jnp.dtype(jnp.float32)}
    assert float(loss16) != float(loss32)  # the cast happened
    assert abs(float(loss16) - float(loss32)) < 0.05 * float(loss32)  # and bf16 only rounds
    hlo = jax.jit(loss_fn, static_argnums=2).lower(params, tokens, shape16, None).as_text()
    assert "bf16" in hlo


@pytest.fixture(scope="module")
def bf16_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("bf16")
    tokens = (np.arange(STEPS * 8 * 16 + 1) * 3) % 64  # a count mod the vocabulary: learnable
    write_npy(str(root / "count.npy"), tokens)
    return run_trainer(root / "run", compute_dtype="bfloat16", data=str(root / "count.npy"), dropout=0.0,
                       learning_rate=1e-2)


def test_bf16_runs_train_with_finite_falling_losses(bf16_run):
    losses = [float.fromhex(bf16_run.last_by_step()[s]["loss"]) for s in range(STEPS)]
    assert all(np.isfinite(losses))
    assert np.mean(losses[-4:]) < 0.5 * np.mean(losses[:4])
    import jax

    # Master params stay float32 (so does the optimizer state restored into the same abstract tree).
    assert {leaf.dtype for leaf in jax.tree.leaves(bf16_run.result.params)} == {np.dtype(np.float32)}


def test_run_json_records_the_resolved_compute_dtype(bf16_run, reference_run):
    info = json.loads((bf16_run.run_dir / "run.json").read_text())
    assert info["config"]["compute_dtype"] == "bfloat16"
    assert info["model"]["compute_dtype"] == "bfloat16" and info["model"]["attention"] == "xla"
    assert info["fingerprint_fields"]["compute_dtype"] == "bfloat16"
    ref = json.loads((reference_run.run_dir / "run.json").read_text())
    assert ref["config"]["compute_dtype"] == "float32"  # auto, resolved on CPU
    assert ref["model"]["compute_dtype"] == "float32"
    # float32 is the historical checkpoint format: no key, the same fingerprint as before the setting.
    assert "compute_dtype" not in ref["fingerprint_fields"]
    assert ref["fingerprint"] == reference_run.cfg.fingerprint()


def test_a_bf16_checkpoint_refuses_to_resume_in_float32(bf16_run, tmp_path):
    shutil.copytree(bf16_run.run_dir / "checkpoints", tmp_path / "checkpoints")
    data = str(bf16_run.run_dir.parent / "count.npy")
    settings = dict(data=data, dropout=0.0, learning_rate=1e-2)
    with pytest.raises(UsageError, match="written by a different configuration"):
        run_trainer(tmp_path, compute_dtype="float32", **settings)
    fp32 = tiny_config(tmp_path, compute_dtype="float32", **settings)
    assert fp32.fingerprint() != tiny_config(tmp_path, compute_dtype="bfloat16", **settings).fingerprint()


def test_an_unknown_compute_dtype_is_a_one_line_error():
    with pytest.raises(UsageError) as err:
        tiny_config("unused", compute_dtype="float16")
    assert list(err.value.messages) == ["--compute-dtype 'float16': use one of auto, float32, bfloat16"]


@pytest.mark.parametrize(("logits", "out"), [("auto", "bfloat16"), ("float32", "float32")])
def test_the_logits_leave_their_matmul_in_the_dtype_asked_for(logits, out):
    """--logits-dtype (issue 48): auto rounds the logits to the compute dtype as they leave the matmul, float32
    keeps them (MaxText's logits_dot_in_fp32); the log-softmax and the loss are float32 either way."""
    import jax
    import jax.numpy as jnp

    from trainer.core.model import ModelShape, init_params, loss_fn

    shape = ModelShape(80, 16, 32, 1, 2, 64, 0.0, compute_dtype="bfloat16", logits_dtype=logits)  # vocabulary 80
    params = jax.tree.map(jnp.asarray, init_params(shape, np.random.default_rng(0)))
    tokens = jnp.zeros((2, 17), jnp.int32)
    jaxpr = str(jax.make_jaxpr(lambda p: loss_fn(p, tokens, shape, None))(params))
    logits = [line.split("=")[0].split(":")[1].strip() for line in jaxpr.splitlines()
              if "= dot_general[" in line and line.split("=")[0].endswith("[2,16,80] ")]
    assert logits == [{"bfloat16": "bf16", "float32": "f32"}[out] + "[2,16,80]"], jaxpr
    assert loss_fn(params, tokens, shape, None).dtype == jnp.float32
