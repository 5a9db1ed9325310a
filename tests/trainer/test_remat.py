"""The chip's choices on the CPU (issue 42): remat policies, splash attention, the chunked loss, auto remat,
one-slice donation and donatable restored arrays."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from elxpk_contract.errors import UsageError
from elxpk_contract.settings import REMAT_POLICIES
from tests.support.runs import tiny_config


def _grads(shape, params, tokens, key):
    import jax

    from trainer.core.model import loss_fn

    return jax.jit(jax.value_and_grad(loss_fn), static_argnums=2)(params, tokens, shape, key)


@pytest.fixture(scope="module")
def small():
    """A model at splash's smallest shapes (128 tokens, head width 64), its parameters, a batch, a key."""
    import jax
    import jax.numpy as jnp

    from trainer.core.model import ModelShape, init_params

    shape = ModelShape(64, 128, 128, 2, 2, 256, 0.1)
    params = jax.tree.map(jnp.asarray, init_params(shape, np.random.default_rng(0)))
    tokens = jnp.asarray(np.random.default_rng(1).integers(0, 64, (4, 129)), jnp.int32)
    reference = _grads(shape, params, tokens, jax.random.PRNGKey(3))
    return shape, params, tokens, reference


def _leaves_equal(a, b) -> bool:
    import jax

    return all(np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b),
                                                                              strict=True))


@pytest.mark.parametrize("policy", [p for p in REMAT_POLICIES if p not in ("auto", "none")])
def test_every_remat_policy_gives_the_same_bits(small, policy):
    """Remat recomputes, it does not compute anything else: loss and gradients are bitwise those of none,
    which is why the policy is not in the checkpoint fingerprint."""
    import jax

    shape, params, tokens, (loss, grads) = small
    got_loss, got = _grads(dataclasses.replace(shape, remat_policy=policy), params, tokens, jax.random.PRNGKey(3))
    assert float(got_loss) == float(loss) and _leaves_equal(got, grads)


def test_each_block_runs_under_jax_checkpoint_with_its_policy(small):
    """none has no checkpoint; every other policy wraps each block once (what it keeps: tested on the chip,
    where XLA's figure follows it: docs/trainer.md "On a TPU"; the CPU's buffer assignment does not show it)."""
    import jax

    from trainer.core.model import loss_fn

    shape, params, tokens, _ = small

    def checkpoints(policy):
        jaxpr = jax.make_jaxpr(lambda p: loss_fn(p, tokens, dataclasses.replace(shape, remat_policy=policy), None))
        return str(jaxpr(params)).count("remat2[")

    assert checkpoints("none") == 0
    assert checkpoints("full") == checkpoints("minimal") == shape.n_layers


def test_splash_attention_matches_xla_attention(small):
    """The Pallas kernel (in Pallas's interpreter on the CPU) computes the same loss and gradients as XLA's
    attention, to float32 rounding."""
    import jax

    shape, params, tokens, (loss, grads) = small
    got_loss, got = _grads(dataclasses.replace(shape, attention="splash"), params, tokens, jax.random.PRNGKey(3))
    assert abs(float(got_loss) - float(loss)) < 1e-5
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(grads), strict=True):
        assert np.allclose(np.asarray(a), np.asarray(b), atol=1e-6, rtol=1e-4)


@pytest.mark.parametrize("chunked", [False, True])
@pytest.mark.parametrize(("compute", "logits"), [("float32", "float32"), ("bfloat16", "auto"), ("bfloat16", "float32")])
def test_the_loss_makes_the_gradient_jax_would(small, monkeypatch, chunked, compute, logits):
    """mean_nll makes its gradient in the forward pass (issue 48): it matches jax's own differentiation of the
    same loss, chunked or not, in each compute and logits dtype, and a cotangent other than 1 scales it."""
    import jax
    import jax.numpy as jnp

    import trainer.core.model as model

    if chunked:
        monkeypatch.setattr(model, "LOSS_CHUNK_TOKENS", 256)  # 2 examples of 128 tokens a chunk: 2 chunks
    rng = np.random.default_rng(5)
    dtype = jnp.dtype(compute)
    x = jnp.asarray(rng.standard_normal((4, 128, 32)), dtype)
    embed = jnp.asarray(0.1 * rng.standard_normal((64, 32)), jnp.float32)
    targets = jnp.asarray(rng.integers(0, 64, (4, 128)), jnp.int32)

    def reference(x, embed):
        out = dtype if logits == "auto" else jnp.float32
        logits_ = jnp.matmul(x, embed.astype(dtype).T, preferred_element_type=out).astype(jnp.float32)
        nll = -jnp.take_along_axis(jax.nn.log_softmax(logits_), targets[..., None], axis=-1)[..., 0]
        return model.sum_in_fixed_order(nll) / nll.size

    want, (want_dx, want_de) = jax.value_and_grad(reference, argnums=(0, 1))(x, embed)
    got, (got_dx, got_de) = jax.value_and_grad(lambda x, e: model.mean_nll(x, e, targets, logits),
                                               argnums=(0, 1))(x, embed)
    tolerance = 1e-6 if compute == "float32" else 2e-2
    # The same forward ops; in bfloat16, XLA may fold the logits' rounding differently inside the chunk loop.
    assert float(got) == float(want) if compute == "float32" else abs(float(got) - float(want)) < 1e-4 * float(want)
    assert np.allclose(np.asarray(got_dx, np.float32), np.asarray(want_dx, np.float32), rtol=tolerance,
                       atol=tolerance * float(jnp.max(jnp.abs(want_dx.astype(jnp.float32)))))
    assert np.allclose(got_de, want_de, rtol=tolerance, atol=tolerance * float(jnp.max(jnp.abs(want_de))))
    doubled = jax.grad(lambda x: 2.0 * model.mean_nll(x, embed, targets, logits))(x)
    assert np.array_equal(np.asarray(doubled, np.float32), 2 * np.asarray(got_dx, np.float32))


