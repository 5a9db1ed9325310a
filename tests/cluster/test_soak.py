"""`workload kill-slice` as a soak test: delete, evict and exit rounds over the scripted cluster, the
summary (recoveries, p50/p95, steps rewound, budgets), the exec WebSocket and the Eviction API."""

from __future__ import annotations

import json
import random

import pytest

from elxpk.cli.main import main
from elxpk.cluster.soak import exit_command, soak, summary_lines
from elxpk.errors import ClusterError
from tests.cluster.conftest import START, WORKER, pathways_jobset, running


def _progress(tmp_path, steps_done: int, checkpoint_step: int) -> dict:
    from elxpk_contract.records import PROGRESS_FILE, Progress

    jobset = pathways_jobset(slices=3, vms=2, backoff=10)
    head = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]
    head["env"].append({"name": "ELXPK_CHECKPOINT_DIR", "value": str(tmp_path)})
    progress = Progress(steps_done, START, checkpoint_step, START - 100, START)
    (tmp_path / PROGRESS_FILE).write_text(json.dumps(progress.to_json()))
    return jobset


def test_delete_soak_summary_over_the_scripted_cluster(fake, kube, clock, tmp_path):
    ctl = running(fake, clock, _progress(tmp_path, steps_done=130, checkpoint_step=100))
    r, idle = ctl.reconcile, (lambda: None)
    # one controller step per poll: replace the deleted pods, then start them; round 3 is slow to schedule;
    # the pause between rounds is one sleep too
    clock.on_sleep = [r, r, idle, r, r, idle, idle, idle, r, r, idle, r, r]
    rounds = []
    summary = soak(kube, "default", "train", slice_spec="random", mode="delete", repeat=4, every_s=600,
                   exit_code=143, rng=random.Random(7), clock=clock, sleep=clock.sleep, timeout_s=60, poll_s=5,
                   on_round=rounds.append)
    draws = random.Random(7)
    assert [r.slice for r in rounds] == [draws.randrange(3) for _ in range(4)]
    assert [r.recovered for r in rounds] == [True] * 4
    # kill, poll (gone) -> reconcile creates pods, poll (pending) -> reconcile starts them, poll: back
    assert [r.recovery_s for r in rounds] == [10.0, 10.0, 20.0, 10.0]
    assert (summary.percentile(50), summary.percentile(95)) == (10.0, 20.0)
    assert summary.steps_rewound == 4 * 30
    assert clock.slept.count(590.0) == 2 and clock.slept.count(580.0) == 1  # 10 minutes from kill to kill
    assert summary.backoff_used[1] - summary.backoff_used[0] == 4 * 2  # each round: 2 pods counted failed
    lines = summary_lines(summary)
    assert lines[0] == "recoveries: 4/4 succeeded"
    assert lines[1] == "recovery time: p50 10s, p95 20s"
    assert lines[2].startswith("steps rewound: 120")
    assert "JobSet restarts 0 (now 0/1 counted); backoffLimit used 0 -> 8" in lines[3]


def test_soak_counts_a_slice_that_never_comes_back(fake, kube, clock):
    ctl = running(fake, clock, slices=2, vms=2)
    clock.on_sleep = [ctl.reconcile, ctl.reconcile]  # the first round recovers; then the controller stops
    summary = soak(kube, "default", "train", slice_spec="1", mode="delete", repeat=2, every_s=0, exit_code=143,
                   rng=random.Random(0), clock=clock, sleep=clock.sleep, timeout_s=30, poll_s=5)
    assert [r.recovered for r in summary.rounds] == [True, False]
    assert summary.rounds[1].error == "not running again within 30s"
    assert summary_lines(summary)[0] == "recoveries: 1/2 succeeded"
    assert summary.percentile(95) == 10.0


def test_evict_soak_goes_through_the_eviction_api(fake, kube, clock):
    ctl = running(fake, clock, slices=2, vms=2)
    evicted: list[str] = []
    fake.store.on_evict = lambda pod: evicted.append(pod["metadata"]["name"])
    clock.on_sleep = [ctl.reconcile] * 20
    summary = soak(kube, "default", "train", slice_spec="0", mode="evict", repeat=1, every_s=0, exit_code=143,
                   rng=random.Random(0), clock=clock, sleep=clock.sleep, timeout_s=60, poll_s=1)
    assert summary.succeeded == 1 and len(evicted) == 2
    posts = [c for c in fake.calls if c.method == "POST" and c.path.endswith("/eviction")]
    assert len(posts) == 2


def test_eviction_honours_a_pod_disruption_budget(fake, kube, clock):
    ctl = running(fake, clock, slices=2, vms=2)
    # 5 pods carry the label (the head and 4 workers): none may go
    fake.store.create(("policy", "poddisruptionbudgets"), {
        "metadata": {"name": "keep-workers", "namespace": "default"},
        "spec": {"minAvailable": 5, "selector": {"matchLabels": {"jobset.sigs.k8s.io/jobset-name": "train"}}}})
    pod, uid = (ctl.pods(WORKER)[0]["metadata"][k] for k in ("name", "uid"))
    with pytest.raises(ClusterError, match="answered 429 .*disruption budget"):
        kube.evict_pod("default", pod, uid=uid)
    assert fake.store.get(("", "pods"), "default", pod) is not None
    summary = soak(kube, "default", "train", slice_spec="0", mode="evict", repeat=2, every_s=0, exit_code=143,
                   rng=random.Random(0), clock=clock, sleep=clock.sleep, timeout_s=60, poll_s=1)
    assert [r.recovered for r in summary.rounds] == [False, False]  # the soak goes on and says why
    assert summary.rounds[0].error.startswith("not injected: the Kubernetes API at ")
    assert "disruption budget" in summary.rounds[0].error


