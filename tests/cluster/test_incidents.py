"""`workload events` (incidents from seeded pods, JobSet, Kueue and Events; --record locally and on gs://),
`workload status` restarts by cause and trainer progress, and `workload logs --previous`."""

from __future__ import annotations

import json
import threading

import pytest

from elxpk.cluster.incident_log import read_recorded, record
from elxpk.cluster.incidents import Incident, classify_exit
from elxpk.cluster.observe import fetch_status
from tests.cluster.conftest import START, WORKER, pathways_jobset, run_cli, running
from tests.support.fake_gcs import FakeGcs


@pytest.fixture(autouse=True)
def wide_terminal(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")


def _pod(ctl, slice_index: int, vm: int = 0) -> str:
    pods = ctl.pods(f"{WORKER},jobset.sigs.k8s.io/job-index={slice_index},"
                    f"batch.kubernetes.io/job-completion-index={vm}")
    return pods[0]["metadata"]["name"]


def _seed_incidents(fake, ctl, clock):
    """An OOM kill on slice 0, an eviction on slice 1 (node gke-tpu-7), a Kueue eviction, a Warning Event."""
    oom, evicted = _pod(ctl, 0), _pod(ctl, 1, 1)
    clock.now += 60
    ctl.crash_pod(oom, exit_code=137, reason="OOMKilled")
    clock.now += 60
    ctl.disrupt_pod(evicted, "EvictionByEvictionAPI", node="gke-tpu-7")
    clock.now += 60
    ctl.evict_workload()
    fake.store.create(("", "events"), {
        "metadata": {"name": f"{evicted}.1", "namespace": "default"}, "type": "Warning", "reason": "FailedMount",
        "message": "MountVolume.SetUp failed for volume gcs-fuse", "lastTimestamp": "2026-05-28T20:30:00Z",
        "involvedObject": {"kind": "Pod", "name": evicted, "namespace": "default"},
        "source": {"host": "gke-tpu-7"}})
    fake.store.create(("", "events"), {  # another workload's Event: not ours
        "metadata": {"name": "other.1", "namespace": "default"}, "type": "Warning", "reason": "BackOff",
        "involvedObject": {"kind": "Pod", "name": "other-pod"}, "lastTimestamp": "2026-05-28T20:30:00Z"})
    return oom, evicted


def test_events_show_oom_kill_eviction_kueue_and_warning_events(fake, clock, capsys, k):
    ctl = running(fake, clock, slices=2, vms=2)
    oom, evicted = _seed_incidents(fake, ctl, clock)
    code, out, err = run_cli(capsys, "workload", "events", "train", *k)
    assert code == 0, err
    lines = out.splitlines()
    exit_line = next(line for line in lines if "exit 137/OOMKilled" in line)
    assert f"slice 0 pod {oom}" in exit_line and "killed by SIGKILL" in exit_line and " unknown " in exit_line
    eviction = next(line for line in lines if "EvictionByEvictionAPI" in line)
    assert eviction.split()[1:3] == ["disruption", "infra"]
    assert f"slice 1 pod {evicted} node gke-tpu-7" in eviction
    assert any("kueue_eviction" in line and "Preempted" in line for line in lines)
    assert any("FailedMount" in line and "gcs-fuse" in line for line in lines)
    assert not any("other-pod" in line for line in lines)
    code, out, _ = run_cli(capsys, "workload", "events", "train", "-o", "json", *k)
    records = [json.loads(line) for line in out.splitlines()]
    oom_record = next(r for r in records if r["exit_code"] == 137)
    assert (oom_record["reason"], oom_record["slice"], oom_record["pod"]) == ("OOMKilled", 0, oom)
    times = [r["time"] for r in records if r["time"]]
    assert times == sorted(times)  # oldest first


def test_events_classify_exit_codes_with_the_trainer_table(fake, clock, capsys, k):
    ctl = running(fake, clock, slices=2, vms=1)
    ctl.crash_pod(_pod(ctl, 0), exit_code=75)
    ctl.crash_pod(_pod(ctl, 1), exit_code=70)
    code, out, _ = run_cli(capsys, "workload", "events", "train", "-o", "json", *k)
    causes = {r["exit_code"]: (r["cause"], r["message"]) for r in map(json.loads, out.splitlines())}
    assert causes[75] == ("infra", "slice_lost") and causes[70] == ("user", "user_error")
    assert (classify_exit(76), classify_exit(2), classify_exit(134)) == ("infra", "user", "unknown")


def test_events_jobset_restart_and_first_failed_job(fake, clock, capsys, k):
    ctl = running(fake, clock, slices=2, vms=1, max_restarts=2)
    clock.now += 100
    ctl.exhaust_slice(1)  # slice 1's Job fails; the JobSet recreates everything
    code, out, _ = run_cli(capsys, "workload", "events", "train", "-o", "json", *k)
    kinds = [json.loads(line)["kind"] for line in out.splitlines()]
    assert "jobset_restart" in kinds
    # the failed Job went with the restart (its pods too): what the objects still show is the restart
    restart = next(json.loads(line) for line in out.splitlines() if json.loads(line)["kind"] == "jobset_restart")
    assert restart["message"].startswith("JobSet restart 1 of train (1 counted")
    assert restart["time"] is not None


def test_first_failed_job_is_marked(fake, clock, capsys, k):
    ctl = running(fake, clock, slices=2, vms=1, max_restarts=0)
    clock.now += 10
    ctl.exhaust_slice(1)
    code, out, _ = run_cli(capsys, "workload", "events", "train", *k)
    failed = [line for line in out.splitlines() if "job_failed" in line]
    assert len(failed) == 1 and "first failed Job" in failed[0] and "train-worker-1" in failed[0]


def test_record_appends_each_incident_once(fake, clock, capsys, k, tmp_path):
    ctl = running(fake, clock, slices=2, vms=2)
    _seed_incidents(fake, ctl, clock)
    path = tmp_path / "incidents.jsonl"
    code, out, err = run_cli(capsys, "workload", "events", "train", "--record", str(path), *k)
    assert code == 0, err
    first = path.read_text().splitlines()
    assert len(first) == len(out.splitlines()) >= 4
    ctl.crash_pod(_pod(ctl, 1, 0), exit_code=76)  # one new incident
    run_cli(capsys, "workload", "events", "train", "--record", str(path), *k)
    second = path.read_text().splitlines()
    assert second[: len(first)] == first and len(second) == len(first) + 1
    assert json.loads(second[-1])["exit_code"] == 76
    ids = [json.loads(line)["id"] for line in second]
    assert len(set(ids)) == len(ids)
    fake.store.delete(("jobset.x-k8s.io", "jobsets"), "default", "train")  # the pods go; the record stays
    assert [r["id"] for r in read_recorded(str(path))] == ids


def test_record_path_problems_exit_2_before_any_request(fake, capsys, k, tmp_path):
    before = len(fake.calls)
    code, _, err = run_cli(capsys, "workload", "events", "train", "--record", str(tmp_path / "no" / "x.jsonl"), *k)
    assert code == 2 and "does not exist; create it first" in err
    code, _, err = run_cli(capsys, "workload", "events", "train", "--record", "gs://bucket-only", *k)
    assert code == 2 and "--record gs://bucket-only: name an object" in err
    assert len(fake.calls) == before


@pytest.fixture()
def gcs(monkeypatch):
    server = FakeGcs().start()
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", server.url)
    yield server
    server.stop()


def _incident(n: int) -> Incident:
    return Incident(id=f"id-{n}", time=f"2026-05-28T20:{n % 60:02d}:00Z", kind="exit", cause="infra",
                    reason="Error", exit_code=75, pod=f"p{n}")


def test_record_on_gcs_concurrent_appenders_lose_nothing(gcs):
    url = "gs://runs/incidents/train.jsonl"
    assert record(url, [_incident(0), _incident(1)]) == 2
    assert record(url, [_incident(1)]) == 0  # already there

    def appender(start: int) -> None:
        for n in range(start, start + 10):
            record(url, [_incident(n)])

    threads = [threading.Thread(target=appender, args=(start,)) for start in (100, 200, 300)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ids = [r["id"] for r in read_recorded(url)]
    assert sorted(ids) == sorted({f"id-{n}" for n in (0, 1, *range(100, 110), *range(200, 210), *range(300, 310))})


def test_events_record_to_gcs_through_the_cli(fake, clock, capsys, k, gcs):
    ctl = running(fake, clock, slices=2, vms=2)
    _seed_incidents(fake, ctl, clock)
    url = "gs://runs/train/incidents.jsonl"
    for _ in range(2):
        code, out, err = run_cli(capsys, "workload", "events", "train", "--record", url, *k)
        assert code == 0, err
    content, _ = gcs.objects[("runs", "train/incidents.jsonl")]
    assert len(content.decode().splitlines()) == len(out.splitlines())


# --- status: restarts by cause, trainer progress ------------------------------------------------------------


def _with_checkpoint_dir(directory: str, **kwargs) -> dict:
    jobset = pathways_jobset(**kwargs)
    head = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]
    head["env"].append({"name": "ELXPK_CHECKPOINT_DIR", "value": directory})
    return jobset


def _write_progress(directory, **fields) -> None:
    from elxpk_contract.records import PROGRESS_FILE, Progress

    progress = Progress(**{"steps_done": 130, "step_time": START - 30, "checkpoint_step": 100,
                           "checkpoint_time": START - 600, "updated_at": START - 30, **fields})
    (directory / PROGRESS_FILE).write_text(json.dumps(progress.to_json()))


def test_status_splits_restarts_by_cause(fake, clock, kube, capsys, k):
    ctl = running(fake, clock, slices=3, vms=1)
    ctl.crash_pod(_pod(ctl, 0), exit_code=75)  # infra: slice lost
    ctl.crash_pod(_pod(ctl, 0), exit_code=75)
    ctl.crash_pod(_pod(ctl, 1), exit_code=70)  # user error
    ctl.disrupt_pod(_pod(ctl, 2), "PreemptionByScheduler")  # infra, whatever the code
    status = fetch_status(kube, "default", "train", now=clock())
    assert status.restart_causes == {"infra": 3, "user": 1, "unknown": 0}
    code, out, _ = run_cli(capsys, "workload", "status", "train", *k)
    assert "Restart causes   3 infra, 1 user  (infra: disruption" in out
    code, out, _ = run_cli(capsys, "workload", "status", "train", "-o", "json", *k)
    assert json.loads(out)["restart_causes"]["user"] == 1


def test_status_shows_trainer_progress_and_ages(fake, clock, kube, capsys, k, tmp_path):
    running(fake, clock, _with_checkpoint_dir(str(tmp_path)))
    status = fetch_status(kube, "default", "train", now=clock(), with_progress=True)
    assert status.progress is None and "no elxpk-progress.json in" in status.progress_problem
    _write_progress(tmp_path)
    status = fetch_status(kube, "default", "train", now=clock(), with_progress=True)
    assert (status.progress["steps_done"], status.progress["checkpoint_step"]) == (130, 100)
    assert (status.progress["step_age_s"], status.progress["checkpoint_age_s"]) == (30.0, 600.0)
    code, out, _ = run_cli(capsys, "workload", "status", "train", *k)
    assert code == 0
    line = next(line for line in out.splitlines() if line.startswith("Trainer "))
    assert "step 130 done " in line and "checkpoint 100 committed " in line
    (tmp_path / "elxpk-progress.json").write_text("{not json")
    code, out, _ = run_cli(capsys, "workload", "status", "train", *k)
    assert code == 0 and "elxpk-progress.json: not JSON" in out


def test_status_warns_when_saves_stopped_two_periods_ago(fake, clock, kube, capsys, k, tmp_path):
    jobset = _with_checkpoint_dir(str(tmp_path))
    head = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]
    head["env"].append({"name": "ELXPK_CHECKPOINT_PERIOD", "value": "15"})
    running(fake, clock, jobset)
    _write_progress(tmp_path)  # step 130, the last checkpoint at 100: two periods of 15
    status = fetch_status(kube, "default", "train", now=clock(), with_progress=True)
    assert (status.progress["checkpoint_period"], status.progress["saves_stopped"]) == (15, True)
    code, out, _ = run_cli(capsys, "workload", "status", "train", *k)
    assert code == 0 and "saves stopped: no checkpoint for 30 steps (period 15)" in " ".join(out.split())
    _write_progress(tmp_path, checkpoint_step=120)
    assert not fetch_status(kube, "default", "train", now=clock(), with_progress=True).progress["saves_stopped"]
    _write_progress(tmp_path, state="done")  # a finished run saves no more
    assert not fetch_status(kube, "default", "train", now=clock(), with_progress=True).progress["saves_stopped"]


