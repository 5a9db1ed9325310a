"""The trainer at scale: MFU and the checkpoint path's costs, as figures and as ratios measured in one run.

    .venv/bin/python bench/bench_scale.py [--quick] [--mode auto|proxy|accelerator] [--out FILE.json]
        [--budget-s S]

`--out` is rewritten after every measurement, so a run stopped by its time limit still leaves what it
measured; `--budget-s` skips the MFU configurations still to run once S seconds have passed (the
checkpoint costs are always measured). bench/device_check.sh is the one prepared command for a lent GPU.

On an accelerator (GPU/TPU), for the `1b` preset (d_model 2048, 16 layers, d_ff 8192, seq 2048, vocab
32000; explicit shapes where the preset table is not there), on one slice of every local device:
- the baseline, measured in the same run: float32 compute with XLA's attention (the trainer before issue
  10), at the largest batch of 8, 4, 2 or 1 per device that fits (the trainer's two memory checks);
- the shipped default (bfloat16 compute, cuDNN attention on GPU) at 8 and 16 examples per device (each
  only where it fits), the best of them reported as the MFU and as a ratio to the baseline;
- MFU = model FLOPs per second / peak (bf16 dense; --peak-tflops, default an H200's 989 from elxpk_contract/chip_peaks.py). Model FLOPs
  per step = tokens * (6 * N + 6 * n_layers * d_model * seq_len), N = the matmul parameters
  (n_layers * (4 d^2 + 2 d f) + vocab * d, the tied output projection; the position table and the norms
  are not matmuls). The attention term is QK^T and AV (2 * 2 * seq * d per token per layer forward, x3
  for forward + backward) with causal attention counted at half: 6 * n_layers * d * seq per token.
- save() blocking (the time the train loop waits, fingerprint included), restore time (fingerprint check
  included) and fingerprint time, each the median of several.

On CPU (the proxy; 2 slices x 2 virtual devices, the FSDP layout of the trainer's tests):
- bytes read after a save (through commit and the validity record) / bytes written: goal <= 0.15;
- bytes read by a resume (restore + fingerprint check) / the checkpoint's size: goal <= 1.25;
- save() blocking against a plain host copy of the same state (a copy of every shard into fresh host
  memory; jax.device_get is printed too), measured in the same run.
Bytes read are /proc/self/io's `rchar` (every read syscall of every thread, page cache hits included)
around the operation, after a warm-up save and restore so no module is imported during the measurement.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from trainer.cpu import ensure_devices  # noqa: E402

ensure_devices(4)

from elxpk_contract.chip_peaks import PEAK_BF16_TFLOPS  # noqa: E402
from elxpk_contract.settings import TrainerConfig  # noqa: E402

EXPLICIT_1B = dict(d_model=2048, n_layers=16, n_heads=16, d_ff=8192, seq_len=2048, vocab_size=32000)
PROXY_MODEL = dict(d_model=512, n_layers=4, n_heads=8, d_ff=2048, seq_len=128, vocab_size=16000)
QUICK_PROXY_MODEL = dict(d_model=256, n_layers=2, n_heads=4, d_ff=1024, seq_len=64, vocab_size=8000)


def rchar() -> int:
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise RuntimeError("/proc/self/io has no rchar")


def tree_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def model_flops_per_step(cfg) -> tuple[float, int]:
    """(model FLOPs of one training step, N the matmul parameter count): the formula in the docstring, which
    is the trainer's own (ModelShape.flops_per_example, also in run.json)."""
    from trainer.core.model import ModelShape

    shape = ModelShape.from_config(cfg)
    return shape.flops_per_example() * cfg.global_batch, shape.matmul_params()


def make_config(run_dir: Path, shapes: dict | None, **overrides) -> TrainerConfig:
    from elxpk_contract.settings import FIELDS

    settings: dict = dict(run_dir=str(run_dir), dropout=0.0, seed=1, max_to_keep=2, **overrides)
    if shapes is None and "model" in FIELDS:
        settings["model"] = "1b"  # the preset table (issue 10, item 4)
    else:
        settings.update(shapes or EXPLICIT_1B)
    cfg = TrainerConfig(**settings)
    try:  # the compute dtype resolved for this backend, where the trainer has that step
        from trainer.core.precision import resolved  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return cfg
    return resolved(cfg)


