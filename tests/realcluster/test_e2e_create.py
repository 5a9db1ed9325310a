"""End to end on the real control plane: `elxpk workload create --dry-run-server` (the API server and the
JobSet webhook validate, nothing is stored), create, create again (refused: it exists), then status, wait
and delete on what the real controllers make of it. Ported from the scripted controller of tests/cluster/."""

from __future__ import annotations

import json

from tests.realcluster.test_lifecycle import delete_and_check_nothing_left, wait
from tests.realcluster.test_submit_goldens import elxpk
from tools.testcluster.kubeapi import JOBSETS, LocalCluster

NAME = "e2e"
CREATE = ["workload", "create", "--workload", NAME, "--tpu-type", "v5p-16", "--num-slices", "2",
          "--elastic-slices", "1", "--command", "python train.py"]


def test_create_then_follow_the_workload(testcluster: LocalCluster) -> None:
    testcluster.remove_jobset("default", NAME)
    checked = elxpk(*CREATE, "--dry-run-server", cluster=testcluster)
    assert checked.returncode == 0, checked.stderr
    assert testcluster.request("GET", JOBSETS.format(ns="default") + "/" + NAME)[0] == 404  # not persisted

    made = elxpk(*CREATE, cluster=testcluster)
    assert made.returncode == 0, made.stderr
    _, stored = testcluster.request("GET", JOBSETS.format(ns="default") + "/" + NAME)
    assert stored["metadata"]["labels"]["xpk.google.com/workload"] == NAME

    again = elxpk(*CREATE, cluster=testcluster)
    assert again.returncode == 1 and "already exists" in again.stderr and "--replace" in again.stderr, again.stderr

    assert wait(testcluster, NAME, "running") == 0
    shown = elxpk("workload", "status", NAME, "-o", "json", cluster=testcluster)
    data = json.loads(shown.stdout)
    assert (data["state"], data["slices_healthy"], data["slices_total"], data["head"]) == (
        "Running", 2, 2, "Running"), data
    assert testcluster.exit_pods("default", f"jobset.sigs.k8s.io/jobset-name={NAME}", 0) > 0
    assert wait(testcluster, NAME, "completed") == 0
    delete_and_check_nothing_left(testcluster, NAME)
