"""How long `workload status` takes on a big elastic workload, and how many API calls it makes.

64 slices x 16 VMs = 1,024 worker pods (plus the Pathways head) on the fake API server, over real HTTP with
the real kubernetes client. Status must answer in <= 1 s from a bounded number of label-selector LISTs;
`workload events` (the same LISTs plus one of Events) is timed too.
Baseline, measured in the same run: the naive approach of one GET per pod (a per-pod shell loop).

    .venv/bin/python bench/bench_status.py [--slices 64] [--vms 16] [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from elxpk.cluster.connect import connect  # noqa: E402
from elxpk.cluster.observe import fetch_status  # noqa: E402
from elxpk.cluster.target import ClusterTarget  # noqa: E402
from tests.cluster.conftest import FakeClock, pathways_jobset, scripted, seed_cluster  # noqa: E402
from tests.support.fake_apiserver import start_fake  # noqa: E402

CRD = ROOT / "elxpk" / "crds" / "jobset.x-k8s.io_jobsets.yaml"  # the vendored CRD (the repository stands alone)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slices", type=int, default=64)
    parser.add_argument("--vms", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    clock = FakeClock()
    server = start_fake(crd_file=CRD, clock=clock)
    seed_cluster(server)
    setup = time.perf_counter()
    ctl = scripted(server, clock, pathways_jobset("big", slices=args.slices, vms=args.vms, backoff=args.vms * 4))
    ctl.queue()
    ctl.admit()
    ctl.run()
    ctl.crash_slice(7)  # one slice down, so the answer is Degraded and the slice table is non-trivial
    setup = time.perf_counter() - setup
    pods = len(ctl.pods())
    with tempfile.TemporaryDirectory() as tmp:
        kube = connect(ClusterTarget(kubeconfig=str(server.write_kubeconfig(Path(tmp) / "kubeconfig"))))
        # Cold: the first status of a process (includes Kueue discovery and the connection set-up).
        calls0 = len(server.calls)
        start = time.perf_counter()
        status = fetch_status(kube, "default", "big", now=clock())
        cold = time.perf_counter() - start
        cold_calls = len(server.calls) - calls0
        warm_times = []
        for _ in range(args.repeat):
            calls0 = len(server.calls)
            start = time.perf_counter()
            fetch_status(kube, "default", "big", now=clock())
            warm_times.append(time.perf_counter() - start)
            warm_calls = len(server.calls) - calls0
        # `workload events`: the same LISTs plus the namespace's Events, every pod's incidents computed.
        from elxpk.cluster.events_feed import snapshot

        calls0 = len(server.calls)
        start = time.perf_counter()
        incidents, _ = snapshot(kube, "default", "big")
        events_s = time.perf_counter() - start
        events_calls = len(server.calls) - calls0
        # Baseline: one GET per pod, as a per-pod loop would do, on the same server in the same run.
        names = [p["metadata"]["name"] for p in ctl.pods()]
        calls0 = len(server.calls)
        start = time.perf_counter()
        for name in names:
            kube.request("GET", f"/api/v1/namespaces/default/pods/{name}", verb="get", what=name)
        naive = time.perf_counter() - start
        naive_calls = len(server.calls) - calls0
        # The whole CLI in a fresh process (interpreter start, imports, connect, status, JSON out).
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "elxpk.cli.main", "workload", "status", "big", "-o", "json",
                        "--kubeconfig", str(Path(tmp) / "kubeconfig")], check=True, capture_output=True, cwd=ROOT)
        cli = time.perf_counter() - start
    server.stop()

    warm = statistics.median(warm_times)
    print(f"workload: {args.slices} slices x {args.vms} VMs = {pods} pods (incl. head); setup {setup:.1f}s")
    print(f"state: {status.state}, slices healthy {status.slices_healthy}/{status.slices_total}")
    print(f"status, first call of a process: {cold:.3f}s with {cold_calls} API calls")
    print(f"status, steady state (median of {args.repeat}): {warm:.3f}s with {warm_calls} API calls")
    print(f"events snapshot: {events_s:.3f}s with {events_calls} API calls, {len(incidents)} incidents")
    print(f"baseline, one GET per pod: {naive:.3f}s with {naive_calls} API calls")
    print(f"ratio baseline/status: {naive / warm:.1f}x time, {naive_calls / warm_calls:.0f}x calls")
    print(f"whole CLI in a fresh process (`elxpk workload status big -o json`): {cli:.2f}s")
    target_ok = cold <= 1.0
    print(f"target <= 1 s for the first call: {'met' if target_ok else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