class _Events:
    def event(self, name, step, **details) -> None:
        if name == "checkpoint_skipped":
            raise RuntimeError(f"bench: step {step} skipped: {details.get('reason')}")


def _store(cfg):
    from trainer.ckpt.checkpoint import CheckpointStore
    from trainer.clock import SystemClock

    return CheckpointStore(cfg, fault_hook=lambda point, step: None, recorder=_Events(), clock=SystemClock())


def _placed_state(cfg, mesh):
    """The initial state with its AdamW moments filled with noise: zeros would compress, and a trained
    state's moments do not."""
    import jax
    import numpy as np

    from trainer.core import state as core_state

    rng = np.random.default_rng(0)
    host = core_state.host_init_state(cfg)

    def noisy(a):
        if a.ndim == 0 or a.dtype != np.float32:
            return a
        return (1e-3 * rng.standard_normal(a.shape)).astype(np.float32)

    host["opt_state"] = jax.tree.map(noisy, host["opt_state"])
    return core_state.place(host, mesh)


def checkpoint_costs(cfg, mesh, repeats: int, handler_repeats: int, keep) -> None:
    """Save blocking, commit, bytes read after a save and on resume, restore and fingerprint times, then
    the two orbax array handlers; `keep(figures)` is called with what is measured so far, twice."""
    import jax
    import numpy as np

    from trainer.ckpt.fingerprint import fingerprint
    from trainer.core import state as core_state

    state = _placed_state(cfg, mesh)
    fingerprint(state)  # compile the reduction once
    fp_s, host_s, get_s, blocking, after_save, written, restore_s, resume_ratio = ([] for _ in range(8))
    data = {"global_next_index": 0}
    root = Path(cfg.checkpoint_path)
    # warm-up: orbax's first save and restore import and set up what later ones reuse
    store = _store(cfg)
    store.save(1, state, data)
    store.close(raise_errors=True)
    store = _store(cfg)
    warm = store.restore_latest(core_state.state_target(cfg, mesh))
    store.close(raise_errors=True)
    assert warm is not None
    jax.tree.map(lambda a: a.delete(), warm[1])
    saver = _store(cfg)  # one store per attempt in the trainer, so several saves share one manager
    saver.save(2, state, data)  # its first save sets the manager up
    saver.poll(block=True)
    for i in range(repeats):
        t0 = time.perf_counter()
        fingerprint(state)
        fp_s.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        host = jax.device_get(state)
        get_s.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        # A real copy of every shard to fresh host memory: on CPU, device_get can hand back the device's
        # own buffers without copying, which is no baseline for a save.
        host = [np.array(s.data, copy=True) for leaf in jax.tree.leaves(state) for s in leaf.addressable_shards]
        host_s.append(time.perf_counter() - t0)
        del host
        step = 3 + i
        before = rchar()
        saver.save(step, state, data)
        saver.poll(block=True)  # through commit and the validity record: everything a save does
        read = rchar() - before
        blocking.append(saver.blocking_s[-1])
        size = tree_bytes(root / str(step))
        written.append(size)
        after_save.append(read / size)
        store = _store(cfg)
        before, t0 = rchar(), time.perf_counter()
        restored = store.restore_latest(core_state.state_target(cfg, mesh))  # newest: `step`
        restore_s.append(time.perf_counter() - t0)
        resume_ratio.append((rchar() - before) / size)
        store.close(raise_errors=True)
        assert restored is not None and restored[0] == step
        jax.tree.map(lambda a: a.delete(), restored[1])
    saver.close(raise_errors=True)
    shutil.rmtree(root, ignore_errors=True)  # a 1b checkpoint is ~10 GiB: leave the disk to the handler runs
    med = statistics.median
    found = {
        "checkpoint_bytes": med(written),
        "read_after_save_ratio": med(after_save), "read_after_save_goal": 0.15,
        "resume_read_ratio": med(resume_ratio), "resume_read_goal": 1.25,
        "save_blocking_s": med(blocking), "host_copy_s": med(host_s), "device_get_s": med(get_s),
        "save_blocking_vs_host_copy": med(blocking) / med(host_s),
        "restore_s": med(restore_s), "fingerprint_s": med(fp_s),
        "samples": {"blocking_s": blocking, "host_copy_s": host_s, "restore_s": restore_s,
                    "after_save": after_save, "resume": resume_ratio},
    }
    keep(found)  # the goals' figures are kept before the longer handler comparison runs
    found["orbax_handler_blocking_s"] = handler_blocking(state, handler_repeats)
    keep(found)