def test_status_reads_progress_from_gcs(fake, clock, kube, gcs):
    from elxpk_contract.records import Progress

    running(fake, clock, _with_checkpoint_dir("gs://runs/ckpt"))
    progress = Progress(7, START - 5, None, None, START - 5, "stalled")
    gcs.objects[("runs", "ckpt/elxpk-progress.json")] = (json.dumps(progress.to_json()).encode(), 1)
    status = fetch_status(kube, "default", "train", now=clock(), with_progress=True)
    assert status.progress["state"] == "stalled" and status.progress["step_age_s"] == 5.0


# --- logs --previous ------------------------------------------------------------------------------------------


def test_logs_previous_shows_the_terminated_container(fake, clock, capsys, k):
    ctl = running(fake, clock, slices=2, vms=1)
    pod = _pod(ctl, 1)
    fake.store.append_log("default", pod, "pathways-worker", "step 10", "RESOURCE_EXHAUSTED: out of HBM")
    ctl.crash_pod(pod, exit_code=137, reason="OOMKilled")
    fake.store.append_log("default", pod, "pathways-worker", "starting again")
    code, out, err = run_cli(capsys, "workload", "logs", "train", "--slice", "1", "--previous", *k)
    assert code == 0, err
    assert out == "step 10\nRESOURCE_EXHAUSTED: out of HBM\n" and "(previous, terminated)" in err
    assert any(c.query.get("previous") == ["true"] for c in fake.calls if c.path.endswith("/log"))
    code, out, _ = run_cli(capsys, "workload", "logs", "train", "--slice", "1", *k)
    assert out == "starting again\n"
    code, out, err = run_cli(capsys, "workload", "logs", "train", "--slice", "0", "--previous", *k)
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert code == 1 and len(errors) == 1 and "no previous log" in errors[0] and "Traceback" not in err
    code, _, err = run_cli(capsys, "workload", "logs", "train", "--previous", "-f", *k)
    assert code == 2 and "--previous and --follow" in err


