"""GPU renders (docs/gpu.md) through the real API server and the JobSet webhook: every machine type is
admitted as a JobSet, as the Job the JobSet controller makes of it, and as that Job's pod (server-side dry
runs), as xpk's own render is; one is submitted by `elxpk workload create --kubeconfig`, the JobSet
controller creates its Job, and `workload status` reads it as one slice held by Kueue."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from elxpk.catalog import GPU_TYPES
from tools.testcluster.kubeapi import JOBS, JOBSETS, LocalCluster, server_verdict

ELXPK = Path(sys.executable).parent / "elxpk"
SERVICE_ACCOUNTS = "/api/v1/namespaces/{ns}/serviceaccounts"


def elxpk(*argv: str, cluster: LocalCluster) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    return subprocess.run([str(ELXPK), *argv, "--kubeconfig", str(cluster.kubeconfig)], capture_output=True,
                          text=True, timeout=120, env=env, check=False)


def gpu_args(workload: str, device_type: str) -> list[str]:
    return ["workload", "create", f"--workload={workload}", f"--device-type={device_type}", "--num-nodes=2",
            "--docker-image=gcr.io/p/img:1", "--command", "python3 train.py"]


@pytest.fixture(scope="module")
def xpk_service_account(testcluster: LocalCluster) -> None:
    """The service account `xpk cluster create` makes, which the GPU pods name."""
    status, body = testcluster.request("POST", SERVICE_ACCOUNTS.format(ns="default"),
                                       {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "xpk-sa"}})
    assert status in (201, 409), body


@pytest.mark.parametrize("device_type", [g.name for g in GPU_TYPES])
def test_every_gpu_render_is_admitted_as_jobset_job_and_pod(device_type, testcluster, xpk_service_account):
    done = elxpk(*gpu_args("gpu-verdict", device_type), "--dry-run", cluster=testcluster)
    assert done.returncode == 0, done.stderr
    assert server_verdict(testcluster, yaml.safe_load(done.stdout)) == []


@pytest.mark.parametrize("device_type", [g.name for g in GPU_TYPES])
def test_xpks_own_gpu_render_is_admitted_too(device_type, testcluster, xpk_service_account):
    """The oracle for `workload validate` passing it (tests/launcher/test_validate_xpk_gpu.py): the API server
    prunes its `nodeSelector: null`, JobSet's webhook names its unnamed failure rule."""
    xpk = Path(__file__).parents[1] / "launcher" / "xpk_gpu" / f"{device_type}.yaml"
    assert server_verdict(testcluster, yaml.safe_load(xpk.read_text(encoding="utf-8"))) == []


def test_a_gpu_workload_is_created_and_its_job_follows(testcluster, xpk_service_account):
    testcluster.remove_jobset("default", "gpu-submit")
    done = elxpk(*gpu_args("gpu-submit", "h200-141gb-8"), cluster=testcluster)
    assert done.returncode == 0, done.stderr
    try:
        status, jobset = testcluster.request("GET", JOBSETS.format(ns="default") + "/gpu-submit")
        assert status == 200, jobset
        jobs = testcluster.wait_for("the node group's Job", lambda: testcluster.items(
            JOBS.format(ns="default"), labelSelector="jobset.sigs.k8s.io/jobset-name=gpu-submit"))
        assert [j["spec"]["parallelism"] for j in jobs] == [2]
        pod = jobs[0]["spec"]["template"]["spec"]
        assert pod["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "8"}
        assert pod["nodeSelector"] == {"cloud.google.com/gke-accelerator": "nvidia-h200-141gb"}
        # `status` reads the node group as one slice, and Kueue's answer: this cluster's GPU flavors are its
        # GPU pools' (h100-80gb-8 by default), and none has the h200 nodes this workload selects.
        status_run = elxpk("workload", "status", "gpu-submit", "-o", "json", cluster=testcluster)
        assert status_run.returncode == 0, status_run.stderr
        report = json.loads(status_run.stdout)
        assert [(s["job"], s["expected"]) for s in report["slices"]] == [("gpu-submit-slice-job-0", 2)]
        assert report["state"] == "Queued", report
        assert "couldn't assign flavors" in report["admission_message"], report["admission_message"]
    finally:
        testcluster.remove_jobset("default", "gpu-submit")
