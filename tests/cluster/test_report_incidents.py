"""`elxpk report RUN_DIR --incidents FILE`: a recorded incident file merged with the trainer's events."""

from __future__ import annotations

import json
from datetime import datetime, timezone

from elxpk.cli.main import main
from elxpk.cluster.records.incident_log import record
from elxpk.cluster.records.incidents import Incident
from tests.support.run_writer import FakeRun, write_run


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_report_merges_recorded_incidents_with_trainer_events(tmp_path, capsys):
    run_dir = write_run(tmp_path / "run", FakeRun(steps=30, step_time=1.0, failures=((15, 10),)))
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    detected = next(e["time"] for e in events if e["event"] == "failure_detected")
    recovered = next(e["time"] for e in events if e["event"] == "first_step_after_recovery")
    killed_at = float(int(detected))  # the pod's exit, recorded at second resolution, just before detection
    path = tmp_path / "incidents.jsonl"
    record(str(path), [
        Incident("a1", _iso(killed_at), "exit", "infra", "Error", "slice_lost", slice=1, pod="train-worker-1-0",
                 node="gke-tpu-3", exit_code=75, workload="train"),
        Incident("a2", None, "jobset_restart", "unknown", "Recreate", "JobSet restart 1", workload="train"),
    ])
    code = main(["report", str(run_dir), "--incidents", str(path), "--no-png"])
    out, err = capsys.readouterr()
    assert code == 0, err
    lines = out.splitlines()
    start = lines.index(next(line for line in lines if line.startswith("incidents: ")))
    assert lines[start] == f"incidents: 2 (1 infra, 1 unknown), merged with {len(events)} trainer events"
    timeline = [line.split("s  ", 1)[-1] for line in lines[start + 1:]]
    exit_at = next(i for i, line in enumerate(timeline) if "exit 75/Error" in line)
    assert timeline[exit_at + 1].startswith("trainer  failure_detected at step 15")
    assert "slice 1 pod train-worker-1-0 node gke-tpu-3" in timeline[exit_at]
    assert f"trainer stepping again {recovered - killed_at:.1f} s later" in timeline[exit_at]
    assert "jobset_restart" in timeline[-1]  # undated: last

    code = main(["report", str(run_dir), "--incidents", str(path), "--no-png", "-o", "json"])
    data = json.loads(capsys.readouterr().out)
    cluster = [e for e in data["incidents"] if e["source"] == "cluster"]
    assert cluster[0]["exit_code"] == 75 and cluster[0]["recovered_after_s"] == recovered - killed_at
    assert cluster[1]["recovered_after_s"] is None


def test_report_incidents_missing_file_is_a_usage_error(tmp_path, capsys):
    run_dir = write_run(tmp_path / "run", FakeRun(steps=5))
    code = main(["report", str(run_dir), "--incidents", str(tmp_path / "none.jsonl"), "--no-png"])
    _, err = capsys.readouterr()
    assert code == 2 and err.startswith("error: --incidents ") and "no such file" in err


