"""`plan --simulate`: the whole-array simulator against the failure-by-failure loop it replaced, in one run.

The baseline is the old code itself (tests/planner/test_simulate_vectorized.py keeps it as the reference),
run on the same cases with the same seeds; every pair's figures must be bitwise equal, and each case prints
new / old CPU seconds (the figure a shared machine's load changes least) and wall seconds, medians of
--repeats. Exit 1 if any pair differs.

    .venv/bin/python bench/bench_simulate.py [--repeats 3] [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

# (label, num_slices, slice MTBF days, Weibull shape, trials): the bench_plan case, the case at the
# largest --simulate it accepts, and the slow test's 100,000 slices at shape 0.1 (fewer trials: the old loop
# takes about 5 CPU s a trial there).
CASES = [
    ("32 slices, 30d, exponential", 32, 30, 1.0, 10_000),
    ("32 slices, 30d, Weibull 0.7", 32, 30, 0.7, 10_000),
    ("10,000 slices, 10d, exponential (issue)", 10_000, 10, 1.0, 713),
    ("100,000 slices, 30d, Weibull 0.1", 100_000, 30, 0.1, 3),
]


def _timed(fn, repeats: int) -> tuple[float, float, object]:
    cpu, wall = [], []
    for _ in range(repeats):
        c0, w0 = time.process_time(), time.perf_counter()
        out = fn()
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    return statistics.median(cpu), statistics.median(wall), out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="a tenth of the trials in every case")
    args = parser.parse_args()
    import os

    from elxpk.plan.model import Costs
    from elxpk.plan.simulate import check_plan
    from tests.planner.test_simulate_vectorized import reference_simulator

    check_plan(Costs(4, 86400.0, 2.5, 5.0, 30.0, 60.0), 5, trials=2, shape=1.0, seed=1)  # imports, first touches
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    print(f"{'case':44} {'trials':>7} {'new cpu s':>10} {'old cpu s':>10} {'new/old':>8} {'wall new/old':>13}  same")
    all_same = True
    for label, slices, mtbf_days, shape, trials in CASES:
        trials = max(1, trials // 10) if args.quick else trials
        costs = Costs(slices, mtbf_days * 86400.0, 2.5, 5.0, 30.0, 60.0)

        def run(costs: Costs = costs, shape: float = shape, trials: int = trials) -> dict:
            return check_plan(costs, 5, trials=trials, shape=shape, seed=1)
        new_cpu, new_wall, new = _timed(run, args.repeats)
        with reference_simulator():
            old_cpu, old_wall, old = _timed(run, args.repeats)
        same = repr(new) == repr(old)  # repr round-trips every float: equal reprs, equal bits (NaN included)
        all_same &= same
        print(f"{label:44} {trials:7,} {new_cpu:10.3f} {old_cpu:10.3f} {new_cpu / old_cpu:8.3f} "
              f"{new_wall / old_wall:13.3f}  {'yes' if same else 'NO'}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0 if all_same else 1


if __name__ == "__main__":
    sys.exit(main())