def handler_blocking(state, repeats: int) -> dict:
    """save() blocking of orbax's default array handler against `use_replica_parallel=False` (what the
    trainer used before FSDP), on the same state: the trainer keeps the default unless this says otherwise
    on the target."""
    import jax
    import numpy as np
    import orbax.checkpoint as ocp
    from orbax.checkpoint import type_handlers as th

    def whole_by_first_replica():
        return ocp.PyTreeCheckpointHandler(type_handler_registry=th.create_type_handler_registry(
            (int, th.ScalarHandler()), (float, th.ScalarHandler()), (bytes, th.ScalarHandler()),
            (np.number, th.ScalarHandler()), (np.ndarray, th.NumpyHandler()), (str, th.StringHandler()),
            (jax.Array, th.ArrayHandler(use_replica_parallel=False))))

    found = {}
    for name, handler in (("default", ocp.PyTreeCheckpointHandler), ("replica_parallel_off", whole_by_first_replica)):
        root = Path(tempfile.mkdtemp(prefix="elxpk-bench-handler-"))
        manager = ocp.CheckpointManager(root, item_names=("state",), item_handlers={"state": handler()},
                                        options=ocp.CheckpointManagerOptions(max_to_keep=1))
        times = []
        for i in range(repeats + 1):  # the first save sets orbax up
            t0 = time.perf_counter()
            manager.save(i, args=ocp.args.Composite(state=ocp.args.PyTreeSave(state)))
            times.append(time.perf_counter() - t0)
            manager.wait_until_finished()
        manager.close()
        shutil.rmtree(root, ignore_errors=True)
        found[name] = statistics.median(times[1:])
    found["default_vs_off"] = found["default"] / found["replica_parallel_off"]
    return found


def mfu(cfg, mesh, steps: int, peak_tflops: float) -> dict:
    from trainer.clock import SystemClock
    from trainer.core import step as steplib
    from trainer.core.memory import compiled_refusal, device_limit

    cache = steplib.StepCache(cfg, SystemClock())
    compiled, _ = cache.get(mesh)
    refusal = compiled_refusal(cfg, compiled.bytes_per_device, mesh, device_limit(mesh.devices.flat[0]))
    if refusal is not None:  # XLA's own figure: the step would run out of memory (the trainer refuses it too)
        raise refusal
    from bench_chip import timed_steps  # this folder is the script's first sys.path entry

    _, _, step_s, _, _ = timed_steps(compiled.executable, cache.init_state(mesh), cfg, mesh, steps)
    flops, n_matmul = model_flops_per_step(cfg)
    achieved = flops / step_s
    return {"step_s": step_s, "model_flops_per_step": flops, "n_matmul_params": n_matmul,
            "tflops": achieved / 1e12, "peak_tflops": peak_tflops, "mfu": achieved / (peak_tflops * 1e12),
            "compile_s": compiled.compile_s}


def fits(cfg, mesh) -> str | None:
    """None when the trainer's estimate puts the step within the device's memory, else why not. Stricter
    than the trainer, which compiles up to ESTIMATE_MARGIN x the device and lets XLA's figure decide: on a
    short lease a compile that ends in a refusal costs a minute, so the bench skips the gray zone (and
    mfu() still checks XLA's figure of what it compiles)."""
    from trainer.core import state as core_state
    from trainer.core.memory import device_limit, estimate

    limit = device_limit(mesh.devices.flat[0])
    if limit is None:
        return None
    need = estimate(cfg, core_state.state_target(cfg, mesh), mesh.shape["data"], mesh.devices.size).total
    if need <= limit:
        return None
    return f"the estimate is {need / 2**30:.1f} GiB per device, the device has {limit / 2**30:.1f} GiB"


