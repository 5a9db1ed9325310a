"""`elxpk workload create --kubeconfig` submits every golden through the real API server, the JobSet webhook
and Kueue; the JobSet controller creates every child Job, and kwok runs every pod on nodes shaped like an
xpk Pathways cluster (node selectors and exclusive placement really scheduled)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.launcher.cases import CASES
from tools.testcluster.kubeapi import JOBS, JOBSETS, PODS, LocalCluster

ELXPK = Path(sys.executable).parent / "elxpk"
GKE_FLAGS = ("--project=", "--zone=", "--cluster=", "--workload=")
# Names at the length limits (docs/launcher.md): Pathways up to 22 characters (coordinator label of 63),
# --no-pathways up to the longest pod name of 63.
LONG_NAMES = {
    "long-name-pathways": ["--workload=llama3-70b-pretrain-01", "--command", "bash hello", "--tpu-type=v5p-8",
                           "--num-slices=1"],
    "long-name-multi-controller": ["--workload=" + "m" * 40, "--tpu-type=v6e-16", "--num-slices=2",
                                   "--no-pathways", "--command", "python3 train.py"],
}


def create_args(name: str, index: int) -> list[str]:
    if name in LONG_NAMES:
        return LONG_NAMES[name]
    return [f"--workload=golden-{index}", *(a for a in CASES[name] if not a.startswith(GKE_FLAGS))]


def elxpk(*argv: str, cluster: LocalCluster, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    return subprocess.run([str(ELXPK), *argv, "--kubeconfig", str(cluster.kubeconfig)], capture_output=True,
                          text=True, timeout=timeout, env=env, check=False)


def option(argv: list[str], flag: str, default: str) -> str:
    for i, arg in enumerate(argv):
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
        if arg == flag:
            return argv[i + 1]
    return default


@pytest.mark.parametrize("name", [*CASES, *LONG_NAMES])
def test_create_submits_and_every_pod_runs(name: str, testcluster: LocalCluster) -> None:
    argv = create_args(name, list(CASES).index(name) if name in CASES else 99)
    workload = option(argv, "--workload", "")
    namespace = option(argv, "--namespace", "default")
    testcluster.remove_jobset(namespace, workload)
    done = elxpk("workload", "create", *argv, cluster=testcluster)
    assert done.returncode == 0, done.stderr
    try:
        status, jobset = testcluster.request("GET", JOBSETS.format(ns=namespace) + "/" + workload)
        assert status == 200, jobset
        replicated = jobset["spec"]["replicatedJobs"]
        selector = f"jobset.sigs.k8s.io/jobset-name={workload}"
        want_jobs = sum(r["replicas"] for r in replicated)
        want_pods = sum(r["replicas"] * r["template"]["spec"].get("parallelism", 1) for r in replicated)
        testcluster.wait_for(f"{want_jobs} Jobs of {workload}", lambda: len(
            testcluster.items(JOBS.format(ns=namespace), labelSelector=selector)) == want_jobs)
        running = testcluster.wait_for(f"{want_pods} running pods of {workload}", lambda: (
            pods if len(pods := [p for p in testcluster.items(PODS.format(ns=namespace), labelSelector=selector)
                                 if p["status"].get("phase") == "Running"]) == want_pods else None))
        by_job: dict[str, set[str]] = {}
        for pod in running:
            pool = node_pool(testcluster, pod["spec"]["nodeName"])
            by_job.setdefault(pod["metadata"]["labels"]["jobset.sigs.k8s.io/job-key"], set()).add(pool)
        pools = [next(iter(p)) for p in by_job.values()]
        assert all(len(p) == 1 for p in by_job.values()), f"a Job's pods span node pools: {by_job}"
        assert len(pools) == len(set(pools)), f"two Jobs share a node pool (exclusive placement): {by_job}"
    finally:
        testcluster.remove_jobset(namespace, workload)


def node_pool(cluster: LocalCluster, node: str) -> str:
    status, body = cluster.request("GET", f"/api/v1/nodes/{node}")
    assert status == 200, body
    return str(body["metadata"]["labels"]["cloud.google.com/gke-nodepool"])
