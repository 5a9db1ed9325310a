"""The 20-round soak of issue #20 on the real control plane (tools/testcluster), both modes, as a user runs it:
`elxpk workload events NAME --watch --record FILE` in one process while `elxpk workload kill-slice NAME
--slice random --repeat 20 --mode delete`, then `--mode evict`, runs in another; the workload then finishes,
the recorder ends by itself, and the record file is read back.

What was taken down is known without elxpk: the Job controller's `SuccessfulCreate` Events name every pod it
made; every one but those running at the end went down (a round, or a JobSet restart a round caused). Printed:
recoveries per mode, incidents recorded and missing, JobSet restarts recorded and dated, recovery p50/p95.

Why 64 slices: the Job controller waits before replacing a failed pod, 10 s doubled for each earlier failed pod
of the same Job (an evicted pod counts though the podFailurePolicy ignores it), so 20 evictions of 2 slices
would wait about an hour; random slices of 64 rarely hit one Job twice. tests/realcluster/test_soak.py runs
the 20 delete rounds in CI, and 2 evict rounds.

    .venv/bin/python tools/testcluster up --dir RUN --pools v5p-8:64
    .venv/bin/python bench/bench_soak_real.py --cluster RUN [--slices 64] [--rounds 20]
    .venv/bin/python tools/testcluster down --dir RUN
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tools.testcluster.kubeapi import PODS, LocalCluster  # noqa: E402
from tools.testcluster.soak_record import pods_created, start_recorder  # noqa: E402

NAME = "soak-bench"
SELECTOR = f"jobset.sigs.k8s.io/jobset-name={NAME}"
# a round's pods ready (this workload runs no trainer, so no trainer's next step is the recovery to read)
SECONDS = re.compile(r"pods ready after ([0-9.]+)(ms|s|m)")


def running_pods(cluster: LocalCluster) -> set[str]:
    return {p["metadata"]["name"] for p in cluster.items(PODS.format(ns="default"), labelSelector=SELECTOR)
            if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")}


def soak(elxpk: list[str], mode: str, rounds: int, seed: int) -> tuple[int, list[float], float]:
    """(rounds recovered, recovery seconds of each, wall seconds) of one `kill-slice --repeat` run."""
    started = time.perf_counter()
    done = subprocess.run([*elxpk[:1], "workload", "kill-slice", NAME, "--slice", "random", "--seed", str(seed),
                           "--mode", mode, "--repeat", str(rounds), "--every", "0s", "--poll", "0.5s",
                           "--timeout", "15m", "--yes", *elxpk[1:]], capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    if done.returncode not in (0, 1):
        sys.exit(f"kill-slice --mode {mode}: exit {done.returncode}: {done.stderr.strip()[-500:]}")
    times = [float(n) * {"ms": 0.001, "s": 1, "m": 60}[unit] for n, unit in SECONDS.findall(done.stdout)]
    recovered = sum(1 for line in done.stdout.splitlines() if line.startswith("round ") and "NOT recovered" not in line)
    return recovered, times, wall


def nearest_rank(times: list[float], q: float) -> float:
    ordered = sorted(times)
    return ordered[max(int(-(-q * len(ordered) // 100)) - 1, 0)] if ordered else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cluster", required=True, help="run directory of `tools/testcluster up`")
    parser.add_argument("--slices", type=int, default=64, help="v5p-8 slices (the cluster needs as many pools)")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    cluster = LocalCluster.from_run_dir(Path(args.cluster))
    elxpk = [str(Path(sys.executable).with_name("elxpk")), "--kubeconfig", str(cluster.kubeconfig)]
    record = Path(tempfile.mkdtemp(prefix="soak-bench-")) / "incidents.jsonl"

    def run(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run([elxpk[0], *argv, *elxpk[1:]], capture_output=True, text=True, check=False)

    run("workload", "delete", NAME, "--yes")
    made = run("workload", "create", f"--workload={NAME}", "--tpu-type=v5p-8", f"--num-slices={args.slices}",
               "--no-pathways", f"--max-restarts={args.rounds + 5}", "--command", "python3 train.py")
    if made.returncode != 0:
        sys.exit(f"workload create: {made.stderr.strip()}")
    if run("workload", "wait", NAME, "--for", "running", "--timeout", "10m").returncode != 0:
        sys.exit(f"{NAME} is not running within 10 minutes")
    recorder = start_recorder(cluster, NAME, record)
    try:
        results = {}
        down: dict[str, set[str]] = {}
        before = set()
        for mode, seed in (("delete", args.seed), ("evict", args.seed + 1)):
            results[mode] = soak(elxpk, mode, args.rounds, seed)
            down[mode] = set(pods_created(cluster, NAME)) - running_pods(cluster) - before
            before |= down[mode]
        finished = cluster.items(PODS.format(ns="default"), labelSelector=SELECTOR)
        for pod in finished:
            cluster.request("PATCH", PODS.format(ns="default") + "/" + pod["metadata"]["name"],
                            {"metadata": {"annotations": {"testcluster.elxpk.dev/exit-code": "0"}}},
                            content_type="application/merge-patch+json")
        started = time.perf_counter()
        recorder.wait(timeout=600)
        ended_after = time.perf_counter() - started
    finally:
        if recorder.poll() is None:
            recorder.kill()
            recorder.wait()
        run("workload", "delete", NAME, "--yes")

    incidents = [json.loads(line) for line in record.read_text().splitlines()]
    exits = {i["pod"] for i in incidents if i["kind"] == "exit" and i["exit_code"] == 137}
    disrupted = {i["pod"] for i in incidents if i["kind"] == "disruption" and i["reason"] == "EvictionByEvictionAPI"}
    restarts = [i for i in incidents if i["kind"] == "jobset_restart"]
    print(f"workload: {args.slices} slices of v5p-8; {args.rounds} rounds a mode; record {record}")
    for mode, (recovered, times, wall) in results.items():
        seen = exits if mode == "delete" else disrupted
        missing = down[mode] - seen
        print(f"{mode}: recoveries {recovered}/{args.rounds}; pods taken down {len(down[mode])}, in the record "
              f"{len(down[mode] & seen)}, missing {len(missing)}; recovery p50 {nearest_rank(times, 50):.1f}s "
              f"p95 {nearest_rank(times, 95):.1f}s; {wall:.0f}s for the soak")
    print(f"JobSet restarts recorded: {len(restarts)} (dated {sum(1 for i in restarts if i['time'])})")
    print(f"incidents in the record: {len(incidents)} ({len({i['id'] for i in incidents})} distinct ids)")
    err = Path(f"{record}.err").read_text().strip()
    print(f"recorder: exit {recorder.returncode}, ended {ended_after:.0f}s after the pods were told to finish"
          + (f"; {err.splitlines()[-1]}" if err else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
