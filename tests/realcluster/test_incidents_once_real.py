"""#33, "counted more than once", on the real controllers through the `elxpk` console script: an evicted pod
is one incident (its DisruptionTarget, with the exit its kill caused), not a disruption and an `exit unknown
137`; the one-shot `events` after it lists every incident once, dated, in time order. (One Kueue preemption, one line: test_why_real.py::test_preempted_by_higher_priority.)"""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess

from elxpk.cluster.objects.labels import parse_time
from tests.realcluster.test_submit_goldens import ELXPK, elxpk
from tests.realcluster.test_why_real import pods_of
from tools.testcluster.kubeapi import LocalCluster

NAME = "once-evict"
SHAPE = ["--tpu-type=v5p-8", "--num-slices=2", "--no-pathways", "--max-restarts=3", "--command", "python3 t.py"]


def test_an_evicted_pod_is_one_incident_and_events_are_dated_in_order(testcluster: LocalCluster) -> None:
    testcluster.remove_jobset("default", NAME)
    assert elxpk("workload", "create", f"--workload={NAME}", *SHAPE, cluster=testcluster).returncode == 0
    try:
        assert elxpk("workload", "wait", NAME, "--for", "running", "--timeout", "120s", "--poll", "1s",
                     cluster=testcluster).returncode == 0
        watch = subprocess.Popen([str(ELXPK), "workload", "events", NAME, "--watch", "-o", "json", "--kubeconfig",
                                  str(testcluster.kubeconfig)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True, env={k: v for k, v in os.environ.items() if k != "KUBECONFIG"})
        try:
            before = {p["metadata"]["uid"] for p in pods_of(testcluster, NAME)}
            killed = elxpk("workload", "kill-slice", NAME, "--slice", "1", "--mode", "evict", "--yes",
                           cluster=testcluster)
            assert killed.returncode == 0, killed.stderr
            # the podFailurePolicy ignores a disruption: the Job controller replaces the pod, no JobSet restart
            testcluster.wait_for("the evicted pod replaced and running", lambda: any(
                p["metadata"]["uid"] not in before and p["status"].get("phase") == "Running"
                for p in pods_of(testcluster, NAME)))
            assert elxpk("workload", "wait", NAME, "--for", "running", "--timeout", "120s", "--poll", "1s",
                         cluster=testcluster).returncode == 0
        finally:
            watch.send_signal(signal.SIGINT)
            out, err = watch.communicate(timeout=60)
        seen = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        per_pod = collections.Counter(i["pod"] for i in seen if i["pod"])
        evicted = [i for i in seen if i["kind"] in ("disruption", "evicted")]
        assert evicted and all(i["reason"] == "EvictionByEvictionAPI" for i in evicted), seen
        assert all(per_pod[i["pod"]] == 1 for i in evicted), (per_pod, seen)  # not also `exit unknown 137`

        once = elxpk("workload", "events", NAME, "-o", "json", cluster=testcluster)
        assert once.returncode == 0, once.stderr
        listed = [json.loads(line) for line in once.stdout.splitlines()]
        assert all(i["time"] for i in listed), [i for i in listed if not i["time"]]
        times = [parse_time(i["time"]) for i in listed]
        assert times == sorted(times), [i["time"] for i in listed]
        assert len({i["id"] for i in listed}) == len(listed)
        # the evicted pod may be gone by now (its replacement runs): if it is still there, it is one line too
        assert {i["pod"] for i in listed if i["kind"] in ("disruption", "evicted")} <= {i["pod"] for i in evicted}
    finally:
        testcluster.remove_jobset("default", NAME)
