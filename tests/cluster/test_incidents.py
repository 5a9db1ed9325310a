"""`workload events` and `workload logs --previous` where a real API server cannot show it: the watch protocol
(one watch, resumed at the resourceVersion reached), the requests made, a container with no previous log,
usage errors, and gs:// faults. The objects are the real controllers' (tests/cluster/incidents_corpus/).

The stories themselves (exits, Warning Events, JobSet restarts, the first failed Job, Kueue evictions,
--record locally and on gs://, restarts by cause) run on the real controllers:
tests/realcluster/test_incidents_real.py; trainer progress: tests/realcluster/test_progress_real.py."""

from __future__ import annotations

import threading

import pytest

from elxpk.cluster.records.incident_log import read_recorded, record
from elxpk.cluster.records.incidents import Incident, classify_exit, collect, exit_meaning
from tests.cluster.captured import load, name_of, pod_of, seed
from tests.cluster.conftest import run_cli
from tests.support.fake_gcs import FakeGcs


@pytest.fixture(autouse=True)
def wide_terminal(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")


def test_exit_codes_are_classified_with_the_trainer_table():
    """The table behind each exit's cause and meaning (the real exits: test_incidents_real.py)."""
    assert [(classify_exit(c), exit_meaning(c)) for c in (75, 76, 77, 70, 2)] == [
        ("infra", "slice_lost"), ("infra", "stalled"), ("infra", "preempted"), ("user", "user_error"),
        ("user", "bad_settings")]
    # #43: the victim of a kill (137 after SIGKILL, 143 after SIGTERM) is infra; the OOM killer's 137 is not
    assert (classify_exit(134), classify_exit(137), exit_meaning(137)) == ("unknown", "infra", "killed by SIGKILL")
    assert (classify_exit(143), classify_exit(137, "OOMKilled"), classify_exit(137, "Error")) == ("infra", "user", "infra")


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


def test_gcs_reads_and_the_conditional_write_retry_within_the_one_policy(gcs):
    """Cloud Storage under elxpk/retry_policy.py: a 503 or 429 is tried again after 0.5 s, 1 s, ...; four
    failed tries are one line naming them; a conditional write repeated after a 503 lands once."""
    from elxpk.cluster.api.gcs import Gcs
    from elxpk.errors import ClusterError

    slept: list[float] = []
    store = Gcs(what="--record", sleep=slept.append)
    url = "gs://runs/incidents/retried.jsonl"
    gcs.faults[:] = [503, 429]
    assert store.append_lines(url, lambda _: ["a"]) == 1
    assert slept == [0.5, 1.0] and gcs.requests == 4  # the read twice refused, then read and write
    gcs.faults[:] = [None, 503]  # the read served, the write refused
    requests, slept[:] = gcs.requests, []
    assert store.append_lines(url, lambda content: [] if b"b" in content else ["b"]) == 1
    assert gcs.requests - requests == 3 and slept == [0.5] and store.read(url)[0] == b"a\nb\n"
    gcs.faults[:] = [503] * 4
    slept.clear()
    with pytest.raises(ClusterError, match=r"Cloud Storage answered 503 to reading gs://runs/incidents/retried.jsonl "
                                           r"after 4 attempts: Backend Error"):
        store.read(url)
    assert slept == [0.5, 1.0, 2.0]


# --- logs --previous ------------------------------------------------------------------------------------------


def test_logs_show_the_trainer_s_speed_line_as_it_wrote_it(fake, capsys, k):
    """The trainer's `completed step` line (trainer/speed_log.py), as its pod logged it, reaches `workload logs`
    unchanged: issue 50's "workload logs shows it"."""
    from elxpk_contract.speed import SpeedBasis, SpeedSum
    from trainer.speed_log import line

    total = SpeedSum(SpeedBasis(2048, 7.5e10, 16, "TPU v5 lite", 197.0))
    total.add(96, 3, 0.41)
    speed_line = line(99, total.speed(), 3.1416)
    assert "MFU: " in speed_line and speed_line.startswith("completed step: 99, seconds: 0.410, TFLOP/s/device: ")
    objects = seed(fake, "ignored")
    running = pod_of(objects, 1, phase="Running")
    name, pod, container = name_of(objects), running["metadata"]["name"], running["spec"]["containers"][0]["name"]
    fake.store.append_log("default", pod, container, "starting", speed_line)
    code, out, err = run_cli(capsys, "workload", "logs", name, "--slice", "1", *k)
    assert code == 0, err
    assert out == f"starting\n{speed_line}\n"


def test_logs_previous_shows_the_terminated_container(fake, capsys, k):
    """kwok serves a previous log for every container (test_lifecycle.py reads it); a container that never
    terminated, whose previous log the kubelet answers 400, is what only the fake can show."""
    objects = seed(fake, "ignored")
    running = pod_of(objects, 1, phase="Running")  # the replacement of the pod that exited 77: the newest
    name, pod, container = name_of(objects), running["metadata"]["name"], running["spec"]["containers"][0]["name"]
    fake.store.append_log("default", pod, container, "step 10", "RESOURCE_EXHAUSTED: out of HBM")
    fake.store.restart_log("default", pod, container)
    fake.store.append_log("default", pod, container, "starting again")
    code, out, err = run_cli(capsys, "workload", "logs", name, "--slice", "1", "--previous", *k)
    assert code == 0, err
    assert out == "step 10\nRESOURCE_EXHAUSTED: out of HBM\n" and "(previous, terminated)" in err
    assert any(c.query.get("previous") == ["true"] for c in fake.calls if c.path.endswith("/log"))
    code, out, _ = run_cli(capsys, "workload", "logs", name, "--slice", "1", *k)
    assert out == "starting again\n"
    code, out, err = run_cli(capsys, "workload", "logs", name, "--slice", "0", "--previous", *k)
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert code == 1 and len(errors) == 1 and "no previous log" in errors[0] and "Traceback" not in err
    code, _, err = run_cli(capsys, "workload", "logs", name, "--previous", "-f", *k)
    assert code == 2 and "--previous and --follow" in err


def test_watch_follows_new_incidents_through_the_watch_api(fake, clock, kube):
    """While the history is shown, a pod fails (the exit-70 pod of the real story's last stage): it comes in
    on the one watch, not from a later snapshot."""
    from elxpk.cluster.verbs.events_feed import follow

    objects = seed(fake, "ignored")
    failed = pod_of(load("failed"), 0)
    history = collect(objects["jobset"], objects["jobs"], objects["pods"], objects["workloads"], objects["events"])
    seen: list[tuple[Incident, bool]] = []

    def emit(incident: Incident) -> None:
        seen.append((incident, fake.calls[-1].query.get("watch") == ["true"]))
        if len(seen) == 1:  # while the first snapshot is shown, slice 0 fails again
            fake.store.create(("", "pods"), failed)

    count = follow(kube, "default", name_of(objects), emit, watch=True, clock=clock, watch_s=1, max_watches=1)
    assert count == len(history) + 1 and [i.id for i, _ in seen[:-1]] == [i.id for i in history]
    assert (seen[-1][0].exit_code, seen[-1][0].pod) == (70, failed["metadata"]["name"])
    assert seen[-1][1]  # it came in on the watch, not from a later snapshot
    assert sum(1 for c in fake.calls if c.query.get("watch") == ["true"]) == 1


def test_normal_events_count_only_when_they_report_an_incident(fake, kube):
    """The real components' Events about the workload (the JobSet, Job and Kueue controllers', the scheduler's
    Scheduled, a kubelet's FailedMount): the Warning ones are incidents, the Normal ones only when they report
    one (Kueue's and the scheduler's preemptions and evictions), and then once (#33): Kueue's
    EvictedDueToDeactivated is the Workload's Evicted condition, one line. Events of an earlier JobSet of
    the same name (the story reuses its names; the API server keeps Events an hour) are not this one's."""
    from elxpk.cluster.objects.labels import parse_time
    from elxpk.cluster.verbs.events_feed import snapshot

    hidden = {}
    for stage in ("ignored", "evicted"):
        objects = seed(fake, stage)
        incidents, finished = snapshot(kube, "default", name_of(objects))
        events = {i.reason: i for i in incidents if i.kind == "event"}
        born = parse_time(objects["jobset"]["metadata"]["creationTimestamp"]) or 0.0
        mine = [e for e in objects["events"] if (parse_time(e.get("lastTimestamp") or e.get("eventTime")) or 0) >= born]
        earlier = {e["reason"] for e in objects["events"] if e["type"] == "Warning"} - {e["reason"] for e in mine}
        hidden[stage] = earlier
        assert not earlier & set(events), earlier & set(events)
        assert {e["reason"] for e in mine if e["type"] == "Warning"} <= set(events)
        normal = {e["reason"] for e in objects["events"] if e["type"] == "Normal"}
        assert {"SuccessfulCreate", "Started", "QuotaReserved", "Admitted"} <= normal, normal
        assert not {"SuccessfulCreate", "Started", "QuotaReserved", "Admitted"} & set(events)
        assert not finished
    assert {"PodFailurePolicy", "BackoffLimitExceeded"} <= hidden["ignored"], hidden  # earlier JobSets' failures
    kueue = [i for i in incidents if "Deactivated" in i.reason]  # the evicted stage
    assert [(i.kind, i.reason, i.cause) for i in kueue] == [("kueue_eviction", "Deactivated", "infra")], kueue
    assert any(e["reason"] == "EvictedDueToDeactivated" for e in objects["events"])  # restated, not listed


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
    from elxpk.cluster.verbs.events_feed import follow

    objects = seed(fake, "ignored")
    follow(kube, "default", name_of(objects), lambda incident: None, watch=True, clock=clock, watch_s=1,
           max_watches=2)
    watches = [c.query for c in fake.calls if c.query.get("watch") == ["true"]]
    assert len(watches) == 2 and "resourceVersion" not in watches[0] and watches[0]["allowWatchBookmarks"] == ["true"]
    assert int(watches[1]["resourceVersion"][0]) > 0


def test_watch_rides_out_an_outage_and_records_each_incident_once(fake, clock, kube, tmp_path):
    """The API server goes away while `events --watch --record` follows (every request dropped: the
    snapshot, the watch); meanwhile slice 0 fails. The watch retries within its bound, resumes, and the
    record holds every incident exactly once, the one of the outage included."""
    from elxpk.cluster.verbs.events_feed import follow
    from tests.support.fake_apiserver import Fault

    objects = seed(fake, "ignored")
    failed = pod_of(load("failed"), 0)
    path = tmp_path / "incidents.jsonl"
    notes: list[str] = []

    def emit(incident: Incident) -> None:
        record(str(path), [incident])
        if not fake.faults:  # after the first incident: the outage begins, and a pod fails during it
            fake.faults.append(Fault("GET", ".*", "drop", times=14))
            fake.store.create(("", "pods"), failed)

    start = clock()
    follow(kube, "default", name_of(objects), emit, watch=True, clock=clock, sleep=clock.sleep, watch_s=1,
           max_watches=6, on_outage=notes.append)
    ids = [r["id"] for r in read_recorded(str(path))]
    assert len(ids) == len(set(ids))  # nothing twice
    assert any(r["exit_code"] == 70 and r["pod"] == failed["metadata"]["name"] for r in read_recorded(str(path)))
    assert fake.faults[0].times == 0 and len(notes) == 2 and "answers again" in notes[1]
    assert clock() - start < 600


def test_watch_gives_up_after_its_outage_bound(fake, clock, kube):
    from elxpk.cluster.verbs.events_feed import follow
    from elxpk.errors import ClusterError
    from tests.support.fake_apiserver import Fault

    objects = seed(fake, "ignored")

    def emit(incident: Incident) -> None:
        if not fake.faults:
            fake.faults.append(Fault("GET", ".*", "drop", times=10**6))

    start = clock()
    with pytest.raises(ClusterError, match="still failing after .* of retries; run the same command again"):
        follow(kube, "default", name_of(objects), emit, watch=True, clock=clock, sleep=clock.sleep, watch_s=1,
               outage_s=120)
    assert 120 <= clock() - start <= 120 + 30


def test_a_record_on_a_full_or_read_only_disk_is_74_or_2_and_keeps_what_was_there(tmp_path):
    """The fifth pass: `events --record` on a full disk was exit 1 ("cannot append"); out of space is 74 as
    for every write, a read-only filesystem the user's (2). The incidents recorded before stay whole."""
    from elxpk.cluster.records.incident_log import read_recorded, record
    from elxpk.cluster.records.incidents import Incident
    from elxpk.errors import StorageFull, UsageError
    from tests.support.small_disk import mounted_small_disk

    first = Incident(id="a", time="2026-01-01T00:00:00Z", kind="exit", cause="infra", reason="OOMKilled")
    second = Incident(id="b", time="2026-01-01T00:01:00Z", kind="exit", cause="user", reason="Error",
                      message="x" * 2_000_000)  # bigger than the room left
    for disk in mounted_small_disk(tmp_path):
        path = str(disk.path / "incidents.jsonl")
        assert record(path, [first]) == 1
        disk.fill_to(4096)
        with pytest.raises(StorageFull, match=r"^--record .*: no space left on device \(ENOSPC\); the incidents "):
            record(path, [second])
        assert [i["id"] for i in read_recorded(path)] == ["a"]  # a torn last line is what readers skip
        disk.resize(16 << 20)
        disk.read_only()
        with pytest.raises(UsageError, match=r"cannot write there \(Read-only file system\); give a writable --record"):
            record(path, [second])


def test_the_watch_asks_the_notifications_how_often_to_look(fake, clock, kube):
    """`refresh_s` as a callable is read at each watch: the watch's own timeout follows it (5 s while the
    notifications await a recovery, else 60), so the snapshot after it comes that soon."""
    objects = seed(fake, "ignored")
    from elxpk.cluster.verbs.events_feed import follow

    every = iter([1.0, 2.0])
    follow(kube, "default", name_of(objects), lambda incident: None, watch=True, clock=clock, watch_s=300,
           refresh_s=lambda: next(every), max_watches=2)
    timeouts = [c.query.get("timeoutSeconds") for c in fake.calls if c.query.get("watch") == ["true"]]
    assert timeouts == [["1"], ["2"]], timeouts
