"""`workload status` and `workload events` on 1,024 pods of the real control plane (tools/testcluster:
upstream kube-apiserver, Job and JobSet controllers, Kueue, kwok nodes): latency, API calls, and the time
from `workload create` to every pod Running.

API calls are read from the API server's own counter (`apiserver_request_total` on /metrics, LIST and GET
summed over every client): the controllers' LISTs and GETs during a measurement count too, so a figure is
an upper bound. Baseline, measured in the same run: one GET per pod (a per-pod shell loop).

    .venv/bin/python tools/testcluster up --dir RUN --pools v5litepod-16:256   # 1,024 TPU VMs
    .venv/bin/python bench/bench_status_real.py --cluster RUN [--slices 256] [--tpu-type v5litepod-16]
    .venv/bin/python tools/testcluster down --dir RUN
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from elxpk.cluster.access.connect import connect  # noqa: E402
from elxpk.cluster.access.target import ClusterTarget  # noqa: E402
from elxpk.cluster.records.status import compute_status  # noqa: E402
from elxpk.cluster.verbs.events_feed import snapshot  # noqa: E402
from elxpk.cluster.verbs.observe import fetch_objects, fetch_status  # noqa: E402
from tools.testcluster.kubeapi import PODS, LocalCluster  # noqa: E402

COUNTER = re.compile(r'^apiserver_request_total\{([^}]*)\} (\S+)$')


def reads(cluster: LocalCluster) -> dict[str, float]:
    """The API server's LIST and GET counts so far (every client, every resource)."""
    status, body = cluster.request("GET", "/metrics", content_type="text/plain")
    text = body.get("message", "")
    assert status == 200, text[:300]
    totals = {"LIST": 0.0, "GET": 0.0}
    for line in text.splitlines():
        match = COUNTER.match(line)
        if match:
            verb = re.search(r'verb="([A-Z]+)"', match.group(1))
            if verb and verb.group(1) in totals:
                totals[verb.group(1)] += float(match.group(2))
    return totals


def delta(after: dict[str, float], before: dict[str, float]) -> str:
    return ", ".join(f"{verb} {after[verb] - before[verb]:.0f}" for verb in before)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cluster", required=True, help="run directory of `tools/testcluster up`")
    parser.add_argument("--tpu-type", default="v5litepod-16")
    parser.add_argument("--slices", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--keep", action="store_true", help="leave the workload running, and use one left by "
                        "an earlier --keep run instead of creating it (create-to-Running is then not measured)")
    args = parser.parse_args()
    cluster = LocalCluster.from_run_dir(Path(args.cluster))
    elxpk = [str(Path(sys.executable).with_name("elxpk"))]
    kubeconfig = ["--kubeconfig", str(cluster.kubeconfig)]
    name, selector = "bench", "jobset.sigs.k8s.io/jobset-name=bench"

    start = time.perf_counter()
    reused = args.keep and subprocess.run([*elxpk, "workload", "status", name, *kubeconfig],
                                          capture_output=True).returncode == 0
    if not reused:
        subprocess.run([*elxpk, "workload", "create", "--workload", name, f"--tpu-type={args.tpu_type}",
                        f"--num-slices={args.slices}", "--no-pathways", "--command", "python3 train.py",
                        *kubeconfig], check=True, capture_output=True)
    pods: list[dict] = []
    while True:
        pods = cluster.items(PODS.format(ns="default"), labelSelector=selector)
        running = sum(1 for p in pods if p["status"].get("phase") == "Running")
        if pods and running == len(pods) and running >= args.slices:
            break
        time.sleep(2)
    to_running = time.perf_counter() - start

    kube = connect(ClusterTarget(kubeconfig=str(cluster.kubeconfig)))
    before = reads(cluster)
    time.sleep(1.0)
    idle_calls = delta(reads(cluster), before)  # the controllers' own reads, for scale
    before = reads(cluster)
    start = time.perf_counter()
    status = fetch_status(kube, "default", name, now=time.time())
    cold = time.perf_counter() - start
    cold_calls = delta(reads(cluster), before)
    warm_times = []
    for _ in range(args.repeat):
        before = reads(cluster)
        start = time.perf_counter()
        fetch_status(kube, "default", name, now=time.time())
        warm_times.append(time.perf_counter() - start)
        warm_calls = delta(reads(cluster), before)
    every_pod_times = []
    for _ in range(args.repeat):  # the baseline of this run: status as it read before, every pod in full
        before = reads(cluster)
        start = time.perf_counter()
        compute_status(*fetch_objects(kube, "default", name), now=time.time())
        every_pod_times.append(time.perf_counter() - start)
        every_pod_calls = delta(reads(cluster), before)
    before = reads(cluster)
    start = time.perf_counter()
    incidents, _ = snapshot(kube, "default", name)
    events_s = time.perf_counter() - start
    events_calls = delta(reads(cluster), before)
    before = reads(cluster)
    start = time.perf_counter()
    for pod in pods:
        kube.request("GET", f"/api/v1/namespaces/default/pods/{pod['metadata']['name']}", verb="get",
                     what=pod["metadata"]["name"])
    naive = time.perf_counter() - start
    naive_calls = delta(reads(cluster), before)
    start = time.perf_counter()
    subprocess.run([*elxpk, "workload", "status", name, "-o", "json", *kubeconfig], check=True, capture_output=True)
    cli = time.perf_counter() - start
    if not args.keep:
        subprocess.run([*elxpk, "workload", "delete", name, "--yes", *kubeconfig], check=False, capture_output=True)

    warm = statistics.median(warm_times)
    print(f"workload: {args.slices} slices of {args.tpu_type} = {len(pods)} pods, all Running "
          + ("(an earlier run's, reused)" if reused else f"{to_running:.1f}s after `workload create`"))
    print(f"state: {status.state}, slices healthy {status.slices_healthy}/{status.slices_total}")
    print(f"background (no elxpk call, 1 s; each figure below also counts this /metrics read): {idle_calls}")
    print(f"status, first call of a process: {cold:.3f}s; API server reads: {cold_calls}")
    print(f"status, steady state (median of {args.repeat}): {warm:.3f}s; API server reads: {warm_calls}")
    every_pod = statistics.median(every_pod_times)
    print(f"status reading every pod in full (as before; median of {args.repeat}): {every_pod:.3f}s; API server "
          f"reads: {every_pod_calls}; ratio to status now: {every_pod / warm:.1f}x")
    print(f"events snapshot: {events_s:.3f}s; API server reads: {events_calls}; {len(incidents)} incidents")
    print(f"baseline, one GET per pod: {naive:.3f}s; API server reads: {naive_calls}")
    print(f"ratio baseline/status: {naive / warm:.1f}x time")
    print(f"whole CLI in a fresh process (`elxpk workload status {name} -o json`): {cli:.2f}s")
    print(f"target <= 0.3 s steady state: {'met' if warm <= 0.3 else 'MISSED'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
