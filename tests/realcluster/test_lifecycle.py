"""A workload's life on the real controllers, read by `elxpk workload status`/`wait` as a user would:
Running on kwok nodes, a slice killed and replaced by the Job controller, every container exiting 0
(Succeeded), exit 70 failing the workload at once, and `delete` leaving no Job or pod behind."""

from __future__ import annotations

import json
import os
import subprocess

from tests.realcluster.test_submit_goldens import ELXPK, elxpk
from tools.testcluster.kubeapi import JOBS, PODS, LocalCluster

SHAPE = ["--tpu-type=v5p-8", "--num-slices=2", "--no-pathways", "--max-restarts=1", "--command", "python3 train.py"]


def status(cluster: LocalCluster, name: str) -> dict:
    done = elxpk("workload", "status", name, "-o", "json", cluster=cluster)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def wait(cluster: LocalCluster, name: str, state: str) -> int:
    return elxpk("workload", "wait", name, "--for", state, "--timeout", "120s", "--poll", "1s",
                 cluster=cluster).returncode


def pods(cluster: LocalCluster, name: str, **labels: str) -> list[dict]:
    selector = ",".join([f"jobset.sigs.k8s.io/jobset-name={name}", *(f"{k}={v}" for k, v in labels.items())])
    return cluster.items(PODS.format(ns="default"), labelSelector=selector)


def delete_and_check_nothing_left(cluster: LocalCluster, name: str) -> None:
    done = elxpk("workload", "delete", name, "--yes", cluster=cluster)
    assert done.returncode == 0, done.stderr
    selector = f"jobset.sigs.k8s.io/jobset-name={name}"
    cluster.wait_for(f"no Job or pod of {name}", lambda: not cluster.items(
        JOBS.format(ns="default"), labelSelector=selector) and not cluster.items(
        PODS.format(ns="default"), labelSelector=selector))


