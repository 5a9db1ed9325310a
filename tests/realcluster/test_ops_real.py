"""`wait`, `kill-slice` (once, `--watch`, `--repeat`), `logs`, `list` and `delete` on the real controllers, as
a user runs them (the console script; the library calls in process where a test injects a clock or reads
what a round saw). Ported from the scripted controller of tests/cluster/.

Three workloads, each shared by the tests of its story:
- `ops` (module fixture): multi-controller v5litepod-16, 2 slices of 4 VMs, backoffLimit 0, so a killed
  slice fails its Job and the JobSet restarts every Job (about 2 s here): the soak rounds, `wait`'s
  deadline, the kill plan of one VM, a name that must reach nothing, and the delete at the end;
- `opshead`: Pathways v5p-8, 2 slices: the head's log, a VM's log, and a kill seen through `--watch` and
  `status` while the Job controller replaces the pod (its pod-failure back-off: about 20 s);
- `alpha` and `beta` in namespace team-a: `list` and `delete --all`, which must stay in their namespace.

With ELXPK_OPS_CAPTURE=DIR the objects of `ops` running and succeeded are written to DIR/running.json and
DIR/succeeded.json: tests/cluster/ops_corpus/, which the fault tests of tests/cluster load into the fake
API server (faults a real API server does not make on demand).
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from elxpk.cluster.access.connect import connect
from elxpk.cluster.access.target import ClusterTarget
from elxpk.cluster.verbs.ops import plan_kill, wait_for
from elxpk.cluster.verbs.soak import soak, summary_lines
from elxpk.errors import Timeout, UsageError
from elxpk_contract.progress_record import PROGRESS_FILE, Progress
from tests.realcluster.capture import capture as shared_capture
from tests.realcluster.test_lifecycle import delete_and_check_nothing_left, pods, status, wait
from tests.realcluster.test_submit_goldens import ELXPK, elxpk
from tools.testcluster.kubeapi import JOBSETS, PODS, LocalCluster

OPS = ["--tpu-type=v5litepod-16", "--num-slices=2", "--no-pathways", "--max-restarts=25"]


class FakeClock:
    """An injected clock for `wait`'s deadline: `sleep` advances it and records what was asked."""

    def __init__(self) -> None:
        self.now, self.slept = time.time(), []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def capture(cluster: LocalCluster, case: str, name: str) -> None:
    """With ELXPK_OPS_CAPTURE=DIR, write what the API server holds of workload `name` to DIR/CASE.json."""
    shared_capture(cluster, case, name, env="ELXPK_OPS_CAPTURE")