def test_watch_follows_new_incidents_through_the_watch_api(fake, clock, kube):
    from elxpk.cluster.events_feed import follow

    ctl = running(fake, clock, slices=2, vms=1)
    ctl.crash_pod(_pod(ctl, 0), exit_code=75)
    seen: list[tuple[Incident, bool]] = []

    def emit(incident: Incident) -> None:
        seen.append((incident, fake.calls[-1].query.get("watch") == ["true"]))
        if len(seen) == 1:  # while the first snapshot is shown, slice 1 fails
            ctl.crash_pod(_pod(ctl, 1), exit_code=137, reason="OOMKilled")

    count = follow(kube, "default", "train", emit, watch=True, clock=clock, watch_s=1, max_watches=1)
    assert count == 2 and [i.exit_code for i, _ in seen] == [75, 137]
    assert seen[1][1]  # the second came in on the watch, not from a later snapshot
    assert sum(1 for c in fake.calls if c.query.get("watch") == ["true"]) == 1


def test_status_names_jobset_restarts_a_failure_policy_rule_did_not_count(fake, clock, capsys, k):
    ctl = running(fake, clock, slices=2, vms=1, max_restarts=3)
    ctl.exhaust_slice(0)  # counted
    js = ctl.jobset()
    js["status"]["restarts"] = 3  # two more, restarted by a rule that ignores maxRestarts (infra reasons)
    fake.store.put(("jobset.x-k8s.io", "jobsets"), js)
    code, out, _ = run_cli(capsys, "workload", "status", "train", *k)
    assert "3 (maxRestarts 3: 1 counted, 2 left); 2 not counted (a failurePolicy rule" in out


