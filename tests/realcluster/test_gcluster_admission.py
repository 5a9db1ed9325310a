"""gcluster's renders and elxpk's render of the same commands (docs/gcluster.md) through the real API server,
the JobSet webhook and the Job and pod rules: every one is admitted as a JobSet, as the Job the JobSet
controller makes of each replicatedJob, and as that Job's pod (server-side dry runs)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.launcher.gcluster_cases import CASES
from tools.testcluster.kubeapi import LocalCluster, server_verdict

ELXPK = Path(sys.executable).parent / "elxpk"
RENDERS = Path(__file__).parents[1] / "launcher" / "gcluster_renders"
SERVICE_ACCOUNTS = "/api/v1/namespaces/{ns}/serviceaccounts"
NAMESPACES = "/api/v1/namespaces"


def elxpk_render(name: str, *extra: str, argv: list[str] | None = None) -> dict:
    """elxpk's render of the case (its xpk-spelled command, or `argv`), through the console script."""
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    argv = CASES[name].elxpk if argv is None else argv
    done = subprocess.run([str(ELXPK), "workload", "create", *argv, *extra, "--dry-run"],
                          capture_output=True, text=True, timeout=120, env=env, check=False)
    assert done.returncode == 0, done.stderr
    return yaml.safe_load(done.stdout)


def gcluster_render(name: str) -> dict:
    return yaml.safe_load((RENDERS / f"{name}.yaml").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def xpk_service_account(testcluster: LocalCluster) -> None:
    """The service account `xpk cluster create` makes, which elxpk's GPU pods name (as xpk's do)."""
    status, body = testcluster.request("POST", SERVICE_ACCOUNTS.format(ns="default"),
                                       {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "xpk-sa"}})
    assert status in (201, 409), body


@pytest.mark.parametrize("name", sorted(CASES))
def test_gclusters_render_is_admitted_as_jobset_jobs_and_pods(name: str, testcluster: LocalCluster) -> None:
    assert server_verdict(testcluster, gcluster_render(name)) == []


@pytest.mark.parametrize("name", sorted(CASES))
def test_elxpks_render_of_the_same_command_is_admitted(name: str, testcluster: LocalCluster,
                                                       xpk_service_account: None) -> None:
    assert server_verdict(testcluster, elxpk_render(name)) == []


def test_on_a_cluster_without_xpks_service_account_only_the_gpu_pod_naming_it_is_refused(
        testcluster: LocalCluster) -> None:
    """A Cluster Toolkit cluster has no `xpk-sa`. In a namespace without it, elxpk's GPU render in xpk's
    spellings (which names xpk-sa, as xpk's does) has its JobSet and Job admitted and its pod refused; the
    same command in gcluster's spellings names no service account, as gcluster's own render, and both are
    admitted. The cluster, not a check of ours, says so."""
    namespace = "gcluster-made"
    status, body = testcluster.request("POST", NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                                            "metadata": {"name": namespace}})
    assert status in (201, 409), body
    xpk_spelled = [a for a in CASES["gpu-a3-highgpu-8g"].elxpk if not a.startswith("--service-account")]
    ours = elxpk_render("gpu-a3-highgpu-8g", f"--namespace={namespace}", argv=xpk_spelled)
    theirs = gcluster_render("gpu-a3-highgpu-8g")
    theirs["metadata"]["namespace"] = namespace
    refused = server_verdict(testcluster, ours)
    assert len(refused) == 1 and refused[0].startswith("pod of slice-job 403") and "xpk-sa" in refused[0], refused
    assert server_verdict(testcluster, theirs) == []
    gcluster_spelled = elxpk_render("gpu-a3-highgpu-8g", f"--gke-namespace={namespace}",
                                    argv=CASES["gpu-a3-highgpu-8g"].gcluster)
    assert server_verdict(testcluster, gcluster_spelled) == []


def test_gclusters_render_of_ml_auto_solutions_1369_is_admitted_as_jobset_and_refused_as_the_workers_job(
        testcluster: LocalCluster) -> None:
    """--restart-on-exit-codes with --pathways: the API server and the JobSet webhook admit the JobSet, and
    the Job the JobSet controller makes of the workers is refused, naming the field; the head's Job and pod
    are admitted, which is how the head came to run alone."""
    refused = server_verdict(testcluster, gcluster_render("pathways-restart-on-exit-codes"))
    assert len(refused) == 1, refused
    assert refused[0].startswith("Job of worker 422") and "spec.template.spec.restartPolicy" in refused[0]
    assert 'only "Never" is supported when podFailurePolicy is specified' in refused[0]
