"""The rendered failure policy on the real Job and JobSet controllers, case by case against the pure
evaluator (elxpk/create/failure_policy.py) that the offline tests trust: kwok makes the trainer's container exit
with a chosen code, or the Eviction API takes the pod (a DisruptionTarget condition)."""

from __future__ import annotations

import pytest

from elxpk.create.failure_policy import failed_pod, job_outcome, jobset_action
from tests.realcluster.test_lifecycle import delete_and_check_nothing_left, pods, wait
from tests.realcluster.test_submit_goldens import elxpk
from tools.testcluster.kubeapi import JOBS, JOBSETS, LocalCluster

SHAPE = ["--tpu-type=v5p-8", "--num-slices=2", "--no-pathways", "--max-restarts=1", "--command", "python3 train.py"]
CONTAINER = "jax-tpu"
SLICE_0 = {"jobset.sigs.k8s.io/job-index": "0"}


def expected(jobset: dict, pod: dict) -> tuple[str, int]:
    """The evaluator's verdict: the JobSet's action ("none" when the Job goes on) and the failures counted."""
    rjob = jobset["spec"]["replicatedJobs"][0]
    outcome = job_outcome(rjob["template"]["spec"], [pod])
    if not outcome.failed:
        return "none", outcome.counted
    return jobset_action(jobset["spec"].get("failurePolicy"), rjob["name"], str(outcome.reason), 0), outcome.counted


def observed(cluster: LocalCluster, name: str, before: set[str]) -> str:
    """What the controllers did: FailJobSet (the JobSet failed), RestartJobSet (it recreated its Jobs), or
    none (slice 0's pod was replaced and the Job goes on)."""
    def decided() -> str | None:
        _, jobset = cluster.request("GET", JOBSETS.format(ns="default") + "/" + name)
        status = jobset.get("status", {})
        if any(c["type"] == "Failed" and c["status"] == "True" for c in status.get("conditions") or []):
            return "FailJobSet"
        if status.get("restarts", 0) > 0:
            return "RestartJobSet"
        new = [p for p in pods(cluster, name, **SLICE_0) if p["metadata"]["uid"] not in before]
        if new and all(p["status"].get("phase") == "Running" for p in new):  # the failed pod stays, Failed
            return "none"
        return None
    return str(cluster.wait_for(f"the controllers' decision on {name}", decided))


@pytest.mark.parametrize("fault", ["exit-77", "exit-75", "exit-70", "evict"])
def test_controllers_do_what_the_evaluator_says(fault: str, testcluster: LocalCluster) -> None:
    name = f"fp-{fault}"
    testcluster.remove_jobset("default", name)
    assert elxpk("workload", "create", f"--workload={name}", *SHAPE, cluster=testcluster).returncode == 0
    try:
        assert wait(testcluster, name, "running") == 0
        _, jobset = testcluster.request("GET", JOBSETS.format(ns="default") + "/" + name)
        before = {p["metadata"]["uid"] for p in pods(testcluster, name, **SLICE_0)}
        if fault == "evict":
            done = elxpk("workload", "kill-slice", name, "--slice", "0", "--mode", "evict", "--yes",
                         cluster=testcluster)
            assert done.returncode == 0, done.stderr
            pod = failed_pod(CONTAINER, 137, disrupted=True)  # the kubelet kills it; the API marked it
        else:
            code = int(fault.split("-")[1])
            selector = f"jobset.sigs.k8s.io/jobset-name={name},jobset.sigs.k8s.io/job-index=0"
            assert testcluster.exit_pods("default", selector, code) == 1
            pod = failed_pod(CONTAINER, code)
        action, counted = expected(jobset, pod)
        assert observed(testcluster, name, before) == action, fault
        if action == "none":  # the Job goes on: its failed count is what the policy counted
            job = testcluster.request("GET", JOBS.format(ns="default") + f"/{name}-slice-job-0")[1]
            assert job["status"].get("failed", 0) == counted, job["status"]
    finally:
        delete_and_check_nothing_left(testcluster, name)
