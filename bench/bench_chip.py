"""The trainer's own step on one accelerator chip, per preset: fit and MFU (issue 42).

For one preset, in one process (one program holds a TPU at a time; a process per preset keeps each
preset's `peak_bytes_in_use` its own): each (remat policy, batch) given is built as the trainer builds it
(trainer.core.step.StepCache, donating with one slice), the memory estimate set beside XLA's figure of the
compiled step, and, where XLA's figure fits the device, a few steps run and timed:

    python bench/bench_chip.py --model 125m --configs save_dot_except_mlp:16,full:32 --out 125m.json

`--largest` instead tries the batches given from the largest down with the first policy and runs the first
the trainer would accept (XLA's figure within the device): the largest batch and its MFU. MFU is the model
FLOPs of a step (ModelShape.flops_per_example, MaxText's formula) over the step time and the chip's peak.
Configurations run in the order given; peak_bytes_in_use only grows within a process, so list them from the
least memory up. The JSON is rewritten after every configuration: a run cut short keeps what it measured.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

PEAK_TFLOPS = {"TPU v5 lite": 197.0, "TPU v5e": 197.0, "TPU v4": 275.0, "TPU v5p": 459.0, "TPU v6 lite": 918.0}


def config_for(model: str, batch: int, remat: str, run_dir: str, **extra):
    from elxpk_contract.settings import TrainerConfig
    from trainer.core.precision import resolved

    return resolved(TrainerConfig(model=model, global_batch=batch, remat_policy=remat, dropout=0.0, seed=1,
                                  num_slices=1, devices_per_slice=1, run_dir=run_dir, **extra))


def measure(cfg, mesh, steps: int, peak_tflops: float, run: bool, profile: bool = False) -> dict:
    """Estimate, XLA's figure and (where it fits and `run`) the timed steps of `cfg` on `mesh`."""

    from trainer.clock import SystemClock
    from trainer.core import mesh as meshlib
    from trainer.core import state as core_state
    from trainer.core import step as steplib
    from trainer.core.memory import device_limit, estimate
    from trainer.core.model import ModelShape
    from trainer.data.data import ElasticIterator, SyntheticTokens
    from trainer.elastic.attempt import _scalar

    shape = ModelShape.from_config(cfg)
    need = estimate(cfg, core_state.state_target(cfg, mesh), 1, 1, donates=True)
    limit = device_limit(mesh.devices.flat[0])
    row = {"batch": cfg.global_batch, "remat_policy": cfg.remat_policy, "attention": shape.attention,
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
    data = ElasticIterator(SyntheticTokens(cfg.vocab_size, cfg.seq_len, cfg.seed), cfg.global_batch)
    batches = [meshlib.put_batch(data.next_batch().tokens, mesh) for _ in range(2)]
    times = []
    for step in range(steps + 2):  # the first two are warm-up
        began = time.perf_counter()
        state, loss = compiled.executable(state, batches[step % 2], _scalar(step, mesh))
        float(loss.addressable_data(0))
        times.append(time.perf_counter() - began)
    step_s = statistics.median(times[2:])
    flops = shape.flops_per_example() * cfg.global_batch
    stats = mesh.devices.flat[0].memory_stats() or {}
    row.update(step_s=step_s, loss=float(loss.addressable_data(0)), tflops=flops / step_s / 1e12,
               mfu=flops / step_s / (peak_tflops * 1e12), peak_bytes_in_use=stats.get("peak_bytes_in_use"),
               examples_per_s=cfg.global_batch / step_s, memory_stats=stats)
    if profile:
        row["profile"] = profiled(compiled.executable, state, batches[0], mesh, steps)
    del state, batches
    return row


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--configs", required=True, help="POLICY:BATCH,... (with --largest: POLICY:B1:B2:...)")
    parser.add_argument("--largest", action="store_true")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--attention", default="auto")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--profile", action="store_true", help="a jax.profiler summary of each configuration run")
    parser.add_argument("--deterministic-reduction", default="on", choices=("on", "off"))
    args = parser.parse_args()

    import jax

    from trainer.core import mesh as meshlib

    device = jax.devices()[0]
    peak = PEAK_TFLOPS.get(device.device_kind, 197.0)
    mesh = meshlib.build_mesh({0: [device]}, [0])
    result: dict = {"model": args.model, "device_kind": device.device_kind, "peak_tflops": peak, "rows": []}
    work = "/tmp/bench_chip_run"
    if args.largest:
        policy, *batches = args.configs.split(":")
        for batch in sorted((int(b) for b in batches), reverse=True):
            cfg = config_for(args.model, batch, policy, work, attention=args.attention,
                             deterministic_reduction=args.deterministic_reduction)
            row = measure(cfg, mesh, args.steps, peak, run=True, profile=args.profile)
            result["rows"].append(row)
            args.out.write_text(json.dumps(result, indent=1))
            print(json.dumps(row), flush=True)
            if row["fits"]:
                result["largest_batch"] = batch
                break
    else:
        for item in args.configs.split(","):
            policy, batch = item.split(":")
            try:
                cfg = config_for(args.model, int(batch), policy, work, attention=args.attention,
                                 deterministic_reduction=args.deterministic_reduction)
                row = measure(cfg, mesh, args.steps, peak, run=True, profile=args.profile)
            except Exception as exc:  # noqa: BLE001 - one configuration's failure must not lose the others
                row = {"batch": int(batch), "remat_policy": policy, "error": str(exc).splitlines()[0][:300]}
            result["rows"].append(row)
            args.out.write_text(json.dumps(result, indent=1))
            print(json.dumps(row), flush=True)
    args.out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