def test_normal_events_count_only_when_they_report_an_incident(fake, clock, kube):
    from elxpk.cluster.events_feed import snapshot

    ctl = running(fake, clock, slices=1, vms=1)
    pod = _pod(ctl, 0)
    for n, reason in enumerate(("Scheduled", "Preempted")):
        fake.store.create(("", "events"), {
            "metadata": {"name": f"{pod}.{n}", "namespace": "default"}, "type": "Normal", "reason": reason,
            "message": reason, "lastTimestamp": "2026-05-28T20:30:00Z",
            "involvedObject": {"kind": "Pod", "name": pod}})
    incidents, finished = snapshot(kube, "default", "train")
    assert [(i.kind, i.reason, i.cause) for i in incidents] == [("event", "Preempted", "infra")]
    assert not finished


def test_unreachable_gcs_is_one_line(fake, clock, capsys, k, monkeypatch):
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", f"http://127.0.0.1:{port}")
    ctl = running(fake, clock, slices=1, vms=1)
    ctl.crash_pod(_pod(ctl, 0), exit_code=75)
    code, _, err = run_cli(capsys, "workload", "events", "train", "--record", "gs://runs/incidents.jsonl", *k)
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert code == 1 and len(errors) == 1 and "cannot reach Cloud Storage" in errors[0] and "Traceback" not in err


