"""`workload status NAME --watch` on the real control plane, as a person and a script see it.

- A 256-slice workload (kwok's v5p-8 pools; start the cluster with `--pools v5p-8:256,...`, else skipped):
  every refresh of the watch makes exactly the requests of one `status`, counted by the client itself
  (Kube.calls), while a slice is killed and its 256-pod workload restarts under the watch.
- The live view under tmux (120x40): Running 2/2, its phases (pods starting while the record is older than
  the pods, then restoring, compiling and stepping as the record says), the trainer's step, its rate and the checkpoint's age; `kill-slice` and the recovery seen live (the JSON stream
  of a second watcher holds the state with a slice down, then 2/2 again with the JobSet restart); the API
  server paused for 20 s (SIGSTOP of this cluster's kube-apiserver): "reconnecting" on the screen, then
  resumed, and every incident `events` lists (but the Warning Events, which `status` does not read) is in
  the stream once; Ctrl-C exits 130 (a JSON watcher, and the view under tmux); the workload succeeding ends the view with exit 0.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import time
from pathlib import Path

import pytest

from elxpk.cluster.access.connect import connect
from elxpk.cluster.access.target import ClusterTarget
from elxpk.cluster.verbs.observe import fetch_status
from elxpk.cluster.verbs.status_watch import WatchState, watch_status
from elxpk_contract.progress_record import PROGRESS_FILE, Progress
from tests.realcluster.test_lifecycle import pods
from tests.realcluster.test_submit_goldens import ELXPK, elxpk
from tools.testcluster.kubeapi import PODS, LocalCluster

JOBSET = "jobset.sigs.k8s.io/jobset-name"


def _running(cluster: LocalCluster, name: str, timeout: str) -> None:
    done = elxpk("workload", "wait", name, "--for", "running", "--timeout", timeout, "--poll", "2s",
                 cluster=cluster, timeout=900)
    assert done.returncode == 0, done.stderr


def _v5p8_nodes(cluster: LocalCluster) -> int:
    return len(cluster.items("/api/v1/nodes", labelSelector="cloud.google.com/gke-tpu-accelerator=tpu-v5p-slice"))


def test_a_refresh_of_256_slices_costs_one_status(testcluster: LocalCluster) -> None:
    if _v5p8_nodes(testcluster) < 256:
        pytest.skip("needs 256 v5p-8 slices: tools/testcluster up --pools v5p-8:256,v5litepod-16:3")
    name = "watch256"
    testcluster.remove_jobset("default", name)
    made = elxpk("workload", "create", f"--workload={name}", "--tpu-type=v5p-8", "--num-slices=256", "--no-pathways",
                 "--max-restarts=5", "--command", "python3 train.py", cluster=testcluster, timeout=300)
    assert made.returncode == 0, made.stderr
    try:
        _running(testcluster, name, "600s")
        kube = connect(ClusterTarget(kubeconfig=str(testcluster.kubeconfig)))
        kube.kueue_version()  # discovery: once per process, as in `status`

        costs: list[tuple[int, str]] = []  # each read: (calls, the stuck line it found)

        def read(on_objects=None):
            before = kube.calls
            found = fetch_status(kube, "default", name, now=time.time(), with_progress=True, stuck_after_s=120.0,
                                 on_objects=on_objects)
            costs.append((kube.calls - before, found.reason))
            return found

        read()
        one_status = costs.pop()[0]
        state = WatchState(name)
        killed: list[int] = []

        def on_change() -> None:  # after the first refresh, slice 0's pod goes (another client: not counted)
            if not killed:
                for pod in pods(testcluster, name, **{"jobset.sigs.k8s.io/job-index": "0"}):
                    status, _ = testcluster.request("DELETE", PODS.format(ns="default") + "/" + pod["metadata"]["name"],
                                                    {"gracePeriodSeconds": 0})
                    killed.append(status)

        before = kube.calls
        watches = 6
        watch_status(kube, "default", name, read, state, on_change=on_change, refresh_s=3, max_watches=watches)
        made_calls = kube.calls - before
        print(f"256 slices: one status = {one_status} calls; watch: {state.refreshes} refreshes, {watches} "
              f"watches, {made_calls} calls, {state.incident_count} incidents; per refresh {costs}")
        assert killed and one_status <= 5 and len(costs) == state.refreshes
        assert made_calls == sum(calls for calls, _ in costs) + watches  # the watches, and the refreshes
        # each refresh is one `status`: its 4 LISTs and GET, and the full pod LIST `status` adds once the
        # workload has been Restarting past --stuck-after (here: since it was created, 256 pods ago)
        assert all(calls == one_status + (1 if stuck else 0) for calls, stuck in costs), costs
        assert state.incident_count >= 1  # the kill, seen on the watch
    finally:
        testcluster.remove_jobset("default", name)


def _screen(session: str) -> str:
    return subprocess.run(["tmux", "capture-pane", "-p", "-t", session], capture_output=True, text=True,
                          check=True).stdout


def _until(session: str, what: str, check, timeout: float = 120) -> str:
    deadline = time.monotonic() + timeout
    while True:
        screen = _screen(session)
        if check(screen):
            return screen
        assert time.monotonic() < deadline, f"{what}: not on the screen within {timeout:.0f} s:\n{screen}"
        time.sleep(0.3)


def _records(path: Path) -> list[dict]:
    # A line still being written (a record longer than the writer's buffer reaches the file in pieces) is
    # not a record yet: only the lines a newline ends.
    return [json.loads(line) for line in path.read_text().split("\n")[:-1] if line.strip()]


def _record(directory: Path, progress: Progress) -> None:
    """The progress record as the trainer publishes it: written whole, then renamed."""
    partial = directory / f".{PROGRESS_FILE}.partial"
    partial.write_text(json.dumps(progress.to_json()))
    partial.replace(directory / PROGRESS_FILE)


def _down_then_back(states: list[tuple]) -> bool:
    """(state, slices healthy, JobSet restarts) records: one with a slice down or the restart counted, then
    one with both slices back after that restart."""
    down = next((i for i, s in enumerate(states) if s[0] is not None and (s[1] < 2 or s[2] >= 1)), None)
    return down is not None and any(s[1] == 2 and s[2] == 1 for s in states[down:])


def test_live_view_kill_recovery_pause_and_end(testcluster: LocalCluster, tmp_path: Path) -> None:
    name = "watchme"
    testcluster.remove_jobset("default", name)
    progress = tmp_path / "ckpt"  # the trainer's progress record, as status reads it from --checkpoint-dir
    progress.mkdir()
    started = time.time()
    (progress / PROGRESS_FILE).write_text(json.dumps(Progress(130, started, 100, started - 100, started).to_json()))
    made = elxpk("workload", "create", f"--workload={name}", "--tpu-type=v5litepod-16", "--num-slices=2",
                 "--no-pathways", "--max-restarts=5", "--command", "python3 train.py",
                 f"--checkpoint-dir={progress}", cluster=testcluster)
    assert made.returncode == 0, made.stderr
    session = f"elxpk-watch-{os.getpid()}"
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    stream_path, exit_file = tmp_path / "stream.jsonl", tmp_path / "exit"
    apiserver = json.loads((testcluster.run_dir / "pids.json").read_text())["kube-apiserver"]
    streamer = None
    try:
        _running(testcluster, name, "180s")
        argv = [str(ELXPK), "workload", "status", name, "--watch", "--kubeconfig", str(testcluster.kubeconfig)]
        with stream_path.open("w") as out:
            streamer = subprocess.Popen([*argv, "-o", "json"], stdout=out, stderr=subprocess.PIPE, text=True, env=env)
        shell = f"{shlex.join(argv)}; echo $? > {shlex.quote(str(exit_file))}; sleep 600"
        subprocess.run(["tmux", "new-session", "-d", "-x", "120", "-y", "40", "-s", session,
                        "env", "-u", "KUBECONFIG", "bash", "-c", shell], check=True, env=env)
        screen = _until(session, "Running 2/2", lambda s: "Slices healthy  2/2" in s and "Running" in s)
        assert "Traceback" not in screen and "Ctrl-C to stop watching" in screen
        # the record was written before the pods started: their processes have not reported yet
        screen = _until(session, "pods starting", lambda s: "Phase           pods starting" in s)
        assert "Trainer         last step 130," in screen and "Checkpoint      step 100 committed 1m" in screen

        # the trainer steps (its record newer than the pods), then moves on 40 steps in 20 s: the rate of the
        # last two records
        stepped = time.time()
        _record(progress, Progress(130, stepped - 20, 100, started - 100, stepped, phase="stepping"))
        screen = _until(session, "stepping", lambda s: "Phase           stepping" in s and "step 130 done" in s)
        _record(progress, Progress(170, stepped, 100, started - 100, time.time(), phase="stepping"))
        screen = _until(session, "the step rate", lambda s: "step 170 done" in s and "2.00 steps/s" in s)

        # a kill and the recovery, live
        assert elxpk("workload", "kill-slice", name, "--slice", "0", "--yes", cluster=testcluster).returncode == 0
        screen = _until(session, "the JobSet restart", lambda s: "JobSet restarts 1" in s and "jobset_restart" in s
                        and "Slices healthy  2/2" in s)
        print("after the kill and the recovery:\n" + screen)
        # every pod running again, the record still the killed process's: pods starting, no rate; then the
        # phases the new processes publish
        screen = _until(session, "pods starting after the restart", lambda s: "Phase           pods starting" in s)
        assert "steps/s" not in screen and "Trainer         last step 170," in screen
        for phase in ("restoring", "compiling"):
            _record(progress, Progress(170, stepped, 100, started - 100, time.time(), phase=phase))
            _until(session, phase, lambda s, p=phase: f"Phase           {p}" in s)
        _record(progress, Progress(171, time.time(), 100, started - 100, time.time(), phase="stepping"))
        _until(session, "stepping again", lambda s: "Phase           stepping" in s and "step 171 done" in s)
        testcluster.wait_for("the JSON stream: a slice down, then 2/2 with the restart", lambda: _down_then_back(
            [(r.get("state"), r.get("slices_healthy"), r.get("jobset_restarts")) for r in _records(stream_path)]))

        # a kill just before the API server stops answering for 20 s
        assert elxpk("workload", "kill-slice", name, "--slice", "1", "--yes", cluster=testcluster).returncode == 0
        os.kill(apiserver, signal.SIGSTOP)
        paused = time.monotonic()
        try:
            screen = _until(session, "reconnecting", lambda s: "reconnecting: no answer from the API server" in s,
                            timeout=19)
            print(f"paused, after {time.monotonic() - paused:.1f} s:\n" + screen)
            time.sleep(max(0.0, 20 - (time.monotonic() - paused)))
        finally:
            os.kill(apiserver, signal.SIGCONT)
        screen = _until(session, "resumed, the second restart", lambda s: "reconnecting" not in s
                        and "JobSet restarts 2" in s and "Slices healthy  2/2" in s, timeout=180)
        print("resumed:\n" + screen)
        assert any(r.get("connection", "").startswith("reconnecting") for r in _records(stream_path))

        # no incident lost: everything `events` lists from the objects is in the stream, once
        listed = elxpk("workload", "events", name, "-o", "json", cluster=testcluster)
        assert listed.returncode == 0, listed.stderr
        expected = {json.loads(line)["id"] for line in listed.stdout.splitlines()
                    if json.loads(line)["kind"] != "event"}
        streamed = [i["id"] for r in _records(stream_path) for i in r["new_incidents"]]
        assert len(streamed) == len(set(streamed))
        assert expected <= set(streamed), expected - set(streamed)

        # Ctrl-C: 130, as a shell expects
        with (tmp_path / "third.jsonl").open("w") as out:
            third = subprocess.Popen([*argv, "-o", "json"], stdout=out, stderr=subprocess.PIPE, text=True, env=env)
        deadline = time.monotonic() + 60
        while not _records(tmp_path / "third.jsonl") and time.monotonic() < deadline:
            time.sleep(0.2)
        third.send_signal(signal.SIGINT)
        assert third.wait(timeout=60) == 130
        stopped_file = tmp_path / "stopped"
        stopper = f"{shlex.join(argv)}; echo $? > {shlex.quote(str(stopped_file))}; sleep 600"
        subprocess.run(["tmux", "new-session", "-d", "-x", "120", "-y", "40", "-s", session + "-c",
                        "env", "-u", "KUBECONFIG", "bash", "-c", stopper], check=True, env=env)
        _until(session + "-c", "the second view", lambda s: "Slices healthy  2/2" in s)
        subprocess.run(["tmux", "send-keys", "-t", session + "-c", "C-c"], check=True)
        screen = _until(session + "-c", "the view stopped", lambda s: stopped_file.exists(), timeout=60)
        assert stopped_file.read_text().strip() == "130" and "Traceback" not in screen
        assert "Slices healthy  2/2" in screen  # the last view stays on the screen

        # the workload succeeds: the view ends with exit 0
        assert testcluster.exit_pods("default", f"{JOBSET}={name}", 0) > 0
        screen = _until(session, "Succeeded", lambda s: exit_file.exists() and "Succeeded" in s, timeout=180)
        print("succeeded:\n" + screen)
        assert exit_file.read_text().strip() == "0"
        assert streamer.wait(timeout=60) == 0
        assert _records(stream_path)[-1]["state"] == "Succeeded"
    finally:
        os.kill(apiserver, signal.SIGCONT)  # never leave the cluster paused
        for each in (session, session + "-c"):
            subprocess.run(["tmux", "kill-session", "-t", each], check=False, capture_output=True)
        if streamer is not None and streamer.poll() is None:
            streamer.kill()
        testcluster.remove_jobset("default", name)
