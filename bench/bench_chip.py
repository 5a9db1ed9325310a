"""The trainer's own step on one accelerator chip, per preset: fit and MFU (issue 42).

For one preset, in one process (one program holds a TPU at a time; a process per preset keeps each
preset's `peak_bytes_in_use` its own): each (remat policy, batch) given is built as the trainer builds it
(trainer.core.step.StepCache, donating with one slice), the memory estimate set beside XLA's figure of the
compiled step, and, where XLA's figure fits the device, a few steps run and timed:

    python bench/bench_chip.py --model 125m --configs save_dot_except_mlp:16,full:32,auto:32:2 --out 125m.json

A configuration is POLICY:BATCH[:MICROBATCHES[:SPLASH_BLOCK[:LOGITS[:profile]]]]: --gradient-accumulation-steps,
the splash kernel's block (trainer.core.kernels.splash.BLOCK), --logits-dtype (auto: the compute dtype,
or float32), and `profile` for a jax.profiler summary
of that configuration alone; --n-heads overrides the preset's heads (the head width the matrix unit sees):
what issue 48 measured before choosing them.

`--largest` instead tries the batches given from the largest down with the first policy and runs the first
the trainer would accept (XLA's figure within the device): the largest batch and its MFU. MFU is the model
FLOPs of a step (ModelShape.flops_per_example, MaxText's formula) over the step time and the chip's peak.
Configurations run in the order given; peak_bytes_in_use only grows within a process, so list them from the
least memory up. The JSON is rewritten after every configuration: a run cut short keeps what it measured.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))



def config_for(model: str, batch: int, remat: str, run_dir: str, **extra):
    from elxpk_contract.settings import TrainerConfig
    from trainer.core.precision import resolved

    return resolved(TrainerConfig(model=model, global_batch=batch, remat_policy=remat, dropout=0.0, seed=1,
                                  num_slices=1, devices_per_slice=1, run_dir=run_dir, **extra))


def timed_steps(executable, state, cfg, mesh, steps: int):
    """`steps` steps of `executable` on synthetic batches after two warm-up steps: (state, the last loss,
    the median step seconds, the data iterator, its two batches)."""
    from trainer.core import mesh as meshlib
    from trainer.data.data import ElasticIterator, SyntheticTokens
    from trainer.elastic.attempt import _scalar

    data = ElasticIterator(SyntheticTokens(cfg.vocab_size, cfg.seq_len, cfg.seed), cfg.global_batch)
    batches = [meshlib.put_batch(data.next_batch().tokens, mesh) for _ in range(2)]
    times = []
    for step in range(steps + 2):  # the first two are warm-up
        began = time.perf_counter()
        state, loss = executable(state, batches[step % 2], _scalar(step, mesh))
        float(loss.addressable_data(0))
        times.append(time.perf_counter() - began)
    return state, loss, statistics.median(times[2:]), data, batches


def measure(cfg, mesh, steps: int, peak_tflops: float | None, run: bool, profile: bool = False,
            checkpoint: bool = False) -> dict:
    """Estimate, XLA's figure and (where it fits and `run`) the timed steps of `cfg` on `mesh`."""

    from trainer.clock import SystemClock
    from trainer.core import state as core_state
    from trainer.core import step as steplib
    from trainer.core.memory import choose_remat, device_limit, estimate
    from trainer.core.model import ModelShape

    limit = device_limit(mesh.devices.flat[0])
    target = core_state.state_target(cfg, mesh)
    requested = cfg.remat_policy
    cfg = dataclasses.replace(cfg, remat_policy=choose_remat(cfg, target, mesh, limit, donates=True))
    shape = ModelShape.from_config(cfg)
    need = estimate(cfg, target, 1, 1, donates=True)
    row = {"batch": cfg.global_batch, "remat_requested": requested, "remat_policy": cfg.remat_policy,
           "attention": shape.attention,
           "compute_dtype": shape.compute_dtype, "estimate_bytes": need.total,
           "estimate_parts": {k: getattr(need, k) for k in ("state", "kept_input", "gradients", "activations",
                                                            "gathered")},
           "device_limit_bytes": limit}
    compiled, _ = steplib.StepCache(cfg, SystemClock(), donate=True).get(mesh)
    row.update(compile_s=compiled.compile_s, xla_bytes=compiled.bytes_per_device)
    row["fits"] = compiled.bytes_per_device is None or limit is None or compiled.bytes_per_device <= limit
    if not (run and row["fits"]):
        return row
    state = core_state.place(core_state.host_init_state(cfg), mesh)
    state, loss, step_s, data, batches = timed_steps(compiled.executable, state, cfg, mesh, steps)
    flops = shape.flops_per_example() * cfg.global_batch
    stats = mesh.devices.flat[0].memory_stats() or {}
    row.update(step_s=step_s, loss=float(loss.addressable_data(0)), tflops=flops / step_s / 1e12,
               mfu=flops / step_s / (peak_tflops * 1e12) if peak_tflops else None, peak_bytes_in_use=stats.get("peak_bytes_in_use"),
               examples_per_s=cfg.global_batch / step_s, memory_stats=stats)
    if profile:
        row["profile"] = profiled(compiled.executable, state, batches[0], mesh, steps)
    if checkpoint:
        row["checkpoint"] = save_and_resume(cfg, compiled.executable, state, data, batches[0], mesh)
    del state, batches
    return row