def test_watch_on_a_finished_workload_prints_its_history_and_returns(fake, clock, capsys, k):
    ctl = running(fake, clock, slices=1, vms=1)
    ctl.crash_pod(_pod(ctl, 0), exit_code=76)
    ctl.heal()
    ctl.complete()
    code, out, err = run_cli(capsys, "workload", "events", "train", "--watch", *k)
    assert code == 0, err
    assert len(out.splitlines()) == 1 and "exit 76/Error" in out and "stalled" in out
    assert not any(c.query.get("watch") for c in fake.calls)


def test_a_record_on_gcs_over_its_cap_is_refused_unread(gcs, tmp_path, capsys):
    """gs:// records are bounded like local ones: at most the cap plus one byte is downloaded."""
    from elxpk.bounded_read import INCIDENT_BYTES
    from elxpk.errors import ClusterError, UsageError

    gcs.objects[("runs", "big.jsonl")] = (b"x" * (INCIDENT_BYTES + 10), 1)
    with pytest.raises(UsageError, match="over the 2.0 MiB"):
        read_recorded("gs://runs/big.jsonl")
    with pytest.raises(ClusterError, match="over 2 MiB; start a new object"):
        record("gs://runs/big.jsonl", [_incident(0)])
    assert gcs.objects[("runs", "big.jsonl")][0] == b"x" * (INCIDENT_BYTES + 10)  # untouched


def test_each_watch_resumes_where_the_last_one_ended(fake, clock, kube):
    """A pod that comes and goes between two watches (the server ends a watch on its timeout, or early when
    the reader falls behind) is still seen: the next watch starts at the resourceVersion the last one reached."""
    from elxpk.cluster.events_feed import follow

    running(fake, clock, slices=2, vms=1)
    follow(kube, "default", "train", lambda incident: None, watch=True, clock=clock, watch_s=1, max_watches=2)
    watches = [c.query for c in fake.calls if c.query.get("watch") == ["true"]]
    assert len(watches) == 2 and "resourceVersion" not in watches[0] and watches[0]["allowWatchBookmarks"] == ["true"]
    assert int(watches[1]["resourceVersion"][0]) > 0