def test_each_fault_of_a_group_restarted_run_is_timed_to_its_own_recovery(tmp_path, capsys):
    # A group restart writes no first_step_after_recovery: the new session's first step ends the recovery.
    # Two faults, each matched to its own recovery (not both to the first, nor the second to none).
    spec = FakeRun(steps=40, step_time=1.0, failures=((15, 10), (33, 30)), preempted_heard_by=0, wait_s=9.0)
    run_dir = write_run(tmp_path / "run", spec)
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    stops = [e["time"] for e in events if e["event"] == "preempted"]
    kills = [float(int(t)) for t in stops]  # each pod's deletion, at second resolution, just before the stop
    first_steps = [next(m["time"] for m in metrics if m["time"] > t) for t in
                   [e["time"] for e in events if e["event"] == "restore_done"][1:]]
    path = tmp_path / "incidents.jsonl"
    record(str(path), [Incident(f"k{n}", _iso(at), "pod_deleted", "infra", "Deleted", "slice_lost", slice=0,
                                pod="train-worker-0-0", workload="train") for n, at in enumerate(kills)])
    code = main(["report", str(run_dir), "--incidents", str(path), "--no-png", "-o", "json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and len(data["recoveries"]) == 2
    cluster = [e for e in data["incidents"] if e["source"] == "cluster"]
    assert [(e["recovery"], e["recovered_after_s"]) for e in cluster] == [
        (n, first - kill) for n, (kill, first) in enumerate(zip(kills, first_steps, strict=True), 1)]


def test_a_recovery_the_writer_heard_names_its_victim_from_the_incident_record(tmp_path, capsys):
    """#52 M1: process 0, the only writer, heard SIGTERM at each fault and recorded `preempted` with no
    slice: first slice 0's pod force-deleted (its exit 77, the API's `lost its VM`, then slice 1 stopping
    with its group: 75), then Kueue preempting the whole workload (dated before the trainer's last step, its
    pods' exits 77 after). Each recovery names its victim and cause from the incident record, never slice 1
    whose 75 is a survivor's, and failures by cause counts both."""
    spec = FakeRun(steps=40, step_time=1.0, failures=((15, 10), (33, 30)), preempted_heard_by=0, wait_s=9.0)
    run_dir = write_run(tmp_path / "run", spec)
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    stops = [e["time"] for e in events if e["event"] == "preempted"]
    deleted, preempted = float(int(stops[0])), float(int(stops[1]))
    path = tmp_path / "incidents.jsonl"
    record(str(path), [
        Incident("d0", _iso(deleted), "exit", "infra", "Error", "preempted", slice=0, pod="train-slice-job-0-0-a",
                 exit_code=77, workload="train", fault="lost its VM"),
        Incident("s1", _iso(deleted + 2), "exit", "infra", "Error", "slice_lost", slice=1,
                 pod="train-slice-job-1-0-b", exit_code=75, workload="train", fault="lost"),
        Incident("q", _iso(preempted - 3), "kueue_eviction", "infra", "Preempted/InClusterQueue",
                 "Kueue Workload jobset-train-1: Preempted to accommodate a workload (UID: u) in the ClusterQueue",
                 workload="train"),
        *(Incident(f"p{n}", _iso(preempted + 1), "exit", "infra", "Error", "preempted", slice=n,
                   pod=f"train-slice-job-{n}-0-c", exit_code=77, workload="train", fault="deleted") for n in (0, 1)),
    ])
    code = main(["report", str(run_dir), "--incidents", str(path), "--no-png", "-o", "json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0
    told = [(r["lost_slices"], r["victim"], r["victim_from"], r["cause"]) for r in data["recoveries"]]
    assert told == [([0], "slice 0 lost its VM", "incidents", "preempted"),
                    ([0, 1], "the workload preempted by Kueue", "incidents", "preempted")]
    assert data["failures_by_cause"] == [{"cause": "preempted", "count": 2, "steps": [15, 33]}]

    code = main(["report", str(run_dir), "--incidents", str(path), "--no-png"])
    out = capsys.readouterr().out
    assert "  1. slice 0 lost its VM (the incident record): SIGTERM heard by process 0, the group stopped at step 15" \
        in out
    assert "  2. the workload preempted by Kueue (the incident record): SIGTERM heard by process 0" in out
    assert "failures by cause: preempted 2 (at step 15, 33)" in out


def test_a_killed_writers_recovery_takes_its_class_from_the_incidents_and_its_words_as_the_victim(tmp_path, capsys):
    """#52, seen in the operator's replay: process 0 was killed before its records of the fault reached the
    store, so each session ended with no record of why. The report's `cause` is still a class, the trainer's
    for that fault (a VM lost at once: slice_lost; a pod given its grace: preempted, as exit 77 says), never
    the incident's words, which name the victim; failures by cause counts classes only."""
    spec = FakeRun(steps=40, step_time=1.0, failures=((15, 10), (33, 30)), preempted_heard_by=0, wait_s=9.0)
    run_dir = write_run(tmp_path / "run", spec)
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    stops = [e["time"] for e in events if e["event"] == "preempted"]
    (run_dir / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events if e["event"] != "preempted"))
    path = tmp_path / "incidents.jsonl"
    record(str(path), [
        Incident("d1", _iso(float(int(stops[0]))), "exit", "infra", "Error", "killed", slice=1,
                 pod="train-slice-job-1-0-a", exit_code=137, workload="train", fault="lost its VM"),
        Incident("e0", _iso(float(int(stops[1]))), "exit", "infra", "Error", "preempted", slice=0,
                 pod="train-slice-job-0-0-b", exit_code=77, workload="train", fault="evicted"),
    ])
    code = main(["report", str(run_dir), "--incidents", str(path), "--no-png", "-o", "json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0
    told = [(r["lost_slices"], r["victim"], r["kind"], r["cause"]) for r in data["recoveries"]]
    assert told == [([1], "slice 1 lost its VM", "session_ended_unannounced", "slice_lost"),
                    ([0], "slice 0 evicted", "session_ended_unannounced", "preempted")]
    assert [g["cause"] for g in data["failures_by_cause"]] == ["preempted", "slice_lost"]


def test_kueues_preemption_heard_first_by_a_peer_is_still_the_whole_workloads(tmp_path, capsys):
    """#52, seen in CI's operator replay: Kueue preempted the workload, and process 1 heard its SIGTERM before
    process 0 did, so process 0 recorded its peer's stop (`peer_preempted`, slice 1, class slice_lost: its own
    75). Kueue's eviction signalled every process: the recovery lost every slice, class preempted, and the
    victim is Kueue's word. A peer's SIGTERM with a slice's own eviction stays the trainer's record."""
    spec = FakeRun(steps=40, step_time=1.0, failures=((15, 10), (33, 30)), wait_s=9.0)
    run_dir = write_run(tmp_path / "run", spec)
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    for e in events:
        if e["event"] == "failure_detected":
            e.update(kind="peer_preempted", cause="slice_lost", heard_by=1)
    (run_dir / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    evicted, preempted = (float(int(e["time"])) for e in events if e["event"] == "failure_detected")
    path = tmp_path / "incidents.jsonl"
    record(str(path), [
        Incident("e1", _iso(evicted - 1), "disruption", "infra", "EvictionByEvictionAPI", "evicted", slice=1,
                 pod="train-slice-job-1-0-a", workload="train"),
        Incident("q", _iso(preempted - 1), "kueue_eviction", "infra", "Preempted/InClusterQueue",
                 "Kueue Workload jobset-train-1: Preempted to accommodate a workload (UID: u) in the ClusterQueue",
                 workload="train"),
    ])
    code = main(["report", str(run_dir), "--incidents", str(path), "--no-png", "-o", "json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0
    told = [(r["lost_slices"], r["victim"], r["victim_from"], r["cause"]) for r in data["recoveries"]]
    assert told == [([1], None, "trainer", "slice_lost"),
                    ([0, 1], "the workload preempted by Kueue", "incidents", "preempted")]


def test_kueues_eviction_event_names_the_whole_workload_where_its_condition_was_not_seen(tmp_path, capsys):
    """#52, seen in the operator's replay: the workload preempted and admitted again at once (its pods drain
    in a second), so the watch saw Kueue's Evicted condition True never, and recorded only Kueue's Event
    (EvictedDueToPreempted on the Workload). That Event is Kueue's word: every slice lost, not the slice of the
    writer that heard SIGTERM (slice 0, a casualty of the whole workload's eviction like slice 1)."""
    spec = FakeRun(steps=40, step_time=1.0, failures=((33, 30),), preempted_heard_by=0, wait_s=9.0)
    run_dir = write_run(tmp_path / "run", spec)
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    preempted = float(int([e["time"] for e in events if e["event"] == "preempted"][0]))
    path = tmp_path / "incidents.jsonl"
    record(str(path), [
        Incident("q", _iso(preempted - 1), "event", "infra", "EvictedDueToPreempted",
                 "Workload/jobset-train-1: Preempted to accommodate a workload (UID: u) due to prioritization in "
                 "the ClusterQueue", workload="train"),
        Incident("pending", _iso(preempted), "event", "infra", "Pending",
                 "Workload/jobset-train-1: couldn't assign flavors to pod set slice-job", workload="train"),
        *(Incident(f"p{n}", _iso(preempted + 1), "exit", "infra", "Error", "preempted", slice=n,
                   pod=f"train-slice-job-{n}-0-c", exit_code=77, workload="train", fault="deleted") for n in (0, 1)),
    ])
    code = main(["report", str(run_dir), "--incidents", str(path), "--no-png", "-o", "json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0
    told = [(r["lost_slices"], r["victim"], r["victim_from"], r["cause"]) for r in data["recoveries"]]
    assert told == [([0, 1], "the workload preempted by Kueue", "incidents", "preempted")]


def test_without_an_incident_record_every_recovery_is_still_counted_by_cause(tmp_path, capsys):
    """The same run without --incidents: no victim named (nothing says it), and both recoveries counted."""
    spec = FakeRun(steps=40, step_time=1.0, failures=((15, 10), (33, 30)), preempted_heard_by=0, wait_s=9.0)
    run_dir = write_run(tmp_path / "run", spec)
    code = main(["report", str(run_dir), "--no-png", "-o", "json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and [(r["lost_slices"], r["victim"]) for r in data["recoveries"]] == [([], None), ([], None)]
    assert data["failures_by_cause"] == [{"cause": "preempted", "count": 2, "steps": [15, 33]}]


def test_the_victim_of_recorded_incidents_is_ranked_as_the_pods_are():
    """The incidents `events --record` writes of the incident story's real objects (incidents_corpus): Kueue's
    deactivation names the whole workload; the survivor's 75 names no one; a lone exit 77 of each slice names
    both, as the pods' own evidence does (elxpk/cluster/records/lost_slice.py's order, incident_rank)."""
    from elxpk.cluster.records.incidents import collect
    from elxpk.cluster.records.lost_slice import lost_slice
    from elxpk.runs.recovery_victims import KUEUE_EVICTED, incident_victim
    from tests.cluster.captured import load

    def recorded(stage: str) -> list[dict]:
        o = load(stage)
        return [i.to_dict() for i in collect(o["jobset"], o["jobs"], o["pods"], o["workloads"], o.get("events", []))]

    evicted = incident_victim(recorded("evicted"))
    assert evicted is not None and (evicted.slices, evicted.cause) == ((), KUEUE_EVICTED)
    assert evicted.text() == "the workload evicted by Kueue"
    ignored = incident_victim(recorded("ignored"))
    pods = lost_slice(load("ignored")["pods"])
    assert ignored is not None and ignored.slices == (0, 1) and ignored.cause == pods.cause == "stopped by SIGTERM"
    # a 75 alone is a survivor's word: the record names no victim (the pods' lone 75 is their only trace)
    degraded = [i for i in recorded("plain_degraded") if i["kind"] == "exit"]
    assert [i["exit_code"] for i in degraded] == [75] and incident_victim(degraded) is None


def test_process_0s_own_sigterm_names_its_slice_and_kueues_every_slice(tmp_path, capsys):
    """#52 M1: a multi-controller trainer's `preempted` carries the slice of the process that heard SIGTERM
    (`heard_slice`): process 0 hearing it is a victim, slice 0 lost, with no incident record at all. With the
    record, Kueue's preemption (every slice heard it) lost every slice of the run."""
    spec = FakeRun(steps=40, step_time=1.0, failures=((15, 10), (33, 30)), preempted_heard_by=0,
                   preempted_heard_slice=0, wait_s=9.0)
    run_dir = write_run(tmp_path / "run", spec)
    code = main(["report", str(run_dir), "--no-png", "-o", "json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0
    assert [(r["lost_slices"], r["victim_from"]) for r in data["recoveries"]] == [([0], "trainer")] * 2
    code = main(["report", str(run_dir), "--no-png"])
    assert "  1. SIGTERM heard by process 0 (slice 0), the group stopped at step 15" in capsys.readouterr().out

    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    preempted = float(int([e["time"] for e in events if e["event"] == "preempted"][1]))
    path = tmp_path / "incidents.jsonl"
    record(str(path), [Incident("q", _iso(preempted - 3), "kueue_eviction", "infra", "Preempted/InClusterQueue",
                                "Kueue Workload jobset-train-1: Preempted", workload="train")])
    code = main(["report", str(run_dir), "--incidents", str(path), "--no-png", "-o", "json"])
    data = json.loads(capsys.readouterr().out)
    assert [(r["lost_slices"], r["victim"]) for r in data["recoveries"]] == [
        ([0], None), ([0, 1], "the workload preempted by Kueue")]
