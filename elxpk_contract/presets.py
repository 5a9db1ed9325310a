"""Model presets for `--model`: Llama-like shapes, declared once. Standard library only.

Precedence, for each shape setting (seq_len, vocab_size, d_model, n_layers, n_heads, d_ff): a flag or
ELXPK_* env var wins, then the `--model` preset, then the default preset `tiny` (the trainer's historical
defaults). `TrainerConfig` resolves it in `__post_init__`, so `--print-config`, run.json and the
checkpoint fingerprint all show the resolved numbers.

The MLP here is GELU with two matrices where Llama uses SwiGLU with three, so `d_ff` is Llama's hidden
width x 3/2 rounded to a multiple of 128: the same MLP parameter count. The vocabulary is Llama 2's 32000
tokens.

Every preset from 125m up has heads 128 wide (issue 48). A TPU's matrix unit works on 128 x 128 tiles, and
splash attention pads a 64-wide head to 128, so with 64-wide heads half of attention's work is padding. On one
TPU v5e at seq 2048, through `python -m trainer`, only `--n-heads` changed (b4ee612): 125m at 16 examples
went from 37.1% MFU with 12 heads of 64 to 49.6% with 6 heads of 128; 350m at 8 examples from 36.9% with 16
heads of 64 to 50.1% with 8 of 128 (bench/results/). MaxText's guide asks for head widths that are multiples
of 128 on TPUs too. The parameter count is the same (the projections are d_model x d_model whatever the
split). A checkpoint of a preset's earlier shape (EARLIER_DEFAULTS) is refused by its fingerprint with a line
naming the flag that keeps that shape.
"""

from __future__ import annotations

SHAPE_SETTINGS = ("seq_len", "vocab_size", "d_model", "n_layers", "n_heads", "d_ff")
DEFAULT_MODEL = "tiny"

MODEL_PRESETS: dict[str, dict[str, int]] = {
    # ~0.4M params: `elxpk local run`'s model (elxpk/local/options.py), the docs' laptop examples.
    "micro": {"seq_len": 32, "vocab_size": 256, "d_model": 128, "n_layers": 2, "n_heads": 4, "d_ff": 512},
    # ~3.3M params: the default, fast on CPU.
    "tiny": {"seq_len": 64, "vocab_size": 512, "d_model": 256, "n_layers": 4, "n_heads": 4, "d_ff": 1024},
    # ~0.11B (GPT-3 Small / OPT-125m widths, with 6 heads of 128 where they have 12 of 64).
    "125m": {"seq_len": 2048, "vocab_size": 32000, "d_model": 768, "n_layers": 12, "n_heads": 6, "d_ff": 3072},
    # ~0.34B (GPT-3 Medium widths, with 8 heads of 128 where they have 16 of 64).
    "350m": {"seq_len": 2048, "vocab_size": 32000, "d_model": 1024, "n_layers": 24, "n_heads": 8, "d_ff": 4096},
    # ~0.88B (TinyLlama-like width, 16 layers): the issue-10 benchmark shape at seq 2048.
    "1b": {"seq_len": 2048, "vocab_size": 32000, "d_model": 2048, "n_layers": 16, "n_heads": 16, "d_ff": 8192},
    # ~6.6B (Llama 2 7B: d 4096, 32 layers, 32 heads; SwiGLU 11008 -> GELU 16384).
    "7b": {"seq_len": 2048, "vocab_size": 32000, "d_model": 4096, "n_layers": 32, "n_heads": 32, "d_ff": 16384},
}


# Defaults before a change, newest last: (what it was, the preset it applies to or None for every model, the
# settings that keep it). A checkpoint written under one of them (or under all that apply, together) is
# refused by its fingerprint, and the refusal names the flags that keep it (trainer.ckpt.checkpoint).
EARLIER_DEFAULTS: tuple[tuple[str, str | None, dict[str, int | str]], ...] = (
    ("12 heads of 64, before issue 48", "125m", {"n_heads": 12}),
    ("16 heads of 64, before issue 48", "350m", {"n_heads": 16}),
    ("logits leaving their matmul in float32, before issue 48", None, {"logits_dtype": "float32"}),
)


def preset_value(model: str, name: str) -> int:
    """The preset's value of shape setting `name` (unknown models fall back to the default preset; the
    settings table refuses them with a one-line message)."""
    return MODEL_PRESETS.get(model, MODEL_PRESETS[DEFAULT_MODEL])[name]