class _Events:
    """The store's recorder: keeps the events' figures (save blocking, commit)."""

    def __init__(self) -> None:
        self.seen: dict = {}

    def event(self, name, step, **details) -> None:
        self.seen[name] = details


def save_and_resume(cfg, executable, state, data, tokens, mesh) -> dict:
    """One save through the trainer's store (its blocking and commit seconds), the restore of it, and the
    first step on the restored state: its input must be donated (trainer.ckpt.checkpoint.donatable; else the
    step holds two states, jax#18617) and it must leave no more in use than a step from a fresh start."""
    import jax

    from trainer.ckpt.checkpoint import CheckpointStore, donatable
    from trainer.clock import SystemClock
    from trainer.core import state as core_state
    from trainer.elastic.attempt import _scalar

    device = mesh.devices.flat[0]
    events = _Events()
    store = CheckpointStore(cfg, fault_hook=lambda point, step: None, recorder=events, clock=SystemClock())
    store.save(1, state, data.get_state())
    store.poll(block=True)
    state, loss = executable(state, tokens, _scalar(1, mesh))  # a step from the running state, for comparison
    float(loss.addressable_data(0))
    fresh_in_use = (device.memory_stats() or {}).get("bytes_in_use")
    del state
    began = time.perf_counter()
    step, restored, _ = store.restore_latest(core_state.state_target(cfg, mesh))
    restored = donatable(restored)  # as the trainer's attempt does
    restore_s = time.perf_counter() - began
    inputs = jax.tree.leaves(restored)
    restored, loss = executable(restored, tokens, _scalar(step, mesh))
    float(loss.addressable_data(0))
    resumed_in_use = (device.memory_stats() or {}).get("bytes_in_use")
    store.close(raise_errors=True)
    return {"save_blocking_s": events.seen.get("checkpoint_saved", {}).get("blocking_s"),
            "commit_s": events.seen.get("checkpoint_committed", {}).get("commit_s"), "restore_s": restore_s,
            "restored_input_donated": all(leaf.is_deleted() for leaf in inputs),
            "bytes_in_use_after_a_step": fresh_in_use, "bytes_in_use_after_the_first_resumed_step": resumed_in_use}


