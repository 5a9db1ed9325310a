"""Trainer benchmarks, as ratios against baselines measured in the same run (CPU, 2 slices x 2 devices).

    .venv/bin/python bench/bench_trainer.py [--quick] [--out bench/out/trainer.json]

1. Overhead: train() (elastic loop, metrics, async checkpoints every 100 steps) against a bare loop
   running the same compiled step on the same data. Target <= 1.03.
2. Recovery: in-process (failure detected -> first new step done) against a cold restart (new process:
   import, compile, restore, first step). Target: in-process >= 3x faster.
3. Save cost: the time one save blocks the train loop, and the time until it is committed.
4. Achieved FLOP/s of the train step (model FLOPs per step / step time). No accelerator is used.
5. Deterministic reduction (issue 12): step time of --deterministic-reduction on against the plain all-reduce
   (off) at full width, interleaved in the same run (goal <= 1.10), and both on the survivor (1 of 2 slices).
   `--only reduction` runs this part alone.

The machine is shared and timings are noisy: the overhead compares the best of several interleaved repeats
(and also prints the ratio of medians); the other figures are medians.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from trainer.cpu import ensure_devices  # noqa: E402

ensure_devices(4)

from elxpk_contract.settings import TrainerConfig  # noqa: E402

BENCH_MODEL = dict(global_batch=16, seq_len=32, vocab_size=256, d_model=128, n_layers=2, n_heads=4, d_ff=512,
                   dropout=0.1, seed=1, warmup_steps=10, decay_steps=1000)


def bench_config(run_dir: Path, **overrides) -> TrainerConfig:
    settings = dict(run_dir=str(run_dir), num_slices=2, devices_per_slice=2, elastic_enabled=True,
                    elastic_poll_seconds=0.05, **BENCH_MODEL)
    settings.update(overrides)
    return TrainerConfig(**settings)


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def bare_loop(cfg, steps: int, active: tuple[int, ...] = (0, 1)) -> tuple[float, list[float]]:
    """The same compiled step, data and per-step sync as train(), and nothing else."""
    from elxpk_contract.faults import FaultSchedule
    from trainer.clock import SystemClock
    from trainer.core import mesh as meshlib
    from trainer.core import step as steplib
    from trainer.data.data import ElasticIterator, SyntheticTokens
    from trainer.elastic.attempt import _scalar
    from trainer.elastic.slices import SimulatedSlices

    backend = SimulatedSlices(cfg.num_slices, cfg.devices_per_slice, FaultSchedule(), SystemClock())
    mesh = meshlib.build_mesh(backend.slice_devices(), list(active))
    cache = steplib.StepCache(cfg, SystemClock())
    compiled, _ = cache.get(mesh)
    state = cache.init_state(mesh)
    data = ElasticIterator(SyntheticTokens(cfg.vocab_size, cfg.seq_len, cfg.seed), cfg.global_batch)
    step_times = []
    started = time.perf_counter()
    for step in range(steps):
        tokens = meshlib.put_batch(data.next_batch().tokens, mesh)
        t0 = time.perf_counter()
        state, loss = compiled.executable(state, tokens, _scalar(step, mesh))
        float(loss.addressable_data(0))
        step_times.append(time.perf_counter() - t0)
    return time.perf_counter() - started, step_times


def elastic_loop(cfg) -> float:
    """Wall time of train()'s step loop, from restore_done until the final save has returned: every
    save's blocking time counts, the one-off wait for the final commit does not. Compile is cached."""
    from trainer.elastic.loop import train

    train(cfg)
    events = read_jsonl(Path(cfg.run_dir) / "events.jsonl")
    start = next(e["time"] for e in events if e["event"] == "restore_done")
    end = next(e["time"] for e in events if e["event"] == "checkpoint_saved" and e["step"] == cfg.steps)
    return end - start


