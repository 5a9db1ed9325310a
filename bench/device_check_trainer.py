"""The trainer part of bench/device_check.sh on a TPU: a restart and a bitwise resume through `python -m trainer`,
as a user runs it, read back from the runs' own records.

    python bench/device_check_trainer.py --out chip-trainer.json [--model 125m --global-batch 16]

Three processes share one JAX compilation cache: an uninterrupted run of 6 steps (run dir a, the cache cold),
3 steps in run dir b, then a second process resuming b to step 6 (the cache warm). The resumed losses must
equal the uninterrupted run's, bit for bit (metrics.jsonl keeps each as float.hex). The JSON holds each
process's exit code and wall seconds, the comparison, each process's start-up timeline (issue 49: the second
and third load the step the first compiled, from the executable store beside the shared cache), and the
uninterrupted run's speed lines (issue 50) with the median MFU of those past step 1 beside bench_chip's
figure for the same preset and batch (`--bench`): `points_apart`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def read_jsonl(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def run_trainer(args: argparse.Namespace, run_dir: Path, steps: int, cache: str, log: Path) -> dict:
    command = [sys.executable, "-m", "trainer", "--model", args.model, "--global-batch", str(args.global_batch),
               "--num-slices", "1", "--devices-per-slice", "1", "--dropout", "0", "--checkpoint-period", "3",
               "--steps", str(steps), "--run-dir", str(run_dir)]
    began = time.monotonic()
    with log.open("w") as output:
        try:
            code = subprocess.run(command, stdout=output, stderr=subprocess.STDOUT, timeout=args.timeout_s,
                                  env={**os.environ, "JAX_COMPILATION_CACHE_DIR": cache}).returncode
        except subprocess.TimeoutExpired:
            code = None
    return {"exit": code, "process_s": round(time.monotonic() - began, 2)}


def startups(events: list[dict]) -> list[dict]:
    """Each process start's phases (issue 49's `startup` events: seconds from the process's start) and how its
    step was made, in the order the processes ran: a new one begins at imports_done."""
    found: list[dict] = []
    for e in events:
        if e.get("event") != "startup":
            continue
        if e.get("phase") == "imports_done" or not found:
            found.append({})
        found[-1][e["phase"]] = e["since_start_s"]
        if e.get("how"):
            found[-1]["step_made"] = e["how"]
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--model", default="125m")
    parser.add_argument("--global-batch", type=int, default=16)
    parser.add_argument("--timeout-s", type=float, default=150)
    parser.add_argument("--bench", type=Path, help="bench_chip.py's JSON for the same preset (the MFU to agree with)")
    args = parser.parse_args()
    work, cache = Path(tempfile.mkdtemp()), tempfile.mkdtemp()
    logs = args.out.parent
    processes = {
        "uninterrupted": run_trainer(args, work / "a", 6, cache, logs / "trainer-uninterrupted.log"),
        "first_half": run_trainer(args, work / "b", 3, cache, logs / "trainer-first-half.log"),
        "resumed": run_trainer(args, work / "b", 6, cache, logs / "trainer-resumed.log"),
    }
    full = {m["step"]: m["loss"] for m in read_jsonl(work / "a" / "metrics.jsonl")}
    resumed = {m["step"]: m["loss"] for m in read_jsonl(work / "b" / "metrics.jsonl")}
    steps = sorted(set(full) & set(resumed))
    lines = [line for line in (logs / "trainer-uninterrupted.log").read_text(errors="replace").splitlines()
             if line.startswith("completed step: ")]
    line_mfu = [float(m[1]) / 100 for line in lines[1:] if (m := re.search(r"MFU: ([0-9.]+)%", line))]
    bench = None
    if args.bench and args.bench.exists():
        bench = next((r.get("mfu") for r in json.loads(args.bench.read_text())["rows"]
                      if r.get("batch") == args.global_batch and r.get("gradient_accumulation_steps", 1) == 1), None)
    trainer_mfu = statistics.median(line_mfu) if line_mfu else None
    result = {"model": args.model, "global_batch": args.global_batch, "processes": processes,
              "speed_lines": lines, "trainer_mfu": trainer_mfu, "bench_chip_mfu": bench,
              "points_apart": None if trainer_mfu is None or bench is None else round(100 * (trainer_mfu - bench), 2),
              "losses_compared": len(steps), "losses_equal": sum(full[s] == resumed[s] for s in steps),
              "resumed_losses_equal": f"{sum(full[s] == resumed[s] for s in steps if s >= 3)} of "
                                      f"{sum(1 for s in steps if s >= 3)} (steps 3-5, the second process's)",
              "startups": {"uninterrupted": startups(read_jsonl(work / "a" / "events.jsonl")),
                           "first_half_then_resumed": startups(read_jsonl(work / "b" / "events.jsonl"))},
              "resumed_events": read_jsonl(work / "b" / "events.jsonl")[-40:],
              "last_step_records": read_jsonl(work / "a" / "metrics.jsonl")[-3:]}
    args.out.write_text(json.dumps(result, indent=1))
    print(f"trainer: {result['losses_equal']} of {result['losses_compared']} losses equal; MFU {trainer_mfu} against "
          f"bench_chip's {bench}; {processes}")


if __name__ == "__main__":
    main()