@pytest.fixture(scope="module")
def progress_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The trainer's progress record as `status` and the soak read it (ELXPK_CHECKPOINT_DIR of the container):
    130 steps done, the last committed checkpoint at 100."""
    directory = tmp_path_factory.mktemp("ops-progress")
    now = time.time()
    (directory / PROGRESS_FILE).write_text(json.dumps(Progress(130, now, 100, now - 100, now).to_json()))
    return directory


@pytest.fixture(scope="module")
def ops(testcluster: LocalCluster, progress_dir: Path) -> Iterator[str]:
    name = "ops"
    testcluster.remove_jobset("default", name)
    made = elxpk("workload", "create", f"--workload={name}", *OPS, "--command", "python3 train.py",
                 f"--checkpoint-dir={progress_dir}", cluster=testcluster)
    assert made.returncode == 0, made.stderr
    try:
        assert wait(testcluster, name, "running") == 0
        yield name
    finally:
        testcluster.remove_jobset("default", name)


@pytest.fixture(scope="module")
def kube(testcluster: LocalCluster):  # noqa: ANN201
    return connect(ClusterTarget(kubeconfig=str(testcluster.kubeconfig)))


def test_wait_times_out_with_the_state_it_saw(testcluster: LocalCluster, ops: str, kube) -> None:
    capture(testcluster, "running", ops)
    done = elxpk("workload", "wait", ops, "--timeout", "1s", "--poll", "0.2s", cluster=testcluster)
    assert done.returncode == 124 and "still Running" in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert elxpk("workload", "wait", ops, "--for", "running", cluster=testcluster).returncode == 0
    clock = FakeClock()
    with pytest.raises(Timeout, match=r"still Running after 30s \(waiting for completed"):
        wait_for(kube, "default", ops, until="completed", timeout_s=30, clock=clock, sleep=clock.sleep, poll_s=7)
    assert clock.slept == [7, 7, 7, 7, 2]  # never sleeps past the deadline


def test_kill_one_vm_and_bad_indexes(ops: str, kube) -> None:
    plan = plan_kill(kube, "default", ops, 0, 3)
    assert len(plan.pods) == 1 and plan.expected == 1 and f"{ops}-slice-job-0-3-" in plan.pods[0]
    whole = plan_kill(kube, "default", ops, 1, None)
    assert len(whole.pods) == 4 and whole.expected == 4
    with pytest.raises(UsageError) as info:
        plan_kill(kube, "default", ops, 2, 4)
    assert info.value.messages == [f"--slice 2: workload {ops} has 2 slices (0..1)",
                                   "--vm 4: each slice has 4 VMs (0..3)"]


def test_a_bad_name_reaches_nothing(testcluster: LocalCluster, ops: str) -> None:
    """`workload delete ""` once sent DELETE to the JobSets collection (issue #21): on the real API server
    too, it is refused before any request and every workload stays."""
    before = {j["metadata"]["uid"] for j in testcluster.items(JOBSETS.format(ns="default"))}
    for argv in (["delete", "", "--yes"], ["kill-slice", " ", "--slice", "0", "--yes"]):
        done = elxpk("workload", *argv, cluster=testcluster)
        assert done.returncode == 2 and done.stderr.startswith("error: NAME"), done.stderr
    assert {j["metadata"]["uid"] for j in testcluster.items(JOBSETS.format(ns="default"))} == before
    assert ops in {j["metadata"]["name"] for j in testcluster.items(JOBSETS.format(ns="default"))}


class TrainerRecords:
    """The progress record a trainer leaves as the soak's rounds go (this workload runs no trainer): on a
    kill, its stop on SIGTERM, not saved (`drain_steps_lost` 30: 130 done, checkpoint at 100); once the slice
    is back, the restarted trainer's first step. Keyed on the soak's own progress lines (`on_tick`)."""

    def __init__(self, directory: Path) -> None:
        self.path, self.stopped = directory / PROGRESS_FILE, False

    def _write(self, progress: Progress) -> None:
        self.path.write_text(json.dumps(progress.to_json()))

    def tick(self, text: str) -> None:
        now = time.time()
        if "replacement pods ready" in text and not self.stopped:
            self.stopped = True
            self._write(Progress(130, now - 1, 100, now - 100, now, state="preempted", exit_code=77,
                                 drain_saved=False, drain_steps_lost=30))
        elif text.startswith("slice back") and self.stopped:
            self.stopped = False
            self._write(Progress(101, now, 100, now - 100, now))

    def restore(self) -> None:  # the record the module's other tests read
        now = time.time()
        self._write(Progress(130, now, 100, now - 100, now))


def test_soak_summary_over_the_real_controllers(ops: str, kube, progress_dir: Path) -> None:
    """Two delete rounds on random slices, 4 s from kill to kill: each slice back and the trainer stepping
    again; the steps each kill rewound as the trainer recorded its stop (30), and the JobSet restarts they
    cost (backoffLimit 0)."""
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        time.sleep(seconds)

    rounds: list = []
    first = status_of(kube, ops)
    trainer = TrainerRecords(progress_dir)
    try:
        summary = soak(kube, "default", ops, slice_spec="random", mode="delete", repeat=2, every_s=4,
                       exit_code=143, rng=random.Random(7), clock=time.time, sleep=sleep, timeout_s=60, poll_s=0.2,
                       on_round=rounds.append, on_tick=trainer.tick)
    finally:
        trainer.restore()
    draws = random.Random(7)
    assert [r.slice for r in rounds] == [draws.randrange(2) for _ in range(2)]
    assert [(r.recovered, r.pods) for r in rounds] == [(True, 4)] * 2, rounds
    assert summary.steps_rewound == 2 * 30
    # between the rounds: what is left of the 4 s from the first round's start (0 on a slow machine); every
    # other sleep is a 0.2 s poll
    pauses = [s for s in slept if s != 0.2]
    assert len(pauses) == 1 and 0 <= pauses[0] < 4, slept
    lines = summary_lines(summary)
    assert lines[0] == "recoveries: 2/2 succeeded"
    assert lines[1].startswith("recovery time (kill -> the trainer's next step): p50 ")
    assert lines[2] == "steps rewound: 60 (as the trainer recorded each stop)"
    after = first["restarts_counted"] + 2
    assert lines[3].startswith(f"budget consumed: JobSet restarts 2 (now {after}/25 counted); backoffLimit used 0 -> 0")


def status_of(kube, name: str) -> dict:  # noqa: ANN001
    from elxpk.cluster.verbs.observe import fetch_status

    return fetch_status(kube, "default", name, now=time.time()).to_dict()


def test_soak_counts_a_slice_that_is_not_back_in_time(testcluster: LocalCluster, ops: str, kube) -> None:
    """A JobSet restart takes the real controllers more than 0.3 s: the round says so, the soak goes on."""
    summary = soak(kube, "default", ops, slice_spec="1", mode="delete", repeat=1, every_s=0, exit_code=143,
                   rng=random.Random(0), clock=time.time, sleep=time.sleep, timeout_s=0.3, poll_s=0.1)
    assert [r.recovered for r in summary.rounds] == [False]
    assert summary.rounds[0].error == "not running again within 0.3s"
    assert summary_lines(summary)[0] == "recoveries: 0/1 succeeded"
    assert summary.percentile(95) is None
    assert wait(testcluster, ops, "running") == 0


@contextmanager
def stepping(directory: Path) -> Iterator[None]:
    """A trainer stepping every 0.2 s, as its progress record shows it (this workload runs none), recording
    no stop: the soak's recoveries end at its next step, and their rewind is unknown."""
    done = threading.Event()

    def step() -> None:
        steps = 130
        while not done.wait(0.2):
            steps += 1
            now = time.time()
            (directory / PROGRESS_FILE).write_text(json.dumps(Progress(steps, now, 100, now - 100, now).to_json()))

    thread = threading.Thread(target=step, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
        now = time.time()
        (directory / PROGRESS_FILE).write_text(json.dumps(Progress(130, now, 100, now - 100, now).to_json()))


def test_kill_slice_cli_repeat_prints_rounds_and_the_summary(testcluster: LocalCluster, ops: str,
                                                              progress_dir: Path) -> None:
    with stepping(progress_dir):
        done = elxpk("workload", "kill-slice", ops, "--slice", "random", "--seed", "5", "--repeat", "2", "--every",
                     "0s", "--poll", "0.2s", "--timeout", "60s", "--yes", cluster=testcluster)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    draws = random.Random(5)
    for n, line in enumerate(lines[:2], 1):
        assert line.startswith(f"round {n}/2: slice {draws.randrange(2)} (delete, 4 pods) recovered: the trainer's "
                               "next step "), lines
        assert line.endswith("rewind unknown (the trainer recorded none)"), lines
    assert lines[2] == "recoveries: 2/2 succeeded"
    assert lines[3].startswith("recovery time (kill -> the trainer's next step): p50 ")
    assert lines[4] == "steps rewound: unknown (the trainer recorded no rewind at any stop)"
    assert lines[5].startswith("budget consumed: JobSet restarts 2")
    refused = elxpk("workload", "kill-slice", ops, "--slice", "0", cluster=testcluster)  # no --yes, no terminal
    assert refused.returncode == 2 and "pass --yes" in refused.stderr


def test_succeeded_then_delete_takes_the_children(testcluster: LocalCluster, ops: str) -> None:
    assert wait(testcluster, ops, "running") == 0
    assert testcluster.exit_pods("default", f"jobset.sigs.k8s.io/jobset-name={ops}", 0) == 8
    assert wait(testcluster, ops, "completed") == 0
    capture(testcluster, "succeeded", ops)
    delete_and_check_nothing_left(testcluster, ops)
    again = elxpk("workload", "delete", ops, "--yes", cluster=testcluster)
    assert again.returncode == 1, again.stderr
    assert again.stderr.startswith(f'error: workload "{ops}" not found in namespace "default"'), again.stderr


def test_pathways_logs_kill_watch_and_degraded_status(testcluster: LocalCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """Pathways: `logs` reads the head's jax-tpu container by default and a VM's worker with --slice/--vm;
    a killed worker is replaced in place by the Job controller (backoffLimit 4 a slice), during which
    `status` says Degraded in every output; `kill-slice --watch` reports the slice back and the trainer's
    first step after the kill (the line kwok serves from <run dir>/pod.log, as the head's log)."""
    monkeypatch.setenv("COLUMNS", "200")  # Rich would otherwise fold table cells at 80 columns
    name = "opshead"
    testcluster.remove_jobset("default", name)
    made = elxpk("workload", "create", f"--workload={name}", "--tpu-type=v5p-8", "--num-slices=2",
                 "--max-restarts=1", "--command", "python3 train.py", cluster=testcluster)
    assert made.returncode == 0, made.stderr
    log_file = testcluster.run_dir / "pod.log"
    served = log_file.read_text()
    try:
        assert wait(testcluster, name, "running") == 0
        lines = [line.split(" ", 3)[3] for line in served.splitlines()]
        head = elxpk("workload", "logs", name, cluster=testcluster)
        assert (head.returncode, head.stdout.splitlines()) == (0, lines), head.stderr
        assert head.stderr.startswith(f"# {name} head: pod {name}-pathways-head-0-0-") and "jax-tpu" in head.stderr
        worker = elxpk("workload", "logs", name, "--slice", "1", "--vm", "0", "--tail", "1", cluster=testcluster)
        assert (worker.returncode, worker.stdout.splitlines()) == (0, lines[-1:]), worker.stderr
        assert f"slice 1 vm 0: pod {name}-worker-1-0-" in worker.stderr and "pathways-worker" in worker.stderr
        nope = elxpk("workload", "logs", name, "--head", "--container", "nope", cluster=testcluster)
        assert nope.returncode == 2 and "--container nope" in nope.stderr, nope.stderr

        before = {p["metadata"]["uid"] for p in pods(testcluster, name)}
        watch = subprocess.Popen([str(ELXPK), "workload", "kill-slice", name, "--slice", "1", "--yes", "--watch",
                                  "--poll", "0.3s", "--timeout", "90s", "--kubeconfig", str(testcluster.kubeconfig)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 env={k: v for k, v in os.environ.items() if k != "KUBECONFIG"})
        try:
            degraded = testcluster.wait_for("Degraded while the slice is replaced", lambda: (
                s if (s := status(testcluster, name))["state"] == "Degraded" else None))
            assert (degraded["slices_healthy"], degraded["slices_total"]) == (1, 2), degraded
            # the trainer's first step after the kill (which came before Degraded), as the head's log line
            step = json.dumps({"event": "first_step_after_recovery", "time": time.time(), "step": 41})
            log_file.write_text(served + f"2026-01-01T00:00:05.000000000Z stdout F I1130 trainer] {step}\n")
            assert degraded["slices"][1]["budget_left"] == 3 and degraded["max_restarts"] == 1, degraded
            table = elxpk("workload", "status", name, cluster=testcluster)
            # Under CI load the replacement can be Running again before this second read: then the table
            # must show the spent budget of the recovery it just went through.
            if "State            Running  2/2" not in table.stdout:
                assert "Degraded  slice 1 restarting (budget 1/4 used)" in table.stdout, table.stdout
                assert "Slices healthy   1/2" in table.stdout, table.stdout
            assert "1/4 used, 3 left" in table.stdout, table.stdout
            assert "0 (maxRestarts 1: 0 counted, 1 left)" in table.stdout, table.stdout
            shown = elxpk("workload", "status", name, "-o", "yaml", cluster=testcluster)
            assert yaml.safe_load(shown.stdout)["state"] in ("Degraded", "Running"), shown.stdout
            out, err = watch.communicate(timeout=120)
        finally:
            if watch.poll() is None:
                watch.kill()
                watch.communicate()
        assert watch.returncode == 0, err
        said = out.splitlines()
        assert said[0] == f"killed slice 1 of {name}: 1 pods force-deleted", said
        assert said[1].startswith("slice 1's pods running and ready again after "), said
        # the recovery is the trainer's next step, here the head's log (no checkpoint directory, no record)
        # ... and its clock time, to lay beside the trainer's records (#52)
        assert re.fullmatch(r"recovered: the trainer's next step \S+ after the kill, at \d\d:\d\d:\d\d\.\dZ, "
                            r"from head's log", said[2]), said
        assert not {p["metadata"]["uid"] for p in pods(testcluster, name, **{
            "jobset.sigs.k8s.io/job-index": "1", "jobset.sigs.k8s.io/replicatedjob-name": "worker"})} & before
    finally:
        log_file.write_text(served)
        testcluster.remove_jobset("default", name)


def test_list_and_delete_all_stay_in_their_namespace(testcluster: LocalCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """`list` of a namespace with a JobSet made without xpk (alpha) and one by elxpk that succeeded (beta);
    `delete` of one, `delete --all` (which needs --yes) of the rest: the other namespace keeps its own."""
    monkeypatch.setenv("COLUMNS", "200")
    ns = ["-n", "team-a"]
    shape = ["--tpu-type=v5p-8", "--num-slices=1", "--no-pathways", "--queue=team-queue", "--command",
             "python3 train.py"]
    for name in ("alpha", "beta"):
        testcluster.remove_jobset("team-a", name)
    rendered = elxpk("workload", "create", "--workload=alpha", *ns, *shape, "--dry-run", "-o", "yaml",
                     cluster=testcluster)
    assert rendered.returncode == 0, rendered.stderr
    [alpha] = [d for d in yaml.safe_load_all(rendered.stdout) if d and d.get("kind") == "JobSet"]
    del alpha["metadata"]["labels"]["xpk.google.com/workload"]  # as if submitted with kubectl, not by xpk
    code, body = testcluster.request("POST", JOBSETS.format(ns="team-a"), alpha)
    assert code == 201, body
    made = elxpk("workload", "create", "--workload=beta", *ns, *shape, cluster=testcluster)
    assert made.returncode == 0, made.stderr
    try:
        assert elxpk("workload", "wait", "beta", *ns, "--for", "running", "--timeout", "60s", "--poll", "0.5s",
                     cluster=testcluster).returncode == 0
        assert testcluster.exit_pods("team-a", "jobset.sigs.k8s.io/jobset-name=beta", 0) == 1
        assert elxpk("workload", "wait", "beta", *ns, "--timeout", "60s", "--poll", "0.5s",
                     cluster=testcluster).returncode == 0
        assert elxpk("workload", "wait", "alpha", *ns, "--for", "running", "--timeout", "60s", "--poll", "0.5s",
                     cluster=testcluster).returncode == 0

        listed = elxpk("workload", "list", *ns, "-o", "json", cluster=testcluster)
        rows = {r["name"]: r for r in json.loads(listed.stdout)}
        assert set(rows) == {"alpha", "beta"}, rows
        assert rows["alpha"]["state"] == "Running" and rows["beta"]["state"] == "Succeeded", rows
        assert rows["beta"]["created_by"] == "elxpk" and rows["alpha"]["created_by"] is None, rows
        done = elxpk("workload", "list", *ns, "--status", "succeeded", "-o", "json", cluster=testcluster)
        assert [r["name"] for r in json.loads(done.stdout)] == ["beta"]
        done = elxpk("workload", "list", *ns, "--filter", "^al", "--regex", "-o", "json", cluster=testcluster)
        assert [r["name"] for r in json.loads(done.stdout)] == ["alpha"]
        table = elxpk("workload", "list", *ns, cluster=testcluster)
        assert table.returncode == 0 and "alpha" in table.stdout and "beta (xpk)" not in table.stdout, table.stdout

        elsewhere = {j["metadata"]["uid"] for j in testcluster.items(JOBSETS.format(ns="default"))}
        gone = elxpk("workload", "delete", "alpha", *ns, "--yes", cluster=testcluster)
        assert gone.returncode == 0 and "jobset/alpha deleted" in gone.stdout, gone.stderr
        refused = elxpk("workload", "delete", "--all", *ns, cluster=testcluster)  # stdin is not a terminal
        assert refused.returncode == 2 and "pass --yes" in refused.stderr, refused.stderr
        assert testcluster.items(JOBSETS.format(ns="team-a"))
        assert elxpk("workload", "delete", "beta", "--all", *ns, cluster=testcluster).returncode == 2
        everything = elxpk("workload", "delete", "--all", "--yes", *ns, cluster=testcluster)
        assert everything.returncode == 0, everything.stderr
        testcluster.wait_for("nothing left in team-a", lambda: not testcluster.items(
            JOBSETS.format(ns="team-a")) and not testcluster.items(PODS.format(ns="team-a")))
        assert {j["metadata"]["uid"] for j in testcluster.items(JOBSETS.format(ns="default"))} == elsewhere
    finally:
        for name in ("alpha", "beta"):
            testcluster.remove_jobset("team-a", name)

