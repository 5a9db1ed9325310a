"""Model presets (--model) and their precedence; attention through jax.nn.dot_product_attention (issue 10)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from elxpk_contract.command_line import config_from_args
from elxpk_contract.errors import UsageError
from elxpk_contract.presets import MODEL_PRESETS, SHAPE_SETTINGS
from elxpk_contract.settings import TrainerConfig, default


def _shape(cfg: TrainerConfig) -> dict:
    return {name: getattr(cfg, name) for name in SHAPE_SETTINGS}


def test_each_preset_resolves_to_its_shape():
    for name, shape in MODEL_PRESETS.items():
        assert _shape(config_from_args(["--model", name])) == shape
    assert _shape(TrainerConfig()) == MODEL_PRESETS["tiny"]  # the default preset
    assert default("model") == "tiny" and default("d_model") is None  # None: "from the preset"


def test_flags_and_env_override_the_preset_field_by_field():
    cfg = config_from_args(["--model", "1b", "--d-model", "1024"], {"ELXPK_N_LAYERS": "3"})
    assert (cfg.d_model, cfg.n_layers) == (1024, 3)
    assert {k: v for k, v in _shape(cfg).items() if k not in ("d_model", "n_layers")} == \
        {k: v for k, v in MODEL_PRESETS["1b"].items() if k not in ("d_model", "n_layers")}
    env_model = config_from_args(["--n-layers", "2"], {"ELXPK_MODEL": "125m", "ELXPK_N_LAYERS": "5"})
    assert (env_model.model, env_model.n_layers, env_model.d_model) == ("125m", 2, 768)  # flag over env
    # A value equal to the tiny default is still an explicit choice, not "unset".
    assert config_from_args(["--model", "7b", "--seq-len", "64"]).seq_len == 64
    assert TrainerConfig(model="350m", d_ff=512).d_ff == 512  # constructing the config follows the same rule


def test_print_config_shows_the_resolved_values(repo_root):
    env = {k: v for k, v in os.environ.items() if not k.startswith("ELXPK_")}
    proc = subprocess.run([sys.executable, "-m", "trainer", "--print-config", "--model", "350m", "--n-heads", "8"],
                          cwd=repo_root, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    printed = json.loads(proc.stdout)
    assert printed["model"] == "350m"
    assert _shape(TrainerConfig(**{k: printed[k] for k in SHAPE_SETTINGS})) == {**MODEL_PRESETS["350m"], "n_heads": 8}
    assert "dataset_identity" in printed and "--dataset-identity" not in proc.stderr


def test_presets_are_consistent_llama_like_shapes():
    from trainer.core.model import ModelShape

    for name, shape in MODEL_PRESETS.items():
        assert shape["d_model"] % shape["n_heads"] == 0, name
        cfg = TrainerConfig(model=name)
        assert cfg.problems() == []
        if name not in ("micro", "tiny"):  # the CPU shapes
            assert shape["d_model"] // shape["n_heads"] in (64, 128) and shape["vocab_size"] == 32000
            params = ModelShape.from_config(cfg).param_count()
            nominal = {"125m": 125e6, "350m": 350e6, "1b": 1e9, "7b": 7e9}[name]
            assert 0.75 * nominal < params < 1.1 * nominal, (name, params)


def test_an_unknown_model_and_bad_overrides_are_one_line_errors():
    with pytest.raises(UsageError) as err:
        config_from_args(["--model", "13b"])
    assert list(err.value.messages) == ["--model '13b': use one of micro, tiny, 125m, 350m, 1b, 7b"]
    with pytest.raises(UsageError) as err:
        config_from_args(["--model", "1b", "--n-heads", "3", "--d-model", "0"])
    # Every problem at once: the refused --d-model leaves the preset's width for the cross-field check.
    assert list(err.value.messages) == ["--d-model 0: must be at least 1", "--n-heads 3: must divide --d-model 2048"]
    with pytest.raises(UsageError) as err:
        config_from_args(["--model", "1b", "--n-heads", "3"])
    assert list(err.value.messages) == ["--n-heads 3: must divide --d-model 2048"]


def test_attention_is_causal_and_matches_the_explicit_softmax():
    import jax
    import jax.numpy as jnp

    from trainer.core.model import ModelShape, _attention, init_params

    shape = ModelShape(64, 16, 32, 1, 4, 64, 0.0)
    block = jax.tree.map(jnp.asarray, init_params(shape, np.random.default_rng(0))["blocks"][0])
    x = jnp.asarray(np.random.default_rng(1).standard_normal((2, 16, 32)), jnp.float32)
    out = _attention(x, block, shape)
    # The textbook computation: softmax(QK^T / sqrt(k) + causal mask) V.
    q, k, v = (t.reshape(2, 16, 4, 8) for t in jnp.split(x @ block["wqkv_Dx3D"], 3, axis=-1))
    logits = jnp.einsum("bqhk,bshk->bhqs", q, k) / jnp.sqrt(8.0)
    weights = jax.nn.softmax(jnp.where(jnp.tril(jnp.ones((16, 16), bool)), logits, -jnp.inf), axis=-1)
    expected = jnp.einsum("bhqs,bshk->bqhk", weights, v).reshape(2, 16, 32) @ block["wo_DxD"]
    np.testing.assert_allclose(np.asarray(out), np.asarray(expected), rtol=1e-5, atol=1e-6)
    # Changing the last position changes no earlier output.
    changed = _attention(x.at[:, -1].add(1.0), block, shape)
    np.testing.assert_array_equal(np.asarray(changed[:, :-1]), np.asarray(out[:, :-1]))


def test_the_dataset_identity_is_resolved_by_the_trainer_not_set_by_anyone():
    from elxpk.local.options import _model_overrides

    with pytest.raises(UsageError, match="unrecognized arguments: --dataset-identity"):
        config_from_args(["--dataset-identity", "npy:forged"])
    assert config_from_args([], {"ELXPK_DATASET_IDENTITY": "npy:forged"}).dataset_identity == "synthetic-v1"
    model: dict = {}
    assert _model_overrides(("--dataset-identity=npy:forged",), model) and model == {}


def test_model_flops_count_matmuls_with_causal_attention_at_half():
    """The one FLOP formula (run.json, bench_scale's MFU): 6 N per token plus QK^T and AV at half the
    square, for the `1b` preset worked out by hand."""
    from trainer.core.model import ModelShape

    shape = ModelShape.from_config(TrainerConfig(model="1b", compute_dtype="float32"))
    d, f, layers, length, vocab = 2048, 8192, 16, 2048, 32000
    n = layers * (4 * d * d + 2 * d * f) + vocab * d
    assert shape.matmul_params() == n == 870_842_368
    full_square = 3 * length * 2 * layers * 2 * length * d  # QK^T and AV over every (query, key) pair
    assert shape.flops_per_example() == length * (6 * n + 6 * layers * d * length) == 6 * length * n + full_square / 2


def test_each_presets_comment_states_its_parameter_count():
    """The `# ~3.3M` comment above each preset is what param_count() gives (to the digits written)."""
    import re
    from pathlib import Path

    from trainer.core.model import ModelShape

    source = (Path(__file__).parents[2] / "elxpk_contract" / "presets.py").read_text(encoding="utf-8")
    stated = dict((name, (float(num), unit)) for num, unit, name in
                  re.findall(r"# ~(\d+(?:\.\d+)?)([MB])\b.*\n\s*\"([\w.]+)\":", source))
    assert set(stated) == set(MODEL_PRESETS)
    for name, (num, unit) in stated.items():
        params = ModelShape.from_config(TrainerConfig(model=name)).param_count() / (1e6 if unit == "M" else 1e9)
        digits = len(str(num).split(".")[1]) if "." in str(num) else 0
        assert round(params, digits) == num, (name, params)


@pytest.mark.parametrize(("model", "compute", "earlier", "flags"), [
    ("125m", "float32", {"n_heads": 12}, "--n-heads 12"),
    ("350m", "float32", {"n_heads": 16}, "--n-heads 16"),
    ("1b", "bfloat16", {"logits_dtype": "float32"}, "--logits-dtype float32"),
    ("125m", "bfloat16", {"n_heads": 12, "logits_dtype": "float32"}, "--n-heads 12 --logits-dtype float32"),
])
def test_a_checkpoint_of_an_earlier_default_is_refused_naming_the_flags_that_keep_it(model, compute, earlier,
                                                                                    flags):
    """Issue 48 changed the presets' heads (64 -> 128 wide) and the logits' dtype: a checkpoint written before
    is refused by its fingerprint, with the flags that resume it."""
    import dataclasses

    from trainer.ckpt.checkpoint import _refuse_fingerprint

    cfg = TrainerConfig(model=model, compute_dtype=compute)
    old = dataclasses.replace(cfg, **earlier).fingerprint()
    assert old != cfg.fingerprint()
    with pytest.raises(UsageError) as refused:
        _refuse_fingerprint(cfg, "/ckpt", 30, {"fingerprint": old})
    line = str(refused.value)
    assert line.endswith(f"to resume it keep that with {flags}, or use a new --checkpoint-dir"), line
    assert "step 30 was written under an earlier default" in line
    with pytest.raises(UsageError, match="written by a different configuration"):  # anything else: the usual line
        _refuse_fingerprint(cfg, "/ckpt", 30, {"fingerprint": dataclasses.replace(cfg, seed=9).fingerprint()})
    # A shape the user chose is not swapped back: --n-heads 4 is not "the preset's earlier shape".
    if "n_heads" in earlier:
        chosen = dataclasses.replace(cfg, n_heads=4)
        with pytest.raises(UsageError, match="written by a different configuration"):
            _refuse_fingerprint(chosen, "/ckpt", 30, {"fingerprint": old})