def follow(cluster: LocalCluster, name: str) -> subprocess.Popen:
    """`elxpk workload wait NAME` following the whole story: each state it sees is a line on stderr."""
    return subprocess.Popen([str(ELXPK), "workload", "wait", name, "--poll", "0.2s", "--timeout", "300s",
                             "--kubeconfig", str(cluster.kubeconfig)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={k: v for k, v in os.environ.items() if k != "KUBECONFIG"})


def states_seen(follower: subprocess.Popen, name: str) -> list[str]:
    """What `wait` printed when it ended (exit 0, `NAME: Succeeded`), and the states it saw, each once in a row."""
    try:
        out, err = follower.communicate(timeout=120)
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.communicate()
    assert (follower.returncode, out) == (0, f"{name}: Succeeded\n"), err
    states = [line.removeprefix(f"{name}: ").split(":", 1)[0] for line in err.splitlines()
              if line.startswith(f"{name}: ")]
    return [s for i, s in enumerate(states) if i == 0 or states[i - 1] != s]


def test_running_kill_slice_succeeded_delete(testcluster: LocalCluster) -> None:
    name = "life-ok"
    testcluster.remove_jobset("default", name)
    assert elxpk("workload", "create", f"--workload={name}", *SHAPE, cluster=testcluster).returncode == 0
    follower = follow(testcluster, name)
    assert wait(testcluster, name, "running") == 0
    first = status(testcluster, name)
    assert (first["state"], first["slices_healthy"], first["slices_total"]) == ("Running", 2, 2), first

    before = {p["metadata"]["uid"] for p in pods(testcluster, name, **{"jobset.sigs.k8s.io/job-index": "1"})}
    killed = elxpk("workload", "kill-slice", name, "--slice", "1", "--mode", "delete", "--yes", cluster=testcluster)
    assert killed.returncode == 0, killed.stderr
    testcluster.wait_for("slice 1 replaced and running", lambda: (
        (now := pods(testcluster, name, **{"jobset.sigs.k8s.io/job-index": "1"}))
        and all(p["metadata"]["uid"] not in before and p["status"].get("phase") == "Running" for p in now)))
    assert wait(testcluster, name, "running") == 0
    after_kill = status(testcluster, name)
    # backoffLimit 0 without --elastic-slices: the killed pod fails its Job, and the JobSet's
    # restartOnInfrastructure rule recreates every Job, spending 1 of maxRestarts 1.
    assert (after_kill["state"], after_kill["restarts"], after_kill["restarts_left"]) == ("Running", 1, 0), after_kill

    assert testcluster.exit_pods("default", f"jobset.sigs.k8s.io/jobset-name={name}", 0) == 2
    assert wait(testcluster, name, "completed") == 0
    assert status(testcluster, name)["state"] == "Succeeded"
    seen = states_seen(follower, name)
    # Queued and Admitted last a moment here: wait may or may not poll while they do
    assert seen[0] in ("Queued", "Admitted", "Running") and "Running" in seen, seen
    after_running = seen[seen.index("Running") + 1:]
    # the kill: the slice down, then every Job recreated (status reads Admitted while none has a pod yet)
    down = after_running[:-2]
    assert set(down) & {"Degraded", "Restarting"} and set(down) <= {"Degraded", "Restarting", "Admitted"}, seen
    assert after_running[-2:] == ["Running", "Succeeded"], seen
    delete_and_check_nothing_left(testcluster, name)


def test_user_error_exit_70_fails_the_workload_at_once(testcluster: LocalCluster) -> None:
    name = "life-exit70"
    testcluster.remove_jobset("default", name)
    assert elxpk("workload", "create", f"--workload={name}", *SHAPE, cluster=testcluster).returncode == 0
    assert wait(testcluster, name, "running") == 0
    selector = f"jobset.sigs.k8s.io/jobset-name={name},jobset.sigs.k8s.io/job-index=0"
    assert testcluster.exit_pods("default", selector, 70) == 1
    failed = elxpk("workload", "wait", name, "--timeout", "120s", "--poll", "1s", cluster=testcluster)
    assert failed.returncode == 1, failed.stderr  # the JobSet's Failed condition: wait fails fast
    assert failed.stderr.splitlines()[-1].startswith(f"error: workload {name} failed: "), failed.stderr
    after = status(testcluster, name)
    assert after["state"] == "Failed", after
    assert after["restarts"] == 0, after  # FailJobSet: no JobSet restart was spent
    delete_and_check_nothing_left(testcluster, name)


def test_over_quota_is_queued_by_kueue(testcluster: LocalCluster) -> None:
    """More TPU chips than the ClusterQueue's quota: Kueue holds the JobSet suspended; status says Queued."""
    name = "life-queued"
    testcluster.remove_jobset("default", name)
    shape = ["--tpu-type=v6e-16", "--num-slices=8", "--no-pathways", "--command", "python3 train.py"]  # 128 chips
    assert elxpk("workload", "create", f"--workload={name}", *shape, cluster=testcluster).returncode == 0
    held = testcluster.wait_for("Kueue's verdict", lambda: (
        s if (s := status(testcluster, name))["state"] == "Queued" and s.get("admission") else None))
    assert held["slices_healthy"] == 0, held
    assert not pods(testcluster, name), "a queued JobSet has no pods"
    delete_and_check_nothing_left(testcluster, name)


def test_logs_come_through_the_api_server_from_kwok(testcluster: LocalCluster) -> None:
    """`workload logs` reads the container log the API server proxies from the node's kubelet API (kwok
    serves <run dir>/pod.log, in the CRI log format, for every container; with --previous, the API's
    previous=true, <run dir>/pod-previous.log)."""
    name = "life-logs"
    testcluster.remove_jobset("default", name)
    assert elxpk("workload", "create", f"--workload={name}", *SHAPE, cluster=testcluster).returncode == 0
    assert wait(testcluster, name, "running") == 0
    served = [line.split(" ", 3)[3] for line in (testcluster.run_dir / "pod.log").read_text().splitlines()]
    everything = elxpk("workload", "logs", name, cluster=testcluster)
    assert (everything.returncode, everything.stdout.splitlines()) == (0, served), everything.stderr
    last = elxpk("workload", "logs", name, "--slice", "1", "--tail", "1", cluster=testcluster)
    assert (last.returncode, last.stdout.splitlines()) == (0, served[-1:]), last.stderr
    previous = [line.split(" ", 3)[3] for line in (testcluster.run_dir / "pod-previous.log").read_text().splitlines()]
    before = elxpk("workload", "logs", name, "--slice", "1", "--previous", cluster=testcluster)
    assert (before.returncode, before.stdout.splitlines()) == (0, previous), before.stderr
    assert "(previous, terminated)" in before.stderr
    delete_and_check_nothing_left(testcluster, name)


def test_exhausting_max_restarts_ends_failed(testcluster: LocalCluster) -> None:
    """Exit 75 (retriable: counts towards maxRestarts) twice under --max-restarts=1: the first restarts the
    JobSet, the second finds no budget left and the JobSet controller fails it. status reads Failed, the one
    restart spent, none left, and the cause of the failure."""
    name = "life-exhausted"
    testcluster.remove_jobset("default", name)
    assert elxpk("workload", "create", f"--workload={name}", *SHAPE, cluster=testcluster).returncode == 0
    assert wait(testcluster, name, "running") == 0
    selector = f"jobset.sigs.k8s.io/jobset-name={name},jobset.sigs.k8s.io/job-index=0"
    first = {p["metadata"]["uid"] for p in pods(testcluster, name)}
    assert testcluster.exit_pods("default", selector, 75) == 1
    testcluster.wait_for("the JobSet restarted, every slice running again", lambda: (
        (now := pods(testcluster, name, **{"jobset.sigs.k8s.io/restart-attempt": "1"})) and len(now) == 2
        and all(p["metadata"]["uid"] not in first and p["status"].get("phase") == "Running" for p in now)))
    assert wait(testcluster, name, "running") == 0  # the Jobs' ready counts follow their pods
    restarted = status(testcluster, name)
    assert (restarted["state"], restarted["restarts"], restarted["restarts_left"]) == ("Running", 1, 0), restarted

    retried = f"{selector},jobset.sigs.k8s.io/restart-attempt=1"
    assert testcluster.exit_pods("default", retried, 75) == 1
    failed_wait = elxpk("workload", "wait", name, "--timeout", "120s", "--poll", "1s", cluster=testcluster)
    assert failed_wait.returncode == 1, failed_wait.stderr  # Failed: wait fails fast, with the JobSet's words
    assert failed_wait.stderr.splitlines()[-1].startswith(f"error: workload {name} failed: "), failed_wait.stderr
    assert "reaching max number of restarts" in failed_wait.stderr.splitlines()[-1], failed_wait.stderr
    failed = status(testcluster, name)
    assert (failed["state"], failed["restarts"], failed["restarts_counted"], failed["restarts_left"]) == (
        "Failed", 1, 1, 0), failed
    assert "reaching max number of restarts" in failed["message"], failed  # the JobSet controller's words
    assert failed["slices"][0]["state"] == "Failed", failed  # the slice whose Job failed
    # The pods of restart attempt 0 went with their Jobs; the one failure left is attempt 1's exit 75, which
    # the trainer's exit-code table (elxpk_contract/exit_codes.py) calls a lost slice: infra.
    assert failed["restart_causes"] == {"infra": 1, "user": 0, "unknown": 0}, failed
    delete_and_check_nothing_left(testcluster, name)
