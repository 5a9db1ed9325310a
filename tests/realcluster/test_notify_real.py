"""`events --watch --record --notify` on the real Job, JobSet and Kueue controllers, run as the user runs it:
a slice lost (exit 75, counted: the JobSet restarts every Job and spends its one restart), its recovery, and
the workload failing (exit 70) each reach a loopback webhook; the record holds the incident the alert names."""

from __future__ import annotations

import json
import os
import subprocess
import time

from elxpk.cluster.records.incident_log import read_recorded
from tests.realcluster.test_lifecycle import wait
from tests.realcluster.test_submit_goldens import ELXPK, elxpk
from tests.support.webhook_server import webhook
from tools.testcluster.kubeapi import LocalCluster

NAME = "notify"
SLICE = "jobset.sigs.k8s.io/job-index"


def _kinds(hook) -> list[dict]:
    return [json.loads(body) for answer, body in list(hook.bodies) if answer == "200"]


def _until(what: str, check, limit_s: float = 180.0) -> None:
    deadline = time.monotonic() + limit_s  # an upper bound to catch a hang, not a performance figure
    while not check():
        assert time.monotonic() < deadline, f"no {what} within {limit_s:g} s"
        time.sleep(0.5)


def test_a_lost_slice_its_recovery_the_spent_budget_and_the_end_reach_the_webhook(testcluster: LocalCluster,
                                                                                  tmp_path) -> None:
    testcluster.remove_jobset("default", NAME)
    done = elxpk("workload", "create", f"--workload={NAME}", "--tpu-type=v5p-8", "--num-slices=2", "--no-pathways",
                 "--max-restarts=1", "--command", "python3 train.py", cluster=testcluster)
    assert done.returncode == 0, done.stderr
    record = tmp_path / "incidents.jsonl"
    stderr = tmp_path / "stderr.txt"
    try:
        assert wait(testcluster, NAME, "running") == 0
        with webhook(["200"]) as hook, stderr.open("w") as err:
            env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
            watcher = subprocess.Popen([str(ELXPK), "workload", "events", NAME, "--watch", "--record", str(record),
                                        "--notify", hook.url, "--kubeconfig", str(testcluster.kubeconfig)],
                                       stdout=subprocess.DEVNULL, stderr=err, env=env)
            try:
                _until("following", lambda: "# following" in stderr.read_text())
                assert testcluster.exit_pods("default", f"jobset.sigs.k8s.io/jobset-name={NAME},{SLICE}=1", 75) == 1
                _until("recovered alert", lambda: "recovered" in [d["kind"] for d in _kinds(hook)])
                assert testcluster.exit_pods("default", f"jobset.sigs.k8s.io/jobset-name={NAME},{SLICE}=0", 70) >= 1
                assert watcher.wait(timeout=240) == 0, stderr.read_text()
            finally:
                if watcher.poll() is None:
                    watcher.kill()
                    watcher.wait()
        docs = _kinds(hook)
    finally:
        testcluster.remove_jobset("default", NAME)
    kinds = [d["kind"] for d in docs]
    lost = [d for d in docs if d["kind"] == "slice-lost"]
    assert lost and lost[0]["details"] == {"slice": 1} and (lost[0]["incident"] or {}).get("exit_code") == 75, json.dumps(docs, indent=1)[:6000]
    assert kinds.count("recovered") == 1 and kinds.index("recovered") > kinds.index("slice-lost")
    assert kinds.count("budget-spent") == 1 and kinds[-1] == "failed" and kinds.count("failed") == 1, kinds
    recovered = next(d for d in docs if d["kind"] == "recovered")
    assert recovered["details"]["recovery_s"] >= 0 and "'s loss" in recovered["summary"]
    assert lost[0]["incident"]["id"] in {r["id"] for r in read_recorded(str(record))}
    assert "not delivered" not in stderr.read_text()