def profiled(executable, state, tokens, mesh, steps: int) -> dict:
    """Where a step's device time goes: `steps` steps under jax.profiler, the device's ops from its
    Perfetto trace summed by name (the top 25, in ms per step) and by kind (the op name's first word)."""
    import gzip
    import tempfile
    from collections import Counter

    import jax

    from trainer.elastic.attempt import _scalar

    folder = tempfile.mkdtemp(prefix="bench_chip_trace")
    with jax.profiler.trace(folder, create_perfetto_trace=True):
        for step in range(steps):
            state, loss = executable(state, tokens, _scalar(100 + step, mesh))
        float(loss.addressable_data(0))
    trace_file = next(Path(folder).rglob("*.trace.json.gz"), None)
    if trace_file is None:
        return {"error": "no perfetto trace written"}
    events = json.loads(gzip.decompress(trace_file.read_bytes())).get("traceEvents", [])
    names = {e.get("pid"): str(e.get("args", {}).get("name")) for e in events if e.get("name") == "process_name"}
    devices = {e["pid"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"
               and "TPU" in str(e.get("args", {}).get("name", "")) and "Host" not in str(e["args"]["name"])}
    by_name: Counter = Counter()
    by_kind: Counter = Counter()
    for e in events:
        if e.get("ph") == "X" and e.get("pid") in devices and "dur" in e:
            by_name[e["name"]] += e["dur"] / 1e3 / steps
            by_kind[e["name"].split(".")[0].split(" ")[0].rstrip("0123456789_-")] += e["dur"] / 1e3 / steps
    jax.block_until_ready(state)
    return {"device_pids": len(devices), "processes": sorted(set(names.values()))[:12], "ms_per_step_top": [[n, round(v, 3)] for n, v in by_name.most_common(25)],
            "ms_per_step_by_kind": {n: round(v, 3) for n, v in by_kind.most_common(15)}}


def largest_by_estimate(model: str, mesh, limit: int | None, attention: str) -> int | None:
    """The largest power-of-two batch whose estimate, with the least memory remat (full), is within the
    device: the largest the trainer is expected to accept (compiling each candidate would take minutes)."""
    from trainer.core import state as core_state
    from trainer.core.memory import estimate

    if limit is None:
        return None
    best = None
    for batch in (2**k for k in range(0, 11)):
        cfg = config_for(model, batch, "full", "/tmp/bench_chip_run", attention=attention)
        if estimate(cfg, core_state.state_target(cfg, mesh), 1, 1, donates=True).total > limit:
            break
        best = batch
    return best


def matmul_rate(size: int = 8192, repeats: int = 10) -> dict:
    """The chip's own bf16 matmul rate (size^3, mean of `repeats` after a warm-up), in TFLOP/s."""
    import jax
    import jax.numpy as jnp

    a = jax.random.normal(jax.random.PRNGKey(0), (size, size), jnp.bfloat16)
    b = jax.random.normal(jax.random.PRNGKey(1), (size, size), jnp.bfloat16)
    product = jax.jit(jnp.matmul)
    product(a, b).block_until_ready()
    began = time.perf_counter()
    for _ in range(repeats):
        out = product(a, b)
    out.block_until_ready()
    seconds = (time.perf_counter() - began) / repeats
    return {"size": size, "seconds": seconds, "tflops": 2 * size**3 / seconds / 1e12}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model")
    parser.add_argument("--configs", help="POLICY:BATCH,... (with --largest: POLICY:B1:B2:...)")
    parser.add_argument("--matmul", action="store_true", help="only the chip's own matmul rate, and the versions")
    parser.add_argument("--largest", action="store_true")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--attention", default="auto")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--profile", action="store_true", help="a jax.profiler summary of each configuration run")
    parser.add_argument("--checkpoint", action="store_true", help="save, restore and resume each configuration run")
    parser.add_argument("--deterministic-reduction", default="on", choices=("on", "off"))
    parser.add_argument("--n-heads", type=int, help="the preset's heads overridden")
    parser.add_argument("--splash-block", type=int, help="the splash kernel's block size (default: the kernel's)")
    parser.add_argument("--logits", choices=("auto", "float32"), default="auto",
                        help="--logits-dtype: the dtype the logits leave their matmul in")
    args = parser.parse_args()

    from trainer.core import step as steplib
    from trainer.core.kernels import splash

    default_block = args.splash_block or splash.BLOCK
    shape_overrides = {"n_heads": args.n_heads} if args.n_heads else {}

    import jax

    from elxpk_contract.chip_peaks import peak_tflops
    from trainer.core import mesh as meshlib

    device = jax.devices()[0]
    peak = peak_tflops(device.device_kind)  # the one table (elxpk_contract/chip_peaks.py); None: no MFU
    if args.matmul:
        from importlib import metadata

        versions = {name: _version(metadata, name) for name in ("jax", "jaxlib", "libtpu", "orbax-checkpoint",
                                                                 "optax", "numpy")}
        args.out.write_text(json.dumps({"platform": jax.default_backend(), "device_kind": device.device_kind,
                                        "memory_stats": device.memory_stats(), "versions": versions,
                                        "peak_tflops": peak,
                                        "matmul": matmul_rate() if jax.default_backend() != "cpu" else None},
                                       indent=1))
        return
    mesh = meshlib.build_mesh({0: [device]}, [0])
    result: dict = {"model": args.model, "device_kind": device.device_kind, "peak_tflops": peak, "rows": []}
    from trainer.core.memory import device_limit

    result["largest_batch_by_estimate"] = largest_by_estimate(args.model, mesh, device_limit(device), args.attention)
    work = tempfile.mkdtemp(prefix="bench_chip_run")  # a fresh run (and checkpoint) directory
    if args.largest:
        policy, *batches = args.configs.split(":")
        for batch in sorted((int(b) for b in batches), reverse=True):
            cfg = config_for(args.model, batch, policy, work, attention=args.attention,
                             deterministic_reduction=args.deterministic_reduction)
            row = measure(cfg, mesh, args.steps, peak, run=True, profile=args.profile,
                              checkpoint=args.checkpoint)
            result["rows"].append(row)
            args.out.write_text(json.dumps(result, indent=1))
            print(json.dumps(row), flush=True)
            if row["fits"]:
                result["largest_batch"] = batch
                break
    else:
        for item in args.configs.split(","):
            policy, batch, *rest = item.split(":") + [""] * 4
            micro_count, block, logits, profile_this = int(rest[0] or 1), int(rest[1] or default_block), \
                rest[2] or args.logits, rest[3] == "profile" or args.profile
            # Read at trace time; the process's executables are keyed without it, so each is compiled anew.
            splash.BLOCK = block
            steplib._EXECUTABLES.clear()
            try:
                cfg = config_for(args.model, int(batch), policy, work, attention=args.attention,
                                 deterministic_reduction=args.deterministic_reduction,
                                 gradient_accumulation_steps=micro_count, logits_dtype=logits,
                                 **shape_overrides)
                row = measure(cfg, mesh, args.steps, peak, run=True, profile=profile_this,
                              checkpoint=args.checkpoint)
            except Exception as exc:  # noqa: BLE001 - one configuration's failure must not lose the others
                row = {"batch": int(batch), "remat_policy": policy, "error": str(exc).splitlines()[0][:300]}
            row.update(gradient_accumulation_steps=micro_count, splash_block=block, logits=logits,
                       **shape_overrides)
            result["rows"].append(row)
            args.out.write_text(json.dumps(result, indent=1))
            print(json.dumps(row), flush=True)
    args.out.write_text(json.dumps(result, indent=1))


def _version(metadata, name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


if __name__ == "__main__":
    main()
