"""Rematerialisation policies by name (--remat-policy), MaxText's names where they mean the same.

Each transformer block runs under jax.checkpoint; the policy says which of its named intermediates
(jax.ad_checkpoint.checkpoint_name in trainer.core.model) the backward pass keeps, everything else is
recomputed from the block's input. From the most kept to the least:

- none: no jax.checkpoint at all, every intermediate is kept (the fastest step, the most memory);
- minimal_with_context: the outputs of every matmul and the attention's (context; with splash also its
  softmax statistics): only the norms and the activation function are recomputed;
- minimal: the outputs of every matmul (qkv_proj, out_proj, mlpwi, mlpwo): the attention is recomputed too
  (on a v5e at 350m, splash's forward pass again is about 9% of the step);
- save_dot_except_mlp: the attention's projections (qkv_proj, out_proj), the MLP is recomputed;
- save_qkv_proj: the query/key/value projection only;
- full: nothing but the block's input (MaxText's full): a whole forward pass again in the backward;
- auto (the default): the first of these, from none down, whose memory estimate fits the device
  (trainer.core.memory.choose_remat); resolved once per run and recorded in run.json.

Remat changes what is recomputed, not what is computed: the loss and gradients are the same bits
(tests/trainer/test_remat.py), so the policy is not part of the checkpoint fingerprint and a resume may
change it. The per-token values each policy keeps are declared here too, for the memory estimate.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# Name -> the checkpoint_names the backward pass keeps (None: no jax.checkpoint).
SAVED: dict[str, tuple[str, ...] | None] = {
    "none": None,
    "minimal_with_context": ("qkv_proj", "context", "out_proj", "mlpwi", "mlpwo"),
    "minimal": ("qkv_proj", "out_proj", "mlpwi", "mlpwo"),
    "save_dot_except_mlp": ("qkv_proj", "out_proj"),
    "save_qkv_proj": ("qkv_proj",),
    "full": (),
}


def kept_values_per_token(policy: str, d_model: int, d_ff: int, *, fused: bool = False) -> int:
    """Values of the compute dtype one block keeps per token for its backward pass under `policy`: the
    block's input plus its saved names (none keeps everything: norms, q/k/v, the attention output, its
    projection, the MLP's input, activation and output). `fused`: as XLA's TPU backend keeps them, fusing the
    norms and the residual adds into their neighbours (compiled for a v5e with the heads-first attention,
    issue 48: 125m at 16 examples and 350m at 8 under none keep 3.8 and 2.4 D + 2 F; 3 D + 2 F puts the
    estimate within 5% of XLA's figure for both)."""
    # mlpwo adds nothing: its sum with the residual is the next block's input, which is kept anyway.
    width = {"qkv_proj": 3 * d_model, "context": d_model, "out_proj": d_model, "mlpwi": d_ff, "mlpwo": 0}
    saved = SAVED[policy]
    if saved is None and fused:
        return 3 * d_model + 2 * d_ff
    if saved is None:  # input, norms (2), q/k/v (3), attention output, mid-block residual; MLP in, activation
        return 9 * d_model + 2 * d_ff
    return d_model + sum(width[name] for name in saved)


def wrap(block_fn: Callable[..., Any], policy: str) -> Callable[..., Any]:
    """`block_fn` under jax.checkpoint with the named policy (unchanged for none)."""
    import jax

    saved = SAVED["none" if policy == "auto" else policy]  # auto unresolved: what it is where memory is ample
    if saved is None:
        return block_fn
    return jax.checkpoint(block_fn, policy=jax.checkpoint_policies.save_only_these_names(*saved))