def overhead(work: Path, steps: int, repeats: int) -> dict:
    bare, elastic, saves = [], [], []
    # Compile once (both sides then reuse the executable) and pay orbax's first-save setup up front.
    elastic_loop(bench_config(work / "warm", steps=5, checkpoint_period=5))
    for i in range(repeats):
        bare.append(bare_loop(bench_config(work / f"bare{i}"), steps)[0])
        cfg = bench_config(work / f"elastic{i}", steps=steps, checkpoint_period=100)
        elastic.append(elastic_loop(cfg))
        saves += [e for e in read_jsonl(Path(cfg.run_dir) / "events.jsonl") if e["event"].startswith("checkpoint_")]
    # The least disturbed repeat of each side: other work on the shared machine only ever adds time.
    b, e = min(bare), min(elastic)
    blocking = [s["blocking_s"] for s in saves if s["event"] == "checkpoint_saved"]
    commit = [s["commit_s"] for s in saves if s["event"] == "checkpoint_committed"]
    return {"steps": steps, "checkpoint_period": 100, "bare_s": b, "elastic_s": e, "ratio": e / b,
            "ratio_of_medians": statistics.median(elastic) / statistics.median(bare),
            "bare_samples": bare, "elastic_samples": elastic,
            "save_blocking_s_median": statistics.median(blocking), "save_blocking_s_max": max(blocking),
            "save_commit_s_median": statistics.median(commit), "saves": len(blocking)}


def in_process_recovery(work: Path, repeats: int) -> list[float]:
    from elxpk_contract.faults import FaultSchedule
    from trainer.elastic.loop import train

    found = []
    for i in range(repeats):
        cfg = bench_config(work / f"recover{i}", steps=30, checkpoint_period=10)
        train(cfg, faults=FaultSchedule.parse(["1@25"], revive_after=0.0))
        events = read_jsonl(Path(cfg.run_dir) / "events.jsonl")
        found.append(next(e["recovery_s"] for e in events if e["event"] == "first_step_after_recovery"))
    return found


def cold_restart(work: Path, source: Path, repeats: int) -> list[float]:
    """A new process restores step 20 of a finished run and runs step 20: spawn -> first metric line."""
    found = []
    for i in range(repeats):
        run = work / f"cold{i}"
        shutil.copytree(source / "checkpoints", run / "checkpoints")
        shutil.rmtree(run / "checkpoints" / "30")
        cfg = bench_config(run, steps=30, checkpoint_period=10)
        flags = [f"--{k.replace('_', '-')}={v}" for k, v in cfg.to_dict().items()
                 if k in BENCH_MODEL or k in ("steps", "checkpoint_period", "run_dir")]
        env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
        metrics = run / "metrics.jsonl"
        started = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "trainer", *flags], cwd=REPO, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while not (metrics.exists() and metrics.read_text().strip()):
            if proc.poll() is not None:
                raise RuntimeError(f"cold restart exited with {proc.returncode} before its first step")
            time.sleep(0.01)
        found.append(time.perf_counter() - started)
        proc.wait(timeout=300)
    return found


def flops(work: Path, model: dict, steps: int) -> dict:
    from trainer.core.model import ModelShape

    cfg = bench_config(work / "flops", **model)
    bare_loop(cfg, 2)  # compile
    _, step_times = bare_loop(cfg, steps)
    shape = ModelShape.from_config(cfg)
    per_step = shape.flops_per_example() * cfg.global_batch
    median = statistics.median(step_times)
    return {"params": shape.param_count(), "flops_per_step": per_step, "step_time_s": median,
            "achieved_flops_per_s": per_step / median}


def reduction_cost(work: Path, model: dict, steps: int, repeats: int) -> dict:
    """Median step time per (mode, width), best of `repeats` interleaved rounds (the machine is shared:
    disturbance only adds time). The ratios are on/off at the same width, and each mode's survivor/full."""
    from trainer.core.model import ModelShape

    cases = {(mode, active): bench_config(work / f"reduction-{mode}", deterministic_reduction=mode, **model)
             for mode in ("off", "on") for active in ((0, 1), (0,))}
    for (_, active), cfg in cases.items():
        bare_loop(cfg, 2, active)  # compile every executable first
    best: dict[tuple, float] = {}
    for _ in range(repeats):
        for (mode, active), cfg in cases.items():
            median = statistics.median(bare_loop(cfg, steps, active)[1])
            best[(mode, active)] = min(best.get((mode, active), float("inf")), median)
    cfg = cases[("on", (0, 1))]
    params, d = ModelShape.from_config(cfg).param_count(), cfg.devices_per_slice
    n = cfg.num_slices
    return {
        "params": params, "steps": steps, "repeats": repeats,
        "step_s": {f"{mode}/{len(active)}-slice": t for (mode, active), t in best.items()},
        "full_width_on_over_off": best[("on", (0, 1))] / best[("off", (0, 1))],
        "survivor_on_over_off": best[("on", (0,))] / best[("off", (0,))],
        "survivor_over_full_on": best[("on", (0,))] / best[("on", (0, 1))],
        "survivor_over_full_off": best[("off", (0,))] / best[("off", (0, 1))],
        # Bytes one device receives across slices per step at full width (float32 gradient, FSDP over d).
        "cross_slice_bytes_per_device": {"partial_sums_all_gather": (n - 1) * params * 4 / d,
                                         "ring_all_reduce": 2 * (n - 1) / n * params * 4 / d},
    }