def test_the_chunked_loss_matches_the_whole_batch_loss(small, monkeypatch):
    import jax

    import trainer.core.model as model

    shape, params, tokens, (loss, grads) = small
    monkeypatch.setattr(model, "LOSS_CHUNK_TOKENS", 256)  # 2 examples of 128 tokens a chunk: 2 chunks
    assert model.loss_chunk_examples(4, 128) == 2
    got_loss, got = _grads(dataclasses.replace(shape, dropout=0.1), params, tokens, jax.random.PRNGKey(3))
    assert abs(float(got_loss) - float(loss)) < 1e-6
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(grads), strict=True):
        assert np.allclose(np.asarray(a), np.asarray(b), atol=1e-7, rtol=1e-5)


def test_auto_remat_takes_the_fastest_policy_whose_estimate_fits():
    import jax

    from trainer.core import mesh as meshlib
    from trainer.core import state as core_state
    from trainer.core.memory import AUTO_HEADROOM, choose_remat, estimate

    cfg = tiny_config("unused", num_slices=1, devices_per_slice=1, global_batch=8, seq_len=256, d_model=256,
                      n_layers=4, vocab_size=512)
    mesh = meshlib.build_mesh({0: jax.devices()[:1]}, [0])
    target = core_state.state_target(cfg, mesh)

    def need(policy):
        return estimate(dataclasses.replace(cfg, remat_policy=policy), target, 1, 1, donates=True).total

    assert need("none") > need("minimal_with_context") > need("minimal") > need("save_dot_except_mlp") > need("save_qkv_proj") > need("full")
    assert choose_remat(cfg, target, mesh, None, donates=True) == "none"  # no limit known
    assert choose_remat(cfg, target, mesh, int(need("none") / AUTO_HEADROOM) + 1, donates=True) == "none"
    assert choose_remat(cfg, target, mesh, int(need("none") / AUTO_HEADROOM) - 1, donates=True) == "minimal_with_context"
    assert choose_remat(cfg, target, mesh, int(need("full") / AUTO_HEADROOM) + 1, donates=True) == "full"
    assert choose_remat(cfg, target, mesh, 1, donates=True) == "full"  # nothing fits: the check refuses it
    explicit = dataclasses.replace(cfg, remat_policy="save_qkv_proj")
    assert choose_remat(explicit, target, mesh, 1, donates=True) == "save_qkv_proj"


def test_an_explicit_kernel_that_cannot_run_here_is_a_one_line_error():
    from trainer.core.precision import resolved

    with pytest.raises(UsageError, match="--attention cudnn: cuDNN runs only on a GPU"):
        resolved(tiny_config("unused", attention="cudnn"), on="cpu")
    with pytest.raises(UsageError, match=r"--attention splash: .*--seq-len a multiple of 128 \(got 16\)"):
        resolved(tiny_config("unused", attention="splash"), on="cpu")
    assert resolved(tiny_config("unused", seq_len=128, d_model=128, attention="splash"), on="cpu").attention == "splash"


def test_the_attention_kernel_is_in_the_fingerprint_unless_xla():
    base = tiny_config("unused", seq_len=128)
    assert "attention" not in base.fingerprint_fields()  # auto, not yet run: XLA's on the CPU
    assert dataclasses.replace(base, attention="xla").fingerprint() == base.fingerprint()
    assert dataclasses.replace(base, attention="splash").fingerprint_fields()["attention"] == "splash"
    assert dataclasses.replace(base, attention="splash").fingerprint() != base.fingerprint()
    assert dataclasses.replace(base, remat_policy="full").fingerprint() == base.fingerprint()


def test_restored_arrays_are_donatable_and_unchanged():
    """trainer.ckpt.checkpoint.donatable: every leaf re-made as an XLA buffer that a donating step consumes."""
    import jax
    import jax.numpy as jnp

    from trainer.ckpt.checkpoint import donatable

    tree = {"a": jnp.arange(8.0), "b": {"c": jnp.ones((4, 4), jnp.int32)}}
    expected = jax.tree.map(np.asarray, tree)
    out = donatable(tree)
    assert _leaves_equal(out, expected)
    step = jax.jit(lambda t: jax.tree.map(lambda x: x + 1, t), donate_argnums=0)
    step(out)
    assert all(leaf.is_deleted() for leaf in jax.tree.leaves(out))  # donated: consumed by the step


def test_a_refusal_names_the_remat_policy_and_the_batch():
    import jax

    from trainer.core import mesh as meshlib
    from trainer.core import state as core_state
    from trainer.core.memory import memory_record

    cfg = tiny_config("unused", num_slices=1, devices_per_slice=1, remat_policy="none")
    mesh = meshlib.build_mesh({0: jax.devices()[:1]}, [0])
    with pytest.raises(UsageError) as refused:
        memory_record(cfg, core_state.state_target(cfg, mesh), mesh, limit=1000, donates=True)
    (message,) = refused.value.messages
    assert "--global-batch 8 --remat-policy none:" in message
    assert "keep less for the backward pass (--remat-policy full), or use a smaller --global-batch" in message
