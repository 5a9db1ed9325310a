"""Fixtures for cluster tests: a fake API server per test, a kubeconfig pointing at it, a fake clock."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.fake_apiserver import FakeApiServer, start_fake

START = 1_780_000_000.0  # a fixed wall-clock origin for object timestamps


@dataclass
class FakeClock:
    """Injected clock: `sleep` advances time and runs `on_sleep` (e.g. one controller step)."""

    now: float = START
    slept: list[float] = field(default_factory=list)
    on_sleep: list = field(default_factory=list)

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds
        if self.on_sleep:
            step = self.on_sleep.pop(0)
            step()


@pytest.fixture()
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture()
def jobset_crd(crd_dir: Path) -> Path:
    return crd_dir / "jobset.x-k8s.io_jobsets.yaml"


@pytest.fixture()
def fake(jobset_crd: Path, clock: FakeClock) -> Iterator[FakeApiServer]:
    server = start_fake(crd_file=jobset_crd, clock=clock, token="test-token")
    seed_cluster(server)
    yield server
    server.stop()


@pytest.fixture()
def kubeconfig(fake: FakeApiServer, tmp_path: Path) -> Path:
    return fake.write_kubeconfig(tmp_path / "kubeconfig.yaml")


@pytest.fixture()
def kube(kubeconfig: Path, clock: FakeClock):  # noqa: ANN201
    from elxpk.cluster.access.connect import connect
    from elxpk.cluster.access.target import ClusterTarget

    return connect(ClusterTarget(kubeconfig=str(kubeconfig)), sleep=lambda s: None)


def seed_cluster(server: FakeApiServer, *, cpu_np: bool = True) -> None:
    """What an xpk-created Pathways cluster has: PriorityClasses, a LocalQueue, a cpu-np node."""
    store = server.store
    for value, name in ((100, "very-low"), (250, "low"), (500, "medium"), (750, "high"), (1000, "very-high")):
        store.create(("scheduling.k8s.io", "priorityclasses"), {"metadata": {"name": name}, "value": value})
    store.create(("kueue.x-k8s.io", "localqueues"), {
        "metadata": {"name": "multislice-queue", "namespace": "default"}, "spec": {"clusterQueue": "cluster-queue"}})
    if cpu_np:
        store.create(("", "nodes"), {"metadata": {"name": "gke-cpu-np-1", "labels": {
            "cloud.google.com/gke-nodepool": "cpu-np"}}})


def pathways_jobset(name: str = "train", *, slices: int = 2, vms: int = 2, backoff: int | None = None,
                    max_restarts: int = 1, priority: str = "medium", queue: str = "multislice-queue",
                    xpk: bool = False) -> dict:
    """A JobSet shaped like xpk's Pathways one: a pathways-head on cpu-np and an Indexed worker per slice."""
    labels = {"kueue.x-k8s.io/queue-name": queue}
    if xpk:
        labels["xpk.google.com/workload"] = name
    worker_pod = {
        "metadata": {"labels": {"xpk.google.com/workload": name}} if xpk else {},
        "spec": {
            "restartPolicy": "OnFailure",
            "priorityClassName": priority,
            "terminationGracePeriodSeconds": 30,
            "nodeSelector": {"cloud.google.com/gke-tpu-accelerator": "tpu-v5p-slice",
                             "cloud.google.com/gke-tpu-topology": "2x2x2"},
            "containers": [{"name": "pathways-worker", "image": "us-docker.pkg.dev/cloud-tpu-v2-images/pathways/server",
                            "args": ["--server_port=29005", "--resource_manager_address=$(PATHWAYS_HEAD):29001"],
                            "resources": {"limits": {"google.com/tpu": 4}}}],
        },
    }
    head_pod = {
        "spec": {
            "restartPolicy": "Never",
            "nodeSelector": {"cloud.google.com/gke-nodepool": "cpu-np"},
            "initContainers": [
                {"name": "pathways-proxy", "image": "proxy", "restartPolicy": "Always",
                 "args": ["--server_port=29000", "--num_elastic_slices=1"]},
                {"name": "pathways-rm", "image": "server", "restartPolicy": "Always",
                 "args": ["--server_port=29001", f"--instance_count={slices}", "--instance_type=tpuv5:2x2x2"]}],
            "containers": [{"name": "jax-tpu", "image": "python:3.11", "command": ["python", "-m", "trainer"],
                            "env": [{"name": "JAX_PLATFORMS", "value": "proxy"}]}],
        },
    }
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "labels": labels,
                     "annotations": {"alpha.jobset.sigs.k8s.io/exclusive-topology": "cloud.google.com/gke-nodepool"}},
        "spec": {
            "coordinator": {"replicatedJob": "pathways-head", "jobIndex": 0, "podIndex": 0},
            "failurePolicy": {"restartStrategy": "Recreate", "maxRestarts": max_restarts},
            "startupPolicy": {"startupPolicyOrder": "InOrder"},
            "successPolicy": {"operator": "All", "targetReplicatedJobs": ["pathways-head"]},
            "network": {"enableDNSHostnames": True, "publishNotReadyAddresses": True},
            "replicatedJobs": [
                {"name": "pathways-head", "replicas": 1,
                 "template": {"spec": {"backoffLimit": 0, "completionMode": "Indexed", "completions": 1,
                                       "parallelism": 1, "template": head_pod}}},
                {"name": "worker", "replicas": slices,
                 "template": {"spec": {"backoffLimit": backoff if backoff is not None else vms * 1,
                                       "completionMode": "Indexed", "completions": vms, "parallelism": vms,
                                       "template": worker_pod}}},
            ],
        },
    }


def run_cli(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, str, str]:
    """`elxpk ARGV` through the real entry point, in process: (exit code, stdout, stderr)."""
    from elxpk.cli.main import main

    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture()
def k(kubeconfig: Path) -> list[str]:
    """The cluster-selection flags that reach the fake API server."""
    return ["--kubeconfig", str(kubeconfig)]
