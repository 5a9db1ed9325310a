"""Benchmark: a restart's start-up timeline, cold, from jax's persistent cache, and with its step deserialized.

A restart is a new process on the run's directory. One first start (2 steps, a checkpoint at step 2) writes
the run's compilation cache (RUN/xla-cache) and executable store (RUN/xla-cache-executables), both on by
default. Then, --runs times each, in turns, a restart to step 3 on a copy of that run directory:
- `cold`: the copy without the cache and the store: XLA compiles the step from scratch;
- `cache_hit`: without the store: jax's persistent cache serves the compile (still traced and lowered);
- `deserialized`: as the first start left it: the step is loaded from the store, not traced or compiled.
With `--ahead-topology` (a TPU host: jax describes the slice from libtpu), one more kind, `ahead`: the store
written by `python -m trainer --compile-only --compile-executables` instead of by the first start, no jax
cache: does the run load what compile-only wrote? If not, `ahead_key_differs` names the parts of the key
(trainer/core/executable_store.py) in which the compile-only entry differs from the first start's own.
Each restart's own `startup` events give its timeline (each phase's end from the process's start, the kernel's
start time: trainer/startup.py); `launch_to_first_step_s` is this script's clock from the launch to the first
new metrics record. The restarts' `executable_ready` `how` is checked against the kind: a restart that did not
do what its kind says is reported as such, not averaged in.

    .venv/bin/python bench/bench_restart_timeline.py            # the tiny preset, 2 slices x 2 CPU devices
    python3 bench/bench_restart_timeline.py --model 125m --global-batch 16 \\
        --trainer-args '--num-slices 1 --devices-per-slice 1 --dropout 0' \\
        --ahead-topology v5e:1x1 --ahead-args '--compile-chip-bytes 17179869184'   # one TPU v5e chip
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_compile_cache import (  # the bench folder is the script's own: on sys.path
    restart_parser,
    trainer_env,
)

ROOT = Path(__file__).resolve().parents[1]
KINDS = ("cold", "cache_hit", "deserialized")
HOW = {"cold": "compiled", "cache_hit": "cache_hit", "deserialized": "deserialized", "ahead": "deserialized"}  # executable_ready's how
REMOVED = {"cold": ("xla-cache", "xla-cache-executables"), "cache_hit": ("xla-cache-executables",), "deserialized": (),
           "ahead": ("xla-cache", "xla-cache-executables")}


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _start(run_dir: Path, steps: int, flags: list[str], env: dict[str, str]) -> dict:
    launched = time.time()
    done = subprocess.run([sys.executable, "-m", "trainer", "--run-dir", str(run_dir), "--steps", str(steps), *flags],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise SystemExit(f"the trainer exited {done.returncode}:\n{done.stderr[-3000:]}")
    first = min(r["time"] for r in _lines(run_dir / "metrics.jsonl") if r["time"] >= launched)
    events = [e for e in _lines(run_dir / "events.jsonl") if e["time"] >= launched]  # this process's alone
    timeline = {e["phase"]: e["since_start_s"] for e in events if e["event"] == "startup"}
    how = [e["how"] for e in events if e["event"] == "startup" and e["phase"] == "executable_ready"]
    restore = [e for e in events if e["event"] == "restore_done"][-1]
    return {"launch_to_first_step_s": round(first - launched, 3), "timeline": timeline, "how": how[-1] if how else "",
            "compile_s": restore.get("compile_s"), "executable_store": restore.get("executable_store", ""),
            "restore_read_s": restore.get("read_s"), "restore_verify_s": restore.get("verify_s"),
            "save_blocking_s": [e.get("blocking_s") for e in events if e["event"] == "checkpoint_saved"],
            "restore_done_to_first_step_s": round(timeline["first_step_done"] - timeline["restore_done"], 3)
            if {"first_step_done", "restore_done"} <= set(timeline) else None}


def _keys(store: Path) -> list[dict]:
    return [json.loads(p.read_bytes().split(b"\n", 2)[1])["key"] for p in sorted(store.glob("*.xexec"))]


def _ahead(store: Path, run_store: Path, model: list[str], args: argparse.Namespace, env: dict[str, str]) -> dict:
    """--compile-only's entries for the run's slice, and where their key differs from the first start's own."""
    done = subprocess.run([sys.executable, "-m", "trainer", "--compile-only", "--compile-topology", args.ahead_topology,
                           "--compile-executables", str(store), *model, *shlex.split(args.ahead_args)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise SystemExit(f"--compile-only exited {done.returncode}:\n{done.stderr[-3000:]}")
    report = json.loads(done.stdout)
    own, written = _keys(run_store), _keys(store)
    differs = sorted({k for w in written[:1] for o in own[:1] for k in set(w) | set(o) if w.get(k) != o.get(k)})
    return {"compile_s": report.get("compile_s"), "executable_store": report.get("executable_store"),
            "entries": len(written), "ahead_key_differs": differs,
            "differing": {k: {side: json.dumps(key[0].get(k))[:400] for side, key in (("ahead", written), ("run", own))}
                          for k in differs}}


def main(argv: list[str] | None = None) -> int:
    parser = restart_parser(__doc__.splitlines()[0], 1, "--num-slices 1 --devices-per-slice 1 --dropout 0")
    parser.add_argument("--ahead-topology", help="also the `ahead` kind: --compile-only for this TPU slice")
    parser.add_argument("--ahead-args", default="", help="more --compile-only flags (the chip's HBM: "
                        "'--compile-chip-bytes 17179869184', so --remat-policy auto picks as on the chip)")
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    parser.add_argument("--kinds", default=",".join(KINDS), help=f"which restarts, of {', '.join(KINDS)}")
    args = parser.parse_args(argv)
    chosen = tuple(k for k in args.kinds.split(",") if k)
    if not set(chosen) <= set(KINDS):
        parser.error(f"--kinds {args.kinds}: each one of {', '.join(KINDS)}")
    kinds = (*chosen, "ahead") if args.ahead_topology else chosen
    env = trainer_env()
    env.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")  # a CPU step compiles in under jax's 1 s
    model = ["--model", args.model, "--global-batch", args.global_batch, "--checkpoint-period", "2",
             *shlex.split(args.trainer_args)]
    with tempfile.TemporaryDirectory(prefix="elxpk-bench-restart-") as tmp:
        first_dir = Path(tmp) / "first"
        first = _start(first_dir, 2, model, env)
        ahead: dict = {}
        if args.ahead_topology:
            ahead = _ahead(Path(tmp) / "ahead-store", first_dir / "xla-cache-executables", model, args, env)
        rows: dict[str, list[dict]] = {kind: [] for kind in kinds}
        for i in range(args.runs):
            for kind in kinds:
                run_dir = Path(tmp) / f"{kind}-{i}"
                shutil.copytree(first_dir, run_dir, symlinks=True)
                for name in REMOVED[kind]:
                    shutil.rmtree(run_dir / name, ignore_errors=True)
                if kind == "ahead":
                    shutil.copytree(Path(tmp) / "ahead-store", run_dir / "xla-cache-executables")
                rows[kind].append(_start(run_dir, 3, model, env))
    as_kind = {kind: [r for r in runs if r["how"] == HOW[kind]] for kind, runs in rows.items()}
    result = {
        "model": args.model, "global_batch": int(args.global_batch), "trainer_args": args.trainer_args,
        "runs": args.runs, "load_avg_1_5_15": [round(x, 2) for x in os.getloadavg()], "cpus": os.cpu_count(),
        "first_start": first, "restarts": rows,
        "median_first_step_s": {kind: round(statistics.median(r["timeline"]["first_step_done"] for r in runs), 3)
                                for kind, runs in as_kind.items() if runs},
        "not_as_their_kind": {kind: len(rows[kind]) - len(as_kind[kind]) for kind in kinds},
        **({"ahead": ahead} if ahead else {}),
    }
    text = json.dumps(result, indent=2)
    if args.out is not None:
        args.out.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