def mfu_sweep(work: Path, shapes: dict | None, mesh, args, started: float, save) -> tuple[dict, object]:
    """The baseline (float32, XLA attention) and the shipped default at each batch per device; returns the
    "mfu" block and the config whose state the checkpoint costs use."""
    import dataclasses

    devices = mesh.devices.size
    steps = 3 if args.quick else 10
    per_device = [args.global_batch // devices] if args.global_batch else [8, 16]
    block: dict = {"runs": [], "peak_tflops": args.peak_tflops}

    def config(dtype: str, batch: int):
        cfg = make_config(work / f"run-{dtype}-{batch}", shapes, num_slices=1, devices_per_slice=devices,
                          global_batch=batch * devices)
        return dataclasses.replace(cfg, compute_dtype=dtype) if dtype == "float32" else cfg

    candidates = [("float32", b, "baseline") for b in (8, 4, 2, 1)] + [("default", b, "default") for b in per_device]
    candidates = [c for c in candidates if c[2] in args.parts]
    baseline_done = False
    chosen = None
    for dtype, batch, role in candidates:
        if role == "baseline" and baseline_done:
            continue
        if time.perf_counter() - started > args.budget_s:
            block["runs"].append({"role": role, "per_device": batch, "skipped": "time budget spent"})
            continue
        cfg = config(dtype, batch)
        refusal = fits(cfg, mesh)
        if refusal is not None:
            block["runs"].append({"role": role, "per_device": batch, "skipped": refusal})
            continue
        run = {"role": role, "per_device": batch, "compute_dtype": cfg.compute_dtype, "attention": _attention(cfg)}
        block["runs"].append(run)
        try:  # one prepared run on a lent machine: a failing configuration must not lose the others
            run.update(mfu(cfg, mesh, steps, args.peak_tflops))
        except Exception as exc:  # noqa: BLE001 - recorded in the output, then the next configuration
            run["error"] = f"{type(exc).__name__}: {exc}"[:2000]
            save()
            continue
        baseline_done = baseline_done or role == "baseline"
        if role == "default" and (chosen is None or run["mfu"] > chosen[0]["mfu"]):
            chosen = (run, cfg)
        save()
    measured = [r for r in block["runs"] if "mfu" in r]
    base = next((r for r in measured if r["role"] == "baseline"), None)
    if chosen is not None:
        block["best"] = chosen[0]
        block["mfu"] = chosen[0]["mfu"]
        block["goal"] = 0.60
        if base is not None:
            block["vs_baseline"] = chosen[0]["mfu"] / base["mfu"]
    cfg = chosen[1] if chosen is not None else config("default", per_device[0])
    return block, cfg


def _attention(cfg) -> str:
    from trainer.core.model import ModelShape

    return ModelShape.from_config(cfg).attention or "xla"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--mode", choices=("auto", "proxy", "accelerator"), default="auto")
    parser.add_argument("--peak-tflops", type=float, default=PEAK_BF16_TFLOPS["h200"])  # the one table
    parser.add_argument("--global-batch", type=int, default=0,
                        help="accelerator: examples per step (0: sweep 8 and 16 per device)")
    parser.add_argument("--budget-s", type=float, default=float("inf"),
                        help="accelerator: start no MFU configuration after this many seconds")
    parser.add_argument("--parts", default="baseline,default,checkpoint",
                        help="accelerator: which of baseline, default and checkpoint to measure")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    args.parts = set(args.parts.split(","))
    started = time.perf_counter()

    import jax

    from trainer.core import mesh as meshlib

    platform = jax.devices()[0].platform
    mode = args.mode if args.mode != "auto" else ("proxy" if platform == "cpu" else "accelerator")
    work = Path(tempfile.mkdtemp(prefix="elxpk-bench-scale-"))
    result: dict = {"mode": mode, "platform": platform, "devices": len(jax.devices()), "jax": jax.__version__}

    def keep(checkpoint: dict) -> None:
        result["checkpoint"] = checkpoint
        save()

    def save() -> None:
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(result, indent=2, default=str) + "\n")

    try:
        if mode == "accelerator":
            devices = jax.local_devices()
            shapes = QUICK_PROXY_MODEL if platform == "cpu" else None  # cpu: exercise the path, tiny shapes
            mesh = meshlib.build_mesh({0: devices}, [0])
            result["mfu"], cfg = mfu_sweep(work, shapes, mesh, args, started, save)
            result["model"] = {k: getattr(cfg, k) for k in ("d_model", "n_layers", "d_ff", "seq_len", "vocab_size")}
            result["compute_dtype"] = getattr(cfg, "compute_dtype", "float32")
            save()
            if "checkpoint" in args.parts:  # a 1b state is ~10 GiB: few saves fit a short lease
                checkpoint_costs(cfg, mesh, 2 if args.quick else 3, 2, keep)
        else:
            shapes = QUICK_PROXY_MODEL if args.quick else PROXY_MODEL
            cfg = make_config(work / "run", shapes, num_slices=2, devices_per_slice=2, global_batch=8)
            devices = jax.devices()[:4]
            mesh = meshlib.build_mesh({0: devices[:2], 1: devices[2:]}, [0, 1])
            result["model"] = dict(shapes)
            checkpoint_costs(cfg, mesh, 2 if args.quick else 4, 2 if args.quick else 4, keep)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        result["wall_s"] = time.perf_counter() - started
        save()
    _print(result)


