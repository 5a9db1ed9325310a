"""Benchmark: a restart's start -> first step, with the run's persistent compilation cache and without it.

A restart is a new process on the run's directory (a JobSet restart, each multi-controller attempt): it
restores the newest checkpoint and compiles the step. With the cache (on by default, beside the
checkpoints: elxpk_contract/compile_cache.py) it loads the executable the first start wrote instead.

One first start writes a checkpoint and the cache; then, --runs times each, in turns, a restart on a copy of
its run dir with the cache and one with `--compilation-cache-dir off` (the baseline, measured in the same
run). Start -> first step is the launch's wall clock to the restart's first metrics record. jax's own
settings, as in a pod (it writes compiles over 1 s); the tests' shared cache variable is dropped.

    .venv/bin/python bench/bench_compile_cache.py            # the tiny preset, 2 slices x 2 CPU devices
    .venv/bin/python bench/bench_compile_cache.py --runs 3 --model 125m --global-batch 4
    python3 bench/bench_compile_cache.py --runs 1 --model 125m --trainer-args '--num-slices 1 --devices-per-slice 1'
                                                              # one TPU chip (the device tool)
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

ROOT = Path(__file__).resolve().parents[1]


def _restart(run_dir: Path, steps: int, flags: list[str], env: dict[str, str]) -> dict:
    started = time.time()
    done = subprocess.run([sys.executable, "-m", "trainer", "--run-dir", str(run_dir), "--steps", str(steps),
                           *flags], cwd=ROOT, env=env, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise SystemExit(f"the trainer exited {done.returncode}:\n{done.stderr[-3000:]}")
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    first = min(r["time"] for r in records if r["time"] >= started)
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines() if line.strip()]
    restore = [e for e in events if e["event"] == "restore_done" and e["time"] >= started][0]
    return {"start_to_first_step_s": first - started, "compile_s": restore.get("compile_s")}


def restart_parser(description: str, runs: int, chip_flags: str) -> argparse.ArgumentParser:
    """The flags every restart bench takes (this one and bench/bench_restart_timeline.py)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--runs", type=int, default=runs, help="restarts of each kind (median reported)")
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--global-batch", default="16")
    parser.add_argument("--trainer-args", default="", help=f"more trainer flags, one string (a chip: '{chip_flags}')")
    return parser


def trainer_env() -> dict[str, str]:
    """This environment for a trainer of this checkout, with no caller's cache and no forced host devices."""
    env = {k: v for k, v in os.environ.items() if k not in ("JAX_COMPILATION_CACHE_DIR", "XLA_FLAGS")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return env


def main(argv: list[str] | None = None) -> int:
    parser = restart_parser(__doc__.splitlines()[0], 2, "--num-slices 1 --devices-per-slice 1")
    args = parser.parse_args(argv)
    env = trainer_env()
    model = ["--model", args.model, "--global-batch", args.global_batch, "--checkpoint-period", "2",
             *shlex.split(args.trainer_args)]
    with tempfile.TemporaryDirectory(prefix="elxpk-bench-cache-") as tmp:
        first_dir, cache = Path(tmp) / "first", Path(tmp) / "xla-cache"
        first = _restart(first_dir, 2, [*model, "--compilation-cache-dir", str(cache)], env)
        rows: dict[str, list[dict]] = {"cache": [], "no_cache": []}
        for i in range(args.runs):
            for kind, flag in (("cache", str(cache)), ("no_cache", "off")):
                run_dir = Path(tmp) / f"{kind}-{i}"
                shutil.copytree(first_dir, run_dir)
                rows[kind].append(_restart(run_dir, 3, [*model, "--compilation-cache-dir", flag], env))
    median = {kind: statistics.median(r["start_to_first_step_s"] for r in runs) for kind, runs in rows.items()}
    print(json.dumps({
        "model": args.model, "global_batch": int(args.global_batch), "runs": args.runs,
        "first_start": first, "restarts": rows,
        "restart_start_to_first_step_s": {"with_cache": round(median["cache"], 2),
                                          "without_cache": round(median["no_cache"], 2)},
        "ratio_with_to_without": round(median["cache"] / median["no_cache"], 3),
    }, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
