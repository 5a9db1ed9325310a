"""What a person waits for: a whole-process `elxpk workload status NAME` against `elxpk --version`, side by
side in one run (#33: the goal is status within 2x --version on a quiet machine).

Rounds alternate the two commands (and a bare `python -c "import kubernetes"` for scale), so load that
comes and goes hits both alike; prints the median of each, the ratio, and the load average before and
after. Needs a cluster (tools/testcluster up) and makes one small workload on it unless --name is given.

    python bench/bench_status_start.py --cluster /tmp/tc [--rounds 15] [--name WORKLOAD]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ELXPK = Path(sys.executable).parent / "elxpk"


def timed(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.strip()[-300:]}")
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cluster", required=True, help="run directory of tools/testcluster up")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--name", default=None, help="an existing workload (default: make bench-start)")
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    kubeconfig = ["--kubeconfig", str(Path(args.cluster) / "kubeconfig")]
    name = args.name or "bench-start"
    if args.name is None:
        subprocess.run([str(ELXPK), "workload", "delete", name, *kubeconfig], capture_output=True, env=env,
                       check=False)
        timed([str(ELXPK), "workload", "create", f"--workload={name}", "--tpu-type=v5p-8", "--num-slices=1",
               "--no-pathways", "--command", "python3 t.py", *kubeconfig], env)
    commands = {"elxpk --version": [str(ELXPK), "--version"],
                "elxpk workload status": [str(ELXPK), "workload", "status", name, *kubeconfig],
                "python -c 'import kubernetes'": [sys.executable, "-c", "import kubernetes"]}
    times: dict[str, list[float]] = {label: [] for label in commands}
    load_before = os.getloadavg()
    for _ in range(args.rounds):
        for label, argv in commands.items():
            times[label].append(timed(argv, env))
    load_after = os.getloadavg()
    medians = {label: statistics.median(values) for label, values in times.items()}
    for label, median in medians.items():
        print(f"{label:<32} median {median:6.3f} s  (min {min(times[label]):.3f}, max {max(times[label]):.3f})")
    ratio = medians["elxpk workload status"] / medians["elxpk --version"]
    print(f"status / --version: {ratio:.2f}x over {args.rounds} rounds; load average "
          f"{load_before[0]:.1f} before, {load_after[0]:.1f} after; {os.cpu_count()} CPUs")
    if args.name is None:
        subprocess.run([str(ELXPK), "workload", "delete", name, *kubeconfig], capture_output=True, env=env,
                       check=False)


if __name__ == "__main__":
    main()