def print_reduction(name: str, r: dict) -> None:
    t = r["step_s"]
    print(f"reduction  {name} ({r['params'] / 1e6:.2f}M params): full width on/off "
          f"{t['on/2-slice'] * 1e3:.1f}/{t['off/2-slice'] * 1e3:.1f} ms = {r['full_width_on_over_off']:.3f} "
          f"(goal <= 1.10); survivor on/off {t['on/1-slice'] * 1e3:.1f}/{t['off/1-slice'] * 1e3:.1f} ms = "
          f"{r['survivor_on_over_off']:.3f}; survivor/full: on {r['survivor_over_full_on']:.2f}, "
          f"off {r['survivor_over_full_off']:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps and repeats (a smoke run)")
    parser.add_argument("--out", default=str(REPO / "bench" / "out" / "trainer.json"))
    parser.add_argument("--only", choices=("reduction",), help="run one part alone (written to --out)")
    args = parser.parse_args()
    steps, repeats = (200, 1) if args.quick else (400, 5)
    work = Path(tempfile.mkdtemp(prefix="elxpk-bench-"))
    default_model = dict(global_batch=16, seq_len=64, vocab_size=512, d_model=256, n_layers=4, n_heads=4,
                         d_ff=1024)
    reduction_runs = (20, 1) if args.quick else (40, 3)
    if args.only == "reduction":
        try:
            found = {"bench_model": reduction_cost(work, {}, *reduction_runs),
                     "default_model": reduction_cost(work, default_model, reduction_runs[0] // 4, reduction_runs[1])}
        finally:
            shutil.rmtree(work, ignore_errors=True)
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps({"reduction": found}, indent=2) + "\n")
        for name, r in found.items():
            print_reduction(name, r)
        print(f"written to {args.out}")
        return
    try:
        over = overhead(work, steps, repeats)
        inproc = in_process_recovery(work, repeats)
        cold = cold_restart(work, work / "recover0", repeats)
        rate_small = flops(work, {}, 20 if args.quick else 50)
        rate_default = flops(work, default_model, 3 if args.quick else 8)
        reduction = {"bench_model": reduction_cost(work, {}, *reduction_runs),
                     "default_model": reduction_cost(work, default_model, reduction_runs[0] // 4, reduction_runs[1])}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report = {
        "overhead": over,
        "recovery": {"in_process_s": statistics.median(inproc), "cold_restart_s": statistics.median(cold),
                     "cold_over_in_process": statistics.median(cold) / statistics.median(inproc),
                     "in_process_samples": inproc, "cold_samples": cold},
        "flops": {"bench_model": rate_small, "default_model": rate_default},
        "reduction": reduction,
        "device": "CPU (2 shared cores, 4 virtual XLA devices); no accelerator was lent to this task",
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(f"overhead   elastic loop + async checkpoints / bare loop, {steps} steps, period 100: "
          f"{over['ratio']:.3f}  ({over['elastic_s']:.2f}s / {over['bare_s']:.2f}s, best of {repeats}; "
          f"ratio of medians {over['ratio_of_medians']:.3f}; target <= 1.03)")
    print(f"save cost  blocking per save: median {over['save_blocking_s_median'] * 1e3:.1f} ms, "
          f"max {over['save_blocking_s_max'] * 1e3:.1f} ms; commit after {over['save_commit_s_median']:.2f}s")
    r = report["recovery"]
    print(f"recovery   in-process {r['in_process_s']:.2f}s vs cold restart {r['cold_restart_s']:.2f}s: "
          f"cold / in-process = {r['cold_over_in_process']:.1f}x (target >= 3x)")
    for name, f in report["flops"].items():
        print(f"flop/s     {name}: {f['params'] / 1e6:.2f}M params, {f['flops_per_step'] / 1e9:.2f} GFLOP/step, "
              f"{f['step_time_s'] * 1e3:.1f} ms/step -> {f['achieved_flops_per_s'] / 1e9:.2f} GFLOP/s achieved")
    for name, r in report["reduction"].items():
        print_reduction(name, r)
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
