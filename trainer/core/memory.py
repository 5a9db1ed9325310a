"""Will the train step fit in device memory? Checked twice: an estimate before compiling, XLA's own figure after.

A step that cannot fit fails deep inside XLA with RESOURCE_EXHAUSTED after minutes of compiling and, in
an elastic run, looks like a failure to retry. So:
1. Before compiling, an estimate from the shapes refuses what is clearly hopeless: more than
   ESTIMATE_MARGIN times the device's memory. A usage error naming the model flags and the device.
2. After compiling, XLA's memory analysis of the executable (`compiled_bytes`) is exact: at full width a
   step over the limit is refused with the same kind of line before it runs (`compiled_refusal`); on a
   survivors' mesh the run waits for more slices instead (trainer.elastic.attempt).
The estimate only has to be fast and never wrong when it refuses; the margin is what it overshoots XLA's
figure by at most (tests/trainer/test_scale.py compiles FSDP and unsplit layouts, parameter-heavy and
logit-heavy models, with and without donation, and requires estimate / XLA between 0.6 and
ESTIMATE_MARGIN). Below the margin the step is compiled and XLA decides. On a TPU v5e the estimate is
within 5% of XLA's figure for 125m and 350m under none (issue 48, compiled for a v5e on the CPU).

Per device, in bytes (f32 = 4 bytes):
- state: each array's bytes divided by the slice's device count when FSDP splits it (trainer.core.sharding);
- the step's input state, kept alive beside its output where the step does not donate it (live recovery
  over several slices: a slice lost in the middle of a step leaves the last completed step's state on the
  survivors); nothing where it does (--recovery checkpoint, one slice, multi-controller);
- gradients and the optimizer's update temporaries: twice the per-device parameter bytes; once on a TPU
  with a donating step, where XLA updates the state in place (with more than two slices the deterministic
  reduction holds one partial sum per slice, which this undercounts: XLA's figure catches it);
- with --gradient-accumulation-steps above 1, one more parameter-sized array: the microbatches' running sum;
- activations kept for the backward pass, for the device's share of one microbatch (b = global_batch / all
  devices / microbatches): per layer, b*L*kept values of the compute dtype, `kept` the --remat-policy's
  (trainer.core.remat.kept_values_per_token: 9*D + 2*F with none, 3*D + 2*F as XLA's TPU backend fuses
  it, D for full), plus, under any policy
  but none, one layer's whole intermediates while its backward pass recomputes them; with XLA's attention
  also 2*b*H*L*L float32 per layer (the logits and weights; none with splash or cuDNN, which never store
  them); plus LOGIT_COPIES float32 [tokens, V] arrays for one loss chunk (trainer.core.model.mean_nll;
  1.3 on a TPU, where XLA fuses the softmax around the matmul);
- parameters made whole by FSDP: the step gathers every layer's float32 parameters at once, and XLA keeps
  them through the backward pass (its own memory analysis of the compiled step does not shrink with more
  devices per slice), so the whole parameter bytes wherever FSDP splits an array; nothing on one device.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import numpy as np

from elxpk_contract.errors import UsageError
from elxpk_contract.setting_rules import said
from trainer.core import remat
from trainer.core.sharding import fsdp_spec

_F32 = 4
# The most the estimate overshoots XLA's own figure in the calibration (tests/trainer/test_scale.py): above
# this multiple of the device the step surely cannot fit; below it, the compile's figure decides.
ESTIMATE_MARGIN = 1.35
# Float32 [tokens, V] arrays alive at once for one loss chunk (trainer.core.model.mean_nll): the logits, their
# log-softmax and the gradient made from them (3 on the CPU: tests/trainer/test_scale.py's logit-heavy cases
# are then within 3% of XLA's figure); XLA's TPU backend fuses most of them away (measured on a v5e: 1.3
# copies at 125m, 350m and 1b; docs/trainer.md "On a TPU").
LOGIT_COPIES = 3
TPU_LOGIT_COPIES = 1.3


@dataclass(frozen=True)
class MemoryEstimate:
    state: int
    kept_input: int  # the undonated input state (see the module docstring); 0 when the step donates it
    gradients: int
    activations: int
    gathered: int

    @property
    def total(self) -> int:
        return self.state + self.kept_input + self.gradients + self.activations + self.gathered


def _sharded_bytes(abstract: Any, data_size: int) -> int:
    total = 0
    for leaf in jax.tree.leaves(abstract):
        nbytes = int(np.prod(leaf.shape, dtype=np.int64)) * np.dtype(leaf.dtype).itemsize
        total += nbytes // data_size if fsdp_spec(tuple(leaf.shape), data_size) else nbytes
    return total


def estimate(cfg: Any, abstract_state: Any, devices_per_slice: int, total_devices: int, *,
             donates: bool = False, on: str | None = None) -> MemoryEstimate:
    """The per-device memory of one train step on a mesh of `total_devices` in slices of
    `devices_per_slice`; `donates`: the step gives its input state's buffers to its output; `on`: the
    platform the step runs on (default jax's; `--compile-only` plans for a TPU from a CPU host)."""
    from trainer.core.model import ModelShape, loss_chunk_examples

    shape = ModelShape.from_config(cfg)
    compute_bytes = 2 if shape.compute_dtype == "bfloat16" else _F32
    d, f, length, vocab = cfg.d_model, cfg.d_ff, cfg.seq_len, cfg.vocab_size
    count = getattr(cfg, "gradient_accumulation_steps", 1)
    b = max(1, -(-cfg.global_batch // (total_devices * count)))  # examples per device in one microbatch
    state = _sharded_bytes(abstract_state, devices_per_slice)
    params = _sharded_bytes(abstract_state["params"], devices_per_slice)
    scores = 0 if shape.attention != "xla" else 2 * b * cfg.n_heads * length * length * _F32
    fused = (on or jax.default_backend()) == "tpu"
    heads_first = fused and shape.attention == "splash"  # measured so (trainer.core.remat)
    whole_layer = b * length * remat.kept_values_per_token("none", d, f, fused=heads_first) * compute_bytes + scores
    if shape.remat_policy in ("none", "auto"):
        layers = cfg.n_layers * whole_layer
    else:  # what each block keeps, plus one block's intermediates while its backward pass recomputes them
        kept = b * length * remat.kept_values_per_token(shape.remat_policy, d, f) * compute_bytes
        layers = cfg.n_layers * kept + whole_layer
    copies = TPU_LOGIT_COPIES if fused else LOGIT_COPIES
    chunk_tokens = loss_chunk_examples(b, length) * length
    logits = int(copies * chunk_tokens * vocab * _F32)
    if shape.logits_dtype == "auto" and compute_bytes < _F32:  # the logits themselves in the compute dtype
        logits -= chunk_tokens * vocab * (_F32 - compute_bytes)
    whole_params = _sharded_bytes(abstract_state["params"], 1)
    gathered = whole_params if params < whole_params else 0
    # XLA's TPU backend updates a donated state in place, the gradient the only parameter-sized temporary.
    gradients = params if fused and donates else 2 * params
    if count > 1:  # the microbatches' running sum (trainer.core.microbatch), beside each one's own gradient
        gradients += params
    return MemoryEstimate(state, 0 if donates else state, gradients, layers + logits, gathered)


# What `--remat-policy auto` tries, from the fastest step to the least memory.
AUTO_ORDER = ("none", "minimal_with_context", "minimal", "save_dot_except_mlp", "save_qkv_proj", "full")
# auto takes a policy whose estimate is within this share of the device: the estimate is within a few per
# cent of XLA's figure on a v5e, and a policy XLA then refuses would cost the run its start.
AUTO_HEADROOM = 0.9


def choose_remat(cfg: Any, target: Any, mesh: Any, limit: int | None, *, donates: bool) -> str:
    """The remat policy for `cfg`: its own unless auto; for auto, the first of AUTO_ORDER whose estimate is
    within AUTO_HEADROOM of `limit` (none where there is no limit; full where nothing fits, which the
    memory check then refuses)."""

    if cfg.remat_policy != "auto":
        return cfg.remat_policy
    if limit is None:
        return "none"
    for policy in AUTO_ORDER:
        need = estimate(dataclasses.replace(cfg, remat_policy=policy), target, mesh.shape["data"], mesh.devices.size,
                        donates=donates, on=mesh.devices.flat[0].platform)
        if need.total <= AUTO_HEADROOM * limit:
            return policy
    return "full"


def with_remat_resolved(cfg: Any, target: Any, mesh: Any, limit: int | None, *, donates: bool) -> Any:
    """`cfg` with its --remat-policy as choose_remat picks it: what the run and --compile-only both compile."""
    return dataclasses.replace(cfg, remat_policy=choose_remat(cfg, target, mesh, limit, donates=donates))


def device_limit(device: Any) -> int | None:
    """The bytes the device's allocator may use (its `bytes_limit`); for a CPU device, which reports none,
    its share of the host memory available now; None where neither is known."""
    try:
        stats = device.memory_stats()
    except Exception:  # noqa: BLE001 - a backend without the call (or one that fails) has no limit to check
        stats = None
    if stats and isinstance(stats.get("bytes_limit"), int):
        return int(stats["bytes_limit"])
    return _host_share() if getattr(device, "platform", "") == "cpu" else None


def _host_share() -> int | None:
    """A CPU device allocates from host memory, and all of this process's CPU devices from the same RAM:
    MemAvailable (/proc/meminfo) split over them. Without it (not Linux) there is no limit to check. A model
    too big for the machine is then a one-line refusal instead of an allocation failure or the OOM killer."""
    try:
        text = Path("/proc/meminfo").read_text(encoding="ascii")
    except OSError:
        return None
    match = re.search(r"^MemAvailable:\s+([0-9]{1,19}) kB$", text, re.MULTILINE)
    if match is None:
        return None
    return int(match.group(1)) * 1024 // max(1, len(jax.local_devices(backend="cpu")))


def state_layout(target: Any) -> tuple[int, int]:
    """(state bytes, the most state bytes any one device holds) of an abstract state placed on a mesh
    (ShapeDtypeStructs with shardings): exactly what the arrays' addressable shards will be."""
    total = 0
    by_device: dict[Any, int] = {}
    for leaf in jax.tree.leaves(target):
        itemsize = np.dtype(leaf.dtype).itemsize
        total += int(np.prod(leaf.shape, dtype=np.int64)) * itemsize
        for device, index in leaf.sharding.devices_indices_map(tuple(leaf.shape)).items():
            shard = [len(range(*i.indices(n))) for i, n in zip(index, leaf.shape, strict=True)]
            by_device[device] = by_device.get(device, 0) + int(np.prod(shard, dtype=np.int64)) * itemsize
    return total, max(by_device.values(), default=0)


def memory_record(cfg: Any, target: Any, mesh: Any, *, limit: int | None = None, donates: bool = False) -> dict:
    """run.json's "memory" block for the state `target` on `mesh`, after the pre-compile check (UsageError
    when the estimate is over ESTIMATE_MARGIN x the device). `limit` overrides the device's own (tests, a
    simulated device); `donates`: the step gives its input state's buffers to its output."""
    state_bytes, per_device = state_layout(target)
    device = mesh.devices.flat[0]
    limit = device_limit(device) if limit is None else limit
    need = estimate(cfg, target, mesh.shape["data"], mesh.devices.size, donates=donates,
                    on=mesh.devices.flat[0].platform)
    record: dict[str, Any] = {"state_bytes": state_bytes, "state_bytes_per_device": per_device,
                              "estimate_bytes_per_device": need.total, "device_limit_bytes": limit}
    if limit is None:
        record["check"] = f"skipped: the {getattr(device, 'platform', '')} device reports no memory limit"
        return record
    if need.total > ESTIMATE_MARGIN * limit:
        gib = 2**30
        kept = " and its kept input copy" if need.kept_input else ""
        raise _refusal(cfg, f"about {need.total / gib:.2f} GiB per device (state {need.state / gib:.2f}{kept}, "
                            f"gradients {need.gradients / gib:.2f}, activations {need.activations / gib:.2f} GiB)",
                       device, limit)
    record["check"] = "fits" if need.total <= limit else (
        f"unsure: the estimate is {need.total / limit:.0%} of the device; XLA's figure after the compile decides")
    return record


def compiled_bytes(executable: Any) -> int | None:
    """XLA's own per-device bytes of a compiled step: arguments + outputs + temporaries - what outputs alias
    (exact where the estimate is not). None where the backend gives no analysis."""
    try:
        analysis = executable.memory_analysis()
        return int(analysis.argument_size_in_bytes + analysis.output_size_in_bytes
                   + analysis.temp_size_in_bytes - analysis.alias_size_in_bytes)
    except Exception:  # noqa: BLE001 - a backend without the analysis (or a partial one): nothing to check
        return None


def compiled_refusal(cfg: Any, need: int | None, mesh: Any, limit: int | None) -> UsageError | None:
    """The one-line refusal when the compiled step needs more than `limit` bytes per device, else None."""
    if need is None or limit is None or need <= limit:
        return None
    slices, per_slice = mesh.devices.shape
    return _refusal(cfg, f"{need / 2**30:.2f} GiB per device on {slices} x {per_slice} devices (XLA's memory "
                         "analysis of the compiled step)", mesh.devices.flat[0], limit)


def _what_to_change(cfg: Any) -> str:
    remat = getattr(cfg, "remat_policy", "none")
    first = "" if remat == "full" else f"keep less for the backward pass ({said('remat_policy')} full), or "
    return f"{first}use a smaller {said('global_batch')} or model, or more devices per slice"


def sizing_flags(cfg: Any) -> str:
    """The settings that size the step, as flags: what a refusal names."""
    preset = f"{said('model')} {cfg.model} " if isinstance(getattr(cfg, "model", None), str) else ""
    return (f"{preset}{said('d_model')} {cfg.d_model} {said('n_layers')} {cfg.n_layers} {said('d_ff')} {cfg.d_ff} {said('seq_len')} {cfg.seq_len} "
            f"{said('vocab_size')} {cfg.vocab_size} {said('global_batch')} {cfg.global_batch} {said('remat_policy')} "
            f"{getattr(cfg, 'remat_policy', 'none')}")


def _refusal(cfg: Any, needs: str, device: Any, limit: int) -> UsageError:
    return UsageError(
        f"{sizing_flags(cfg)}: the train step needs {needs} but device {device} has {limit / 2**30:.2f} GiB; "
        f"{_what_to_change(cfg)}"
    )