def _print(result: dict) -> None:
    print(f"bench_scale: {result['mode']} on {result['devices']} {result['platform']} device(s), model {result['model']}")
    if "mfu" in result:
        for m in result["mfu"]["runs"]:
            what = f"{m['role']:8} {m.get('compute_dtype', '')} {m['per_device']}/device"
            if "skipped" in m or "error" in m:
                print(f"  {what}: {'skipped' if 'skipped' in m else 'failed'} ({m.get('skipped', m.get('error'))[:300]})")
                continue
            print(f"  {what} ({m['attention']} attention): MFU {m['mfu']:.1%}  ({m['tflops']:.1f} TFLOP/s of "
                  f"{m['peak_tflops']:g}; step {m['step_s'] * 1e3:.1f} ms; compile {m['compile_s']:.1f} s)")
        block = result["mfu"]
        if "mfu" in block:
            ratio = f"; {block['vs_baseline']:.2f}x the float32 baseline" if "vs_baseline" in block else ""
            print(f"  MFU {block['mfu']:.1%} (goal >= {block['goal']:.0%}){ratio}; FLOPs/step = tokens * "
                  "(6 N + 6 layers d seq), causal attention at half")
    if "checkpoint" not in result:
        return
    c = result["checkpoint"]
    print(f"  checkpoint {c['checkpoint_bytes'] / 2**20:.1f} MiB")
    print(f"  read back after save: {c['read_after_save_ratio']:.3f} x written (goal <= {c['read_after_save_goal']})")
    print(f"  read on resume:       {c['resume_read_ratio']:.3f} x checkpoint (goal <= {c['resume_read_goal']})")
    print(f"  save() blocking {c['save_blocking_s'] * 1e3:.1f} ms vs a host copy of every shard "
          f"{c['host_copy_s'] * 1e3:.1f} ms: {c['save_blocking_vs_host_copy']:.2f}x "
          f"(jax.device_get: {c['device_get_s'] * 1e3:.1f} ms)")
    print(f"  restore {c['restore_s'] * 1e3:.1f} ms; fingerprint {c['fingerprint_s'] * 1e3:.2f} ms")
    h = c.get("orbax_handler_blocking_s")
    if h is None:
        return
    print(f"  orbax save() blocking alone: default handler {h['default'] * 1e3:.1f} ms, use_replica_parallel=False "
          f"{h['replica_parallel_off'] * 1e3:.1f} ms ({h['default_vs_off']:.2f}x)")


if __name__ == "__main__":
    main()