def test_exit_soak_runs_kill_through_exec_and_the_container_restarts(fake, kube, clock):
    ctl = running(fake, clock, slices=2, vms=2)

    def container(namespace, pod, name, command):  # the container's PID 1 dies of the signal
        assert command == exit_command(137) == ["/bin/sh", "-c", "kill -9 1"]
        ctl.crash_pod(pod, exit_code=137)
        return "", 0

    fake.store.on_exec = container
    clock.on_sleep = [ctl.heal] * 20
    summary = soak(kube, "default", "train", slice_spec="1", mode="exit", repeat=2, every_s=60, exit_code=137,
                   rng=random.Random(0), clock=clock, sleep=clock.sleep, timeout_s=60, poll_s=2)
    assert [r.recovered for r in summary.rounds] == [True, True]
    assert [r.recovery_s for r in summary.rounds] == [2.0, 2.0]  # restarted in place at the first poll
    assert len(fake.store.execs) == 4 and {e[2] for e in fake.store.execs} == {"pathways-worker"}
    assert summary.causes == {"infra": 0, "user": 0, "unknown": 4}  # 137 is not a trainer code


def test_exec_reports_the_commands_exit_code_over_the_websocket(fake, kube, clock):
    ctl = running(fake, clock, slices=1, vms=1)
    pod = ctl.pods(WORKER)[0]["metadata"]["name"]
    fake.store.on_exec = lambda ns, p, c, command: ("out: " + " ".join(command), 3)
    assert kube.exec_in_pod("default", pod, "pathways-worker", ["echo", "hi"]) == ("out: echo hi", 3)
    fake.store.on_exec = lambda ns, p, c, command: ("", 0)
    assert kube.exec_in_pod("default", pod, "pathways-worker", ["true"]) == ("", 0)


def test_kill_slice_cli_soak_and_bad_flags(fake, clock, capsys, kubeconfig):
    running(fake, clock, slices=2, vms=2)
    k = ["--kubeconfig", str(kubeconfig)]
    before = len(fake.calls)
    code = main(["workload", "kill-slice", "train", "--slice", "two", "--mode", "drain", "--repeat", "0",
                 "--every", "soon", *k])
    _, err = capsys.readouterr()
    assert code == 2
    assert err.splitlines() == ["error: --slice two: use a slice index (0, 1, ...) or random",
                                "error: --mode drain: use delete, evict, exit",
                                "error: --repeat 0: must be 1 or more",
                                "error: --every soon: 'soon' is not a number with a unit"]
    code = main(["workload", "kill-slice", "train", "--slice", "0", "--mode", "exit", "--exit-code", "70", *k])
    _, err = capsys.readouterr()
    assert code == 2 and "--exit-code 70: use 129-159" in err
    assert len(fake.calls) == before
    code = main(["workload", "kill-slice", "train", "--slice", "random", "--seed", "3", "--mode", "evict",
                 "--yes", *k])
    out, err = capsys.readouterr()
    assert code == 0, err
    index = random.Random(3).randrange(2)
    assert out.strip() == f"slice {index} of train: 2 pods evicted"


def test_exit_mode_reports_a_failed_exec_in_one_line(fake, clock, capsys, kubeconfig):
    running(fake, clock, slices=1, vms=1)
    fake.store.on_exec = lambda ns, pod, container, command: ("sh: kill: not found\n", 127)
    code = main(["workload", "kill-slice", "train", "--slice", "0", "--mode", "exit", "--exit-code", "137",
                 "--yes", "--kubeconfig", str(kubeconfig)])
    _, err = capsys.readouterr()
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert code == 1 and len(errors) == 1 and "Traceback" not in err
    assert "`kill -9 1` exited 127: sh: kill: not found" in errors[0]


def test_kill_slice_cli_repeat_prints_rounds_and_the_summary(fake, clock, capsys, kubeconfig):
    import threading

    ctl = running(fake, clock, slices=2, vms=2)
    stop = threading.Event()

    def job_controller() -> None:  # the Job controller, while the CLI soaks (bounded by the CLI's --timeout)
        while not stop.is_set():
            ctl.reconcile()
            stop.wait(0.01)

    thread = threading.Thread(target=job_controller)
    thread.start()
    try:
        code = main(["workload", "kill-slice", "train", "--slice", "random", "--seed", "5", "--repeat", "3",
                     "--every", "0s", "--poll", "0.01s", "--timeout", "20s", "--yes",
                     "--kubeconfig", str(kubeconfig)])
    finally:
        stop.set()
        thread.join()
    out, err = capsys.readouterr()
    assert code == 0, err
    lines = out.splitlines()
    draws = random.Random(5)
    for n, line in enumerate(lines[:3], 1):
        assert line.startswith(f"round {n}/3: slice {draws.randrange(2)} (delete, 2 pods) back after ")
    assert lines[3] == "recoveries: 3/3 succeeded"
    assert lines[4].startswith("recovery time: p50 ") and lines[6].startswith("budget consumed: JobSet restarts 0")
