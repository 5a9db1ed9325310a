"""The soak of issue #20 on the real controllers, run as a user runs it: `elxpk workload events NAME --watch
--record FILE` in one process while `elxpk workload kill-slice NAME --repeat N` takes a slice down round
after round in another; then the workload finishes, the recorder ends by itself, and the record file is read.

What was killed is known without elxpk: the Job controller's own `SuccessfulCreate` Events name every pod it
made for a slice; each of them but the one running at the end was taken down by a round. The record must hold
an incident for every one of them (0 missing) and a dated JobSet restart for every restart.

- `--mode delete` 20 rounds (the full soak): each force-deleted pod is killed by its kubelet (exit 137, kwok's
  pod-terminate stage), fails its Job (backoffLimit 0) and the JobSet restarts (maxRestarts 25).
- `--mode evict` EVICT_ROUNDS rounds: the pod gets a DisruptionTarget condition, the Job's podFailurePolicy
  ignores it and the Job controller replaces the pod, after its pod-failure back-off (10 s, doubled for each
  failed pod of the same Job, ignored or not): 20 rounds on the 2 slices here would wait about an hour, so
  the 20-round evict soak is bench/bench_soak_real.py, on 64 slices.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.realcluster.test_lifecycle import delete_and_check_nothing_left, pods, wait
from tests.realcluster.test_submit_goldens import elxpk
from tools.testcluster.kubeapi import LocalCluster
from tools.testcluster.soak_record import pods_created, start_recorder

SHAPE = ["--tpu-type=v5p-8", "--num-slices=2", "--no-pathways", "--max-restarts=25", "--command", "python3 train.py"]
DELETE_ROUNDS = 20
EVICT_ROUNDS = 2


def running_pod(cluster: LocalCluster, name: str) -> set[str]:
    """The one pod of slice 1 running now (v5p-8: one VM a slice)."""
    now = {p["metadata"]["name"] for p in pods(cluster, name, **{"jobset.sigs.k8s.io/job-index": "1"})
           if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")}
    assert len(now) == 1, now
    return now


def created_by_now(cluster: LocalCluster, name: str, made: int, timeout_s: float = 60.0) -> list[str]:
    """The pods the Job controller made for slice 1, once its `made` SuccessfulCreate Events are written: its
    event recorder writes them after the pods, asynchronously (one CI run at a load of 12 listed 20 of 21
    just after the soak's last round had seen the new pod). Returns what is there at the timeout."""
    deadline = time.monotonic() + timeout_s
    while True:
        created = pods_created(cluster, name, f"{name}-slice-job-1")
        if len(created) >= made or time.monotonic() > deadline:
            return created
        time.sleep(0.5)


def soak(cluster: LocalCluster, name: str, mode: str, rounds: int) -> str:
    done = elxpk("workload", "kill-slice", name, "--slice", "1", "--mode", mode, "--repeat", str(rounds),
                 "--every", "0s", "--poll", "0.5s", "--timeout", "5m", "--yes", cluster=cluster, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"recoveries: {rounds}/{rounds} succeeded" in done.stdout, done.stdout
    return done.stdout


@pytest.mark.slow
def test_every_round_of_a_soak_is_in_the_record(testcluster: LocalCluster, tmp_path: Path) -> None:
    name = "soak"
    testcluster.remove_jobset("default", name)
    assert elxpk("workload", "create", f"--workload={name}", *SHAPE, cluster=testcluster).returncode == 0
    record = tmp_path / "incidents.jsonl"
    recorder = None
    try:
        assert wait(testcluster, name, "running") == 0
        recorder = start_recorder(testcluster, name, record)
        soak(testcluster, name, "delete", DELETE_ROUNDS)
        deleted = set(created_by_now(testcluster, name, 1 + DELETE_ROUNDS)) - running_pod(testcluster, name)
        soak(testcluster, name, "evict", EVICT_ROUNDS)
        created = created_by_now(testcluster, name, 1 + DELETE_ROUNDS + EVICT_ROUNDS)
        evicted = set(created) - deleted - running_pod(testcluster, name)
        assert testcluster.exit_pods("default", f"jobset.sigs.k8s.io/jobset-name={name}", 0) == 2
        assert wait(testcluster, name, "completed") == 0
        # --watch ends by itself once the workload has finished (within its 60 s refresh)
        assert recorder.wait(timeout=150) == 0, Path(f"{record}.err").read_text()
    finally:
        if recorder is not None and recorder.poll() is None:
            recorder.kill()
            recorder.wait()
        delete_and_check_nothing_left(testcluster, name)

    incidents = [json.loads(line) for line in record.read_text().splitlines()]
    assert len({i["id"] for i in incidents}) == len(incidents), "an incident recorded twice"
    # The Job controller made 1 + DELETE_ROUNDS + EVICT_ROUNDS pods for slice 1; each round took one down.
    assert len(created) == 1 + DELETE_ROUNDS + EVICT_ROUNDS, created
    exits = {i["pod"] for i in incidents if i["kind"] == "exit" and i["slice"] == 1 and i["exit_code"] == 137}
    disrupted = {i["pod"] for i in incidents if i["kind"] == "disruption" and i["slice"] == 1
                 and i["reason"] == "EvictionByEvictionAPI"}
    assert (len(deleted), len(evicted)) == (DELETE_ROUNDS, EVICT_ROUNDS), (deleted, evicted)
    assert deleted - exits == set(), "force-deleted pods missing from the record"
    assert evicted - disrupted == set(), "evicted pods missing from the record"
    restarts = sorted(i["message"] for i in incidents if i["kind"] == "jobset_restart")
    assert len(restarts) == DELETE_ROUNDS, restarts
    undated = [i["message"] for i in incidents if i["kind"] == "jobset_restart" and not i["time"]]
    assert not undated, f"JobSet restarts recorded without their time: {undated}"

