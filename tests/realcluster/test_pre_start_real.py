"""`workload create --trainer maxtext --checkpoint-pre-start IMAGE` through the real API server, JobSet and
Job controllers (the init container's own command runs in tests/process/test_checkpoint_prestart.py)."""

from __future__ import annotations

import pytest

from tests.realcluster.test_why_real import create
from tools.testcluster.kubeapi import PODS, LocalCluster


@pytest.mark.parametrize("shape", [["--no-pathways"], []], ids=["multi-controller", "pathways"])
def test_maxtext_pre_start_init_container_through_the_real_api_server(testcluster: LocalCluster, shape) -> None:
    """`--checkpoint-pre-start` (docs/maxtext.md): the JobSet is admitted and its pods start, and the real Job
    controller gives the init container the JOB_COMPLETION_INDEX its skip test reads."""
    from tests.launcher.cases import MAXTEXT_DEMO_COMMAND

    name = "why-mt-" + ("mc" if shape else "pw")
    create(testcluster, name, "--tpu-type=v5p-16", "--num-slices=1", "--trainer=maxtext", *shape,
           "--command", MAXTEXT_DEMO_COMMAND, "--checkpoint-dir=gs://bucket/runs/r1",
           "--checkpoint-pre-start=gcr.io/my-project/elxpk-trainer:0.1.0")
    job = "slice-job" if shape else "pathways-head"
    selector = f"jobset.sigs.k8s.io/jobset-name={name},jobset.sigs.k8s.io/replicatedjob-name={job}"
    want = 2 if shape else 1  # v5p-16: 2 VMs a slice; the Pathways head is one pod
    try:  # the workload holds the v5p-16 nodes: removed whatever happens, or later tests find none free
        def all_running() -> list[dict] | None:
            found = testcluster.items(PODS.format(ns="default"), labelSelector=selector)
            return found if len(found) == want and all(x["status"].get("phase") == "Running" for x in found) else None

        pods = testcluster.wait_for(f"{want} {job} pods running", all_running)
        for pod in pods:
            box = pod["spec"]["initContainers"][0]
            assert box["name"] == "elxpk-pre-start" and box["command"][-1] == "gs://bucket/runs/r1", box
            env = {e["name"]: e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") for e in box["env"]}
            assert env["ELXPK_JOB_INDEX"] == "metadata.labels['jobset.sigs.k8s.io/job-index']"
            assert env["JOB_COMPLETION_INDEX"] == "metadata.labels['batch.kubernetes.io/job-completion-index']"
    finally:
        testcluster.remove_jobset("default", name)
