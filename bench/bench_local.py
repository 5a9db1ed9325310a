"""Recovery time and goodput of `elxpk local run`: in-process (pause-resume) vs multi-controller group restart.

Both runs use the same model, steps, checkpoint period and kill, in this same invocation, so the machine's
load affects both; the figure to read is the ratio. Recovery time is failure -> first new step, from
events.jsonl (elxpk report's timeline).

    .venv/bin/python bench/bench_local.py [--steps 150] [--kill 70] [--period 25] [--repeats 1]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def run_mode(mode: str, root: Path, args, index: int) -> dict:
    run_dir = root / f"{mode}-{index}"
    cmd = [sys.executable, "-m", "elxpk.cli.main", "local", "run", "--run-dir", str(run_dir), "--mode", mode,
           "--steps", str(args.steps), "--checkpoint-period", str(args.period), "--kill-slice",
           f"1@{args.kill}", "--revive-after", "0", "--plain"]
    started = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    elapsed = time.perf_counter() - started
    report = json.loads(subprocess.run([sys.executable, "-m", "elxpk.cli.main", "report", str(run_dir), "-o",
                                        "json", "--no-png"], check=True, capture_output=True, text=True).stdout)
    (rec,) = report["recoveries"]
    return {
        "mode": mode,
        "command_s": elapsed,
        "recovery_s": rec["first_step_s"],
        "slices_ready_s": rec["slices_ready_s"],
        "restore_s": rec["restore_s"],
        "rewound_steps": rec["rewound_steps"],
        "goodput": report["goodput"],
        "wall_s": report["wall_s"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--kill", type=int, default=70)
    parser.add_argument("--period", type=int, default=25)
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    results: dict[str, list[dict]] = {"pause-resume": [], "multi-controller": []}
    with tempfile.TemporaryDirectory(prefix="elxpk-bench-") as tmp:
        for i in range(args.repeats):
            for mode in results:  # interleaved, so drifting load hits both alike
                results[mode].append(run_mode(mode, Path(tmp), args, i))
    print(f"steps {args.steps}, kill slice 1 at step {args.kill}, checkpoint period {args.period}, "
          f"repeats {args.repeats} (medians)")
    print(f"{'mode':<18}{'recovery s':>11}{'slices ready s':>15}{'restore s':>10}{'rewound':>8}"
          f"{'goodput':>9}{'wall s':>8}")
    med = {}
    for mode, rows in results.items():
        m = {k: statistics.median(r[k] for r in rows) for k in rows[0] if k != "mode"}
        med[mode] = m
        print(f"{mode:<18}{m['recovery_s']:>11.2f}{m['slices_ready_s']:>15.2f}{m['restore_s']:>10.2f}"
              f"{m['rewound_steps']:>8.0f}{100 * m['goodput']:>8.1f}%{m['wall_s']:>8.1f}")
    ratio = med["multi-controller"]["recovery_s"] / med["pause-resume"]["recovery_s"]
    print(f"multi-controller group restart / in-process recovery time: {ratio:.1f}x")


if __name__ == "__main__":
    main()
