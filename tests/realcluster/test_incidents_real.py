"""`elxpk workload events` (incidents, --record locally and on gs://, --watch), `status` (restarts by cause,
trainer progress) and `list` on the real Job, JobSet and Kueue controllers, run as the user runs them.

One story, shared by the tests of this module (each reads one stage of it):
- `incidents` (2 slices of v5p-8, --max-restarts=2, a local --checkpoint-dir, made by `workload create`):
  1. the trainer's progress record says step 130 was done before anything failed; both slices' containers
     exit 77 (preempted: the podFailurePolicy ignores it, the Failed pods stay and the Job controller replaces
     them); a Warning Event about slice 0's pod is posted, as a kubelet posts FailedMount, and one about a pod
     of nobody's. Stage "ignored".
  2. slice 1's container exits 75 (slice lost: counted, the Job fails, the JobSet recreates every Job:
     restart 1, and the pods of attempt 0 go with their Jobs). Stage "restarted".
  3. slice 0's container of attempt 1 exits 70 (user error: FailJob, the JobSet fails at once). Stage "failed".
- `plain` (2 slices of v6e-16): a JobSet applied without Kueue's queue label and without xpk's label (the JobSet controller starts
  it at once), running beside it, whose failurePolicy has a RestartJobSetAndIgnoreMaxRestarts rule (as a user's
  JobSet may): its containers exiting 75 restart it without spending maxRestarts;
  one of its pods exits 75 first, on a cordoned node (1 of its Job's backoffLimit 1 spent, the Job goes on,
  the replacement Pending until the node is uncordoned);
- `evicted` (1 slice of v5p-16, shaped like xpk's: restartPolicy OnFailure): running, then its Kueue Workload
  deactivated, and Kueue evicts it.

With ELXPK_INCIDENTS_CAPTURE=DIR the objects of each stage are written to DIR/STAGE.json: what
tests/cluster/incidents_corpus/ holds for the tests that stay on the fake API server (watch protocol, call
counts, log faults), so they read the components' own objects.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import requests
import yaml

from elxpk.cluster.connect import connect
from elxpk.cluster.incident_log import read_recorded
from elxpk.cluster.observe import fetch_status
from elxpk.cluster.status import parse_time
from elxpk.cluster.target import ClusterTarget
from elxpk_contract.records import PROGRESS_FILE, Progress
from tests.realcluster.test_lifecycle import pods, wait
from tests.realcluster.test_submit_goldens import elxpk
from tools.testcluster.kubeapi import JOBS, JOBSETS, LocalCluster

KUEUE = "/apis/kueue.x-k8s.io/v1beta2"
EVENTS = "/api/v1/namespaces/default/events"
MERGE = "application/merge-patch+json"
NAME, PLAIN, EVICTED = "incidents", "incidents-plain", "incidents-evicted"
SHAPE = ["--tpu-type=v5p-8", "--num-slices=2", "--no-pathways", "--max-restarts=2", "--command", "python3 train.py"]
START = 1_780_000_000.0  # the injected `now` of status; the progress records' times are relative to it
SLICE = "jobset.sigs.k8s.io/job-index"
BUCKET = "incidents"


@dataclass
class Stage:
    """What the user saw at one stage of the story: each command's (exit code, stdout, stderr)."""

    out: dict[str, subprocess.CompletedProcess] = field(default_factory=dict)

    def run(self, cluster: LocalCluster, key: str, *argv: str) -> subprocess.CompletedProcess:
        self.out[key] = done = elxpk(*argv, cluster=cluster)
        return done

    def json_lines(self, key: str) -> list[dict]:
        assert self.out[key].returncode == 0, self.out[key].stderr
        return [json.loads(line) for line in self.out[key].stdout.splitlines()]

    def json(self, key: str) -> dict:
        assert self.out[key].returncode == 0, self.out[key].stderr
        return dict(json.loads(self.out[key].stdout))


@dataclass
class Story:
    stages: dict[str, Stage]
    record: Path  # the local --record file
    record_first: str  # its content after the first `events --record`
    gcs_object: bytes  # the gs:// record after two `events --record gs://...`
    first_pod: str  # slice 0's pod that exited 77
    names: dict[str, list[str]]  # stage -> the names of the workload's pods then


def capture(cluster: LocalCluster, stage: str, name: str) -> None:
    """With ELXPK_INCIDENTS_CAPTURE=DIR, the objects `events` and `status` read, to DIR/STAGE.json."""
    target = os.environ.get("ELXPK_INCIDENTS_CAPTURE")
    if not target:
        return
    status, jobset = cluster.request("GET", JOBSETS.format(ns="default") + "/" + name)
    assert status == 200, jobset
    selector = f"jobset.sigs.k8s.io/jobset-name={name}"
    workloads = [w for w in cluster.items(f"{KUEUE}/namespaces/default/workloads")
                 if (w["metadata"].get("labels") or {}).get("kueue.x-k8s.io/job-uid") == jobset["metadata"]["uid"]]
    jobs = cluster.items(JOBS.format(ns="default"), labelSelector=selector)
    pod_list = pods(cluster, name)
    names = {name} | {o["metadata"]["name"] for o in (*jobs, *pod_list, *workloads)}
    events = [e for e in cluster.items(EVENTS) if (e.get("involvedObject") or {}).get("name") in names]
    objects = {"jobset": jobset, "jobs": jobs, "pods": pod_list, "workloads": workloads, "events": events}
    for obj in [jobset, *jobs, *pod_list, *workloads, *events]:
        obj.get("metadata", {}).pop("managedFields", None)  # bulk that nothing reads
    Path(target).mkdir(parents=True, exist_ok=True)
    (Path(target) / f"{stage}.json").write_text(json.dumps(objects, indent=1, sort_keys=True) + "\n")


def post_event(cluster: LocalCluster, name: str, pod: str, reason: str, message: str, node: str) -> None:
    """A Warning Event as a kubelet posts one (kwok's kubelet posts none of these)."""
    event = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "namespace": "default"},
             "type": "Warning", "reason": reason, "message": message, "count": 1,
             "firstTimestamp": "2026-05-28T20:30:00Z", "lastTimestamp": "2026-05-28T20:30:00Z",
             "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": pod, "namespace": "default"},
             "source": {"component": "kubelet", "host": node}}
    status, body = cluster.request("POST", EVENTS, event)
    assert status in (201, 409), body


def dead_port() -> str:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def make_bucket(cluster: LocalCluster) -> None:
    host = cluster.storage_emulator_host
    made = requests.post(f"{host}/storage/v1/b", json={"name": BUCKET}, timeout=30)
    assert made.status_code in (200, 409), made.text
    for item in requests.get(f"{host}/storage/v1/b/{BUCKET}/o", timeout=30).json().get("items", []):
        requests.delete(f"{host}/storage/v1/b/{BUCKET}/o/{item['name'].replace('/', '%2F')}", timeout=30)


def gcs_read(cluster: LocalCluster, name: str) -> bytes:
    got = requests.get(f"{cluster.storage_emulator_host}/storage/v1/b/{BUCKET}/o/{name.replace('/', '%2F')}",
                       params={"alt": "media"}, timeout=30)
    assert got.status_code == 200, got.text
    return got.content


def rendered(cluster: LocalCluster, name: str, tpu_type: str, slices: int = 1) -> dict:
    """`workload create --dry-run`'s JobSet, for a test to change as a user's own JobSet differs."""
    cluster.remove_jobset("default", name)
    done = elxpk("workload", "create", f"--workload={name}", f"--tpu-type={tpu_type}", f"--num-slices={slices}",
                 "--no-pathways", "--command", "python3 train.py", "--dry-run", cluster=cluster)
    assert done.returncode == 0, done.stderr
    return dict(next(d for d in yaml.safe_load_all(done.stdout) if d and d.get("kind") == "JobSet"))


def submit(cluster: LocalCluster, jobset: dict) -> None:
    status, body = cluster.request("POST", JOBSETS.format(ns="default"), jobset)
    assert status == 201, body


def apply_plain(cluster: LocalCluster) -> None:
    """A JobSet outside Kueue (no queue label) and not xpk's (no xpk label), with a restart budget of one pod
    failure in its Job (backoffLimit 1) and a RestartJobSetAndIgnoreMaxRestarts rule ahead of elxpk's."""
    jobset = rendered(cluster, PLAIN, "v6e-16", slices=2)
    jobset["metadata"]["labels"].pop("kueue.x-k8s.io/queue-name")
    jobset["spec"]["failurePolicy"]["rules"].insert(0, {
        "name": "ignoreMaxRestartsOnBackoff", "action": "RestartJobSetAndIgnoreMaxRestarts",
        "onJobFailureReasons": ["BackoffLimitExceeded"]})
    for rjob in jobset["spec"]["replicatedJobs"]:
        rjob["template"]["spec"]["backoffLimit"] = 1
    submit(cluster, strip_xpk(jobset))


def strip_xpk(obj: dict) -> dict:
    """Without xpk's workload label, wherever the rendering put it."""
    if isinstance(obj, dict):
        labels = obj.get("labels")
        if isinstance(labels, dict):
            labels.pop("xpk.google.com/workload", None)
        for value in obj.values():
            strip_xpk(value)
    elif isinstance(obj, list):
        for value in obj:
            strip_xpk(value)
    return obj


def apply_xpk_shaped(cluster: LocalCluster) -> None:
    """A JobSet shaped like xpk's own: containers restart in place (restartPolicy OnFailure, so no
    podFailurePolicy), in Kueue's queue."""
    jobset = rendered(cluster, EVICTED, "v5p-16")
    for rjob in jobset["spec"]["replicatedJobs"]:
        rjob["template"]["spec"].pop("podFailurePolicy", None)
        rjob["template"]["spec"]["template"]["spec"]["restartPolicy"] = "OnFailure"
    submit(cluster, jobset)


def cordon(cluster: LocalCluster, node: str, unschedulable: bool) -> None:
    """`kubectl cordon` (or uncordon) NODE: the scheduler places no new pod there."""
    status, body = cluster.request("PATCH", f"/api/v1/nodes/{node}", {"spec": {"unschedulable": unschedulable}},
                                   content_type=MERGE)
    assert status == 200, body


def all_running(cluster: LocalCluster, name: str, count: int, **labels: str) -> bool:
    now = pods(cluster, name, **labels)
    return len(now) == count and all(p["status"].get("phase") == "Running" for p in now)


@pytest.fixture(scope="module")
def story(testcluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Story]:
    cluster = testcluster
    mp = pytest.MonkeyPatch()
    mp.setenv("COLUMNS", "200")
    mp.setenv("STORAGE_EMULATOR_HOST", cluster.storage_emulator_host)
    make_bucket(cluster)
    record = tmp_path_factory.mktemp("record") / "incidents.jsonl"
    checkpoints = tmp_path_factory.mktemp("checkpoints")
    gs = f"gs://{BUCKET}/{NAME}/incidents.jsonl"
    stages = {key: Stage() for key in ("ignored", "plain", "restarted", "failed", "evicted")}
    names: dict[str, list[str]] = {}
    try:
        cluster.remove_jobset("default", NAME)
        assert elxpk("workload", "create", f"--workload={NAME}", *SHAPE, f"--checkpoint-dir={checkpoints}",
                     cluster=cluster).returncode == 0
        apply_plain(cluster)
        assert wait(cluster, NAME, "running") == 0
        cluster.wait_for("plain running", lambda: all_running(cluster, PLAIN, 8))

        # 1. step 130 done, then exit 77 on both slices: ignored by the podFailurePolicy; the Failed pods stay
        stage = stages["ignored"]
        _, created = cluster.request("GET", JOBSETS.format(ns="default") + "/" + NAME)
        before = parse_time(created["metadata"]["creationTimestamp"]) - 30
        progress = Progress(130, before, 100, before - 600, before, "running")
        (checkpoints / PROGRESS_FILE).write_text(json.dumps(progress.to_json()))
        first = pods(cluster, NAME, **{SLICE: "0"})[0]
        assert cluster.exit_pods("default", f"jobset.sigs.k8s.io/jobset-name={NAME}", 77) == 2
        cluster.wait_for("both pods Failed", lambda: len(
            [p for p in pods(cluster, NAME) if p["status"].get("phase") == "Failed"]) == 2)
        post_event(cluster, f"{first['metadata']['name']}.mount", first["metadata"]["name"], "FailedMount",
                   "MountVolume.SetUp failed for volume gcs-fuse", first["spec"]["nodeName"])
        post_event(cluster, "other-pod.backoff", "other-pod", "BackOff", "Back-off restarting", "elsewhere")
        stage.run(cluster, "events", "workload", "events", NAME)
        stage.run(cluster, "events.json", "workload", "events", NAME, "-o", "json")
        stage.run(cluster, "status", "workload", "status", NAME)
        stage.run(cluster, "status.json", "workload", "status", NAME, "-o", "json")
        stage.run(cluster, "record", "workload", "events", NAME, "--record", str(record))
        record_first = record.read_text()
        stage.run(cluster, "record.gcs", "workload", "events", NAME, "--record", gs)
        stages["plain"].run(cluster, "status.json", "workload", "status", PLAIN, "-o", "json")
        stages["plain"].run(cluster, "list.json", "workload", "list", "-o", "json")
        names["ignored"] = [p["metadata"]["name"] for p in pods(cluster, NAME)]
        capture(cluster, "ignored", NAME)
        capture(cluster, "plain", PLAIN)
        # one of plain's 4 pods exits 75 on a cordoned node (its replacement stays Pending, as on a node pool
        # whose VM is being repaired): 1 of its Job's backoffLimit 1 spent, the Job goes on without it
        first_plain = pods(cluster, PLAIN, **{SLICE: "0", "batch.kubernetes.io/job-completion-index": "0"})[0]
        cordon(cluster, first_plain["spec"]["nodeName"], True)
        try:
            assert cluster.exit_pods("default", f"batch.kubernetes.io/job-completion-index=0,{SLICE}=0,"
                                     f"jobset.sigs.k8s.io/jobset-name={PLAIN}", 75) == 1
            cluster.wait_for("plain's Job counting the failure", lambda: any(
                (j.get("status") or {}).get("failed") == 1 and (j.get("status") or {}).get("ready") == 3
                for j in cluster.items(JOBS.format(ns="default"), labelSelector=f"jobset.sigs.k8s.io/jobset-name={PLAIN}")))
            stages["plain"].run(cluster, "status.degraded", "workload", "status", PLAIN, "-o", "json")
            capture(cluster, "plain_degraded", PLAIN)
        finally:
            cordon(cluster, first_plain["spec"]["nodeName"], False)
        # slice 0's other three exit 75: past backoffLimit, the rule restarts the JobSet without spending maxRestarts
        assert cluster.exit_pods("default", f"{SLICE}=0,jobset.sigs.k8s.io/jobset-name={PLAIN}", 75) >= 3
        cluster.wait_for("plain restarted by the rule", lambda: cluster.request(
            "GET", JOBSETS.format(ns="default") + "/" + PLAIN)[1].get("status", {}).get("restarts", 0) >= 1)
        stages["plain"].run(cluster, "status.restarted", "workload", "status", PLAIN)
        cluster.remove_jobset("default", PLAIN)

        # 2. exit 75 on slice 1 (once its pod is replaced): counted; the JobSet restarts every Job
        stage = stages["restarted"]
        cluster.wait_for("both replacements running", lambda: len(
            [p for p in pods(cluster, NAME) if p["status"].get("phase") == "Running"]) == 2)
        assert cluster.exit_pods("default", f"jobset.sigs.k8s.io/jobset-name={NAME},{SLICE}=1", 75) == 1
        cluster.wait_for("restart 1 running", lambda: all_running(
            cluster, NAME, 2, **{"jobset.sigs.k8s.io/restart-attempt": "1"}) and len(pods(cluster, NAME)) == 2)
        stage.run(cluster, "events.json", "workload", "events", NAME, "-o", "json")
        stage.run(cluster, "record", "workload", "events", NAME, "--record", str(record))
        stage.run(cluster, "record.gcs", "workload", "events", NAME, "--record", gs)
        mp.setenv("STORAGE_EMULATOR_HOST", dead_port())
        stage.run(cluster, "record.unreachable", "workload", "events", NAME, "--record", gs)
        mp.setenv("STORAGE_EMULATOR_HOST", cluster.storage_emulator_host)
        stage.run(cluster, "status.json", "workload", "status", NAME, "-o", "json")
        names["restarted"] = [p["metadata"]["name"] for p in pods(cluster, NAME)]
        capture(cluster, "restarted", NAME)

        # 3. exit 70 on slice 0 of attempt 1: FailJob, the JobSet fails
        stage = stages["failed"]
        assert cluster.exit_pods("default", f"jobset.sigs.k8s.io/jobset-name={NAME},{SLICE}=0", 70) == 1
        assert wait(cluster, NAME, "completed") == 1
        stage.run(cluster, "events", "workload", "events", NAME)
        stage.run(cluster, "events.json", "workload", "events", NAME, "-o", "json")
        stage.run(cluster, "watch", "workload", "events", NAME, "--watch")
        stage.run(cluster, "status", "workload", "status", NAME)
        stage.run(cluster, "status.json", "workload", "status", NAME, "-o", "json")
        names["failed"] = [p["metadata"]["name"] for p in pods(cluster, NAME)]
        capture(cluster, "failed", NAME)

        # Kueue evicts a running workload whose Workload is deactivated
        stage = stages["evicted"]
        apply_xpk_shaped(cluster)
        assert wait(cluster, EVICTED, "running") == 0
        capture(cluster, "xpk_shaped", EVICTED)
        _, jobset = cluster.request("GET", JOBSETS.format(ns="default") + "/" + EVICTED)
        workload = next(w for w in cluster.items(f"{KUEUE}/namespaces/default/workloads") if (
            w["metadata"].get("labels") or {}).get("kueue.x-k8s.io/job-uid") == jobset["metadata"]["uid"])
        done = cluster.request("PATCH", f"{KUEUE}/namespaces/default/workloads/{workload['metadata']['name']}",
                               {"spec": {"active": False}}, content_type=MERGE)
        assert done[0] == 200, done[1]
        cluster.wait_for("Kueue's eviction", lambda: any(
            c["type"] == "Evicted" and c["status"] == "True" for c in (cluster.request(
                "GET", f"{KUEUE}/namespaces/default/workloads/{workload['metadata']['name']}")[1].get(
                "status") or {}).get("conditions") or []))
        stage.run(cluster, "events.json", "workload", "events", EVICTED, "-o", "json")
        capture(cluster, "evicted", EVICTED)

        yield Story(stages, record, record_first, gcs_read(cluster, f"{NAME}/incidents.jsonl"), first["metadata"]["name"], names)
    finally:
        mp.undo()
        for name in (NAME, PLAIN, EVICTED):
            cluster.remove_jobset("default", name)


def test_events_show_exits_and_warning_events(story: Story) -> None:
    stage = story.stages["ignored"]
    assert stage.out["events"].returncode == 0, stage.out["events"].stderr
    lines = stage.out["events"].stdout.splitlines()
    exit_line = next(line for line in lines if "exit 77/Error" in line and f"pod {story.first_pod} " in line)
    assert exit_line.split()[1:3] == ["exit", "infra"] and "preempted" in exit_line
    assert f"slice 0 pod {story.first_pod} node gke-testcluster-v5p-8-np-" in exit_line
    assert any("FailedMount" in line and "gcs-fuse" in line for line in lines)
    assert not any("other-pod" in line for line in lines)
    records = stage.json_lines("events.json")
    exit_record = next(r for r in records if r["kind"] == "exit" and r["pod"] == story.first_pod)
    assert (exit_record["exit_code"], exit_record["slice"], exit_record["pod"]) == (77, 0, story.first_pod)
    assert (exit_record["cause"], exit_record["message"]) == ("infra", "preempted")
    times = [parse_time(r["time"]) or 0.0 for r in records if r["time"]]
    assert times == sorted(times)  # oldest first (the API writes seconds, and microseconds in an eventTime)


def test_jobset_restart_is_an_incident_with_its_time(story: Story) -> None:
    records = story.stages["restarted"].json_lines("events.json")
    restart = next(r for r in records if r["kind"] == "jobset_restart")
    assert restart["message"].startswith(f"JobSet restart 1 of {NAME} (1 counted")
    assert restart["time"] is not None
    # the failed Job of attempt 0 went with the restart (its pods too): the exit-77 pod is no longer seen
    assert not any(r["pod"] == story.first_pod for r in records)


def test_user_error_fails_and_the_first_failed_job_is_marked(story: Story) -> None:
    stage = story.stages["failed"]
    failed = [line for line in stage.out["events"].stdout.splitlines() if "job_failed" in line]
    assert len(failed) == 1 and "first failed Job" in failed[0] and f"{NAME}-slice-job-0" in failed[0], failed
    records = stage.json_lines("events.json")
    causes = {r["exit_code"]: (r["cause"], r["message"]) for r in records if r["kind"] == "exit"}
    assert causes[70] == ("user", "user_error"), causes
    job = next(r for r in records if r["kind"] == "job_failed")
    assert (job["cause"], job["reason"], job["slice"]) == ("user", "PodFailurePolicy", 0), job


def appended(first: subprocess.CompletedProcess, second: subprocess.CompletedProcess) -> int:
    """How many incidents two `events --record` runs showed, each counted once (a line per incident)."""
    for done in (first, second):
        assert done.returncode == 0, done.stderr
    return len(set(first.stdout.splitlines()) | set(second.stdout.splitlines()))


def test_record_appends_each_incident_once_and_keeps_what_went(story: Story) -> None:
    first = story.record_first.splitlines()
    assert len(first) == len(story.stages["ignored"].out["record"].stdout.splitlines()) >= 2  # exit, Event
    second = story.record.read_text().splitlines()
    assert second[: len(first)] == first  # what the first run wrote stays, in order
    assert len(second) == appended(story.stages["ignored"].out["record"], story.stages["restarted"].out["record"])
    assert [json.loads(line)["kind"] for line in second[len(first):]].count("jobset_restart") == 1
    ids = [json.loads(line)["id"] for line in second]
    assert len(set(ids)) == len(ids)
    assert any(json.loads(line)["pod"] == story.first_pod for line in second)  # gone from the cluster, recorded
    assert [r["id"] for r in read_recorded(str(story.record))] == ids


def test_record_on_gcs_through_the_cli(story: Story) -> None:
    recorded = [json.loads(line)["id"] for line in story.gcs_object.decode().splitlines()]
    assert len(set(recorded)) == len(recorded) == appended(
        story.stages["ignored"].out["record.gcs"], story.stages["restarted"].out["record.gcs"])


def test_unreachable_gcs_is_one_line(story: Story) -> None:
    done = story.stages["restarted"].out["record.unreachable"]
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert done.returncode == 1 and len(errors) == 1 and "cannot reach Cloud Storage" in errors[0], done.stderr
    assert "Traceback" not in done.stderr


def test_watch_on_a_finished_workload_prints_its_history_and_returns(story: Story) -> None:
    stage = story.stages["failed"]
    assert stage.out["watch"].returncode == 0, stage.out["watch"].stderr
    assert stage.out["watch"].stdout.splitlines() == stage.out["events"].stdout.splitlines()
    assert any("exit 70/Error" in line and "user_error" in line for line in stage.out["watch"].stdout.splitlines())


def test_status_splits_restarts_by_cause(story: Story) -> None:
    ignored = story.stages["ignored"]
    assert ignored.json("status.json")["restart_causes"] == {"infra": 2, "user": 0, "unknown": 0}
    assert "Restart causes   2 infra  (infra: disruption" in ignored.out["status"].stdout
    failed = story.stages["failed"]
    causes = failed.json("status.json")["restart_causes"]
    assert causes["user"] == 1, causes
    assert f"{causes['user']} user" in failed.out["status"].stdout


def test_kueue_eviction_is_an_incident(story: Story) -> None:
    records = story.stages["evicted"].json_lines("events.json")
    evictions = [r for r in records if r["kind"] == "kueue_eviction"]
    assert evictions and all(r["cause"] == "infra" for r in evictions), records
    assert evictions[0]["message"].startswith("Kueue Workload "), evictions


def test_list_marks_xpk_and_a_workload_outside_kueue(story: Story) -> None:
    plain = story.stages["plain"].json("status.json")
    assert (plain["state"], plain["worker_job"], plain["slices_total"], plain["head"], plain["admission"]) == (
        "Running", "slice-job", 2, None, None), plain
    listed = story.stages["plain"].out["list.json"]
    assert listed.returncode == 0, listed.stderr
    rows = {r["name"]: r for r in json.loads(listed.stdout)}
    assert rows[PLAIN]["created_by"] is None and rows[PLAIN]["state"] == "Running", rows[PLAIN]
    assert rows[NAME]["created_by"] == "xpk", rows[NAME]


# --- status: the trainer's progress record, found through the workload's own settings --------------------------

PROGRESS_LOCAL, PROGRESS_GCS = "incidents-progress", "incidents-progress-gcs"


@dataclass
class ProgressWorkloads:
    cluster: LocalCluster
    directory: Path  # PROGRESS_LOCAL's checkpoint directory

    def status(self, name: str = PROGRESS_LOCAL):  # noqa: ANN201
        kube = connect(ClusterTarget(kubeconfig=str(self.cluster.kubeconfig)))
        return fetch_status(kube, "default", name, now=START, with_progress=True)

    def write(self, **fields: object) -> None:
        progress = Progress(**{"steps_done": 130, "step_time": START - 30, "checkpoint_step": 100,  # type: ignore[arg-type]
                               "checkpoint_time": START - 600, "updated_at": START - 30, **fields})
        (self.directory / PROGRESS_FILE).write_text(json.dumps(progress.to_json()))


@pytest.fixture(scope="module")
def progress(testcluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProgressWorkloads]:
    """Two workloads that give their trainer a checkpoint directory (--checkpoint-dir): a local one with a
    save period of 15 steps, and gs://incidents/ckpt on the emulator. Running or queued: status reads the
    directory from the JobSet either way."""
    directory = tmp_path_factory.mktemp("ckpt")
    make_bucket(testcluster)
    base = ["--tpu-type=v6e-16", "--num-slices=1", "--no-pathways", "--command", "python3 train.py"]
    for name, flags in ((PROGRESS_LOCAL, [f"--checkpoint-dir={directory}", "--checkpoint-period=15"]),
                        (PROGRESS_GCS, [f"--checkpoint-dir=gs://{BUCKET}/ckpt"])):
        testcluster.remove_jobset("default", name)
        done = elxpk("workload", "create", f"--workload={name}", *base, *flags, cluster=testcluster)
        assert done.returncode == 0, done.stderr
    try:
        yield ProgressWorkloads(testcluster, directory)
    finally:
        for name in (PROGRESS_LOCAL, PROGRESS_GCS):
            testcluster.remove_jobset("default", name)


def test_status_shows_trainer_progress_and_ages(progress: ProgressWorkloads) -> None:
    (progress.directory / PROGRESS_FILE).unlink(missing_ok=True)
    status = progress.status()
    assert status.progress is None and "no elxpk-progress.json in" in str(status.progress_problem)
    progress.write()
    status = progress.status()
    assert status.progress is not None
    assert (status.progress["steps_done"], status.progress["checkpoint_step"]) == (130, 100)
    assert (status.progress["step_age_s"], status.progress["checkpoint_age_s"]) == (30.0, 600.0)
    done = elxpk("workload", "status", PROGRESS_LOCAL, cluster=progress.cluster)
    assert done.returncode == 0, done.stderr
    line = next(line for line in done.stdout.splitlines() if line.startswith("Trainer "))
    assert "step 130 done " in line and "checkpoint 100 committed " in line
    (progress.directory / PROGRESS_FILE).write_text("{not json")
    done = elxpk("workload", "status", PROGRESS_LOCAL, cluster=progress.cluster)
    assert done.returncode == 0 and "elxpk-progress.json: not JSON" in done.stdout, done.stdout + done.stderr


def test_status_warns_when_saves_stopped_two_periods_ago(progress: ProgressWorkloads) -> None:
    progress.write()  # step 130, the last checkpoint at 100: two periods of 15
    status = progress.status()
    assert status.progress is not None
    assert (status.progress["checkpoint_period"], status.progress["saves_stopped"]) == (15, True)
    done = elxpk("workload", "status", PROGRESS_LOCAL, cluster=progress.cluster)
    assert done.returncode == 0, done.stderr
    assert "saves stopped: no checkpoint for 30 steps (period 15)" in " ".join(done.stdout.split())
    progress.write(checkpoint_step=120)
    assert not (progress.status().progress or {})["saves_stopped"]
    progress.write(state="done")  # a finished run saves no more
    assert not (progress.status().progress or {})["saves_stopped"]


def test_status_reads_progress_from_gcs(progress: ProgressWorkloads, monkeypatch: pytest.MonkeyPatch) -> None:
    host = progress.cluster.storage_emulator_host
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", host)
    record = Progress(7, START - 5, None, None, START - 5, "stalled")
    put = requests.post(f"{host}/upload/storage/v1/b/{BUCKET}/o", params={"uploadType": "media",
                        "name": f"ckpt/{PROGRESS_FILE}"}, data=json.dumps(record.to_json()).encode(), timeout=30)
    assert put.status_code == 200, put.text
    status = progress.status(PROGRESS_GCS)
    assert status.progress is not None
    assert status.progress["state"] == "stalled" and status.progress["step_age_s"] == 5.0


def test_status_names_jobset_restarts_a_failure_policy_rule_did_not_count(story: Story) -> None:
    done = story.stages["plain"].out["status.restarted"]
    assert done.returncode == 0, done.stderr
    assert "1 (maxRestarts 0: 0 counted, 0 left); 1 not counted (a failurePolicy rule" in done.stdout, done.stdout


def test_failures_after_the_last_step_are_failures_with_no_progress(story: Story) -> None:
    """`events`' closing lines: failures by cause, and "no progress since step S" from the trainer's record."""
    stage = story.stages["ignored"]
    assert len(stage.out["events"].stdout.splitlines()) == len(stage.json_lines("events.json"))  # one per line
    lines = stage.out["events"].stderr.splitlines()  # the summary is a note on stderr
    assert "# failures by cause: preempted 2" in lines, lines
    assert "# no progress since step 130: 2 preempted failures since the trainer's last completed step" in lines
    assert "failures by cause" not in stage.out["events.json"].stdout + stage.out["events.json"].stderr


def test_a_slice_spending_its_budget_is_degraded(story: Story) -> None:
    """backoffLimit 1 and one pod failed, its replacement Pending: the slice is restarting a pod."""
    status = story.stages["plain"].json("status.degraded")
    slice_0 = status["slices"][0]
    assert (status["state"], status["slices_healthy"], status["slices"][1]["state"]) == ("Degraded", 1, "Running")
    assert (slice_0["state"], slice_0["budget_used"], slice_0["budget_left"]) == ("Restarting", 1, 0), slice_0
    assert "slice 0 restarting (budget 1/1 used)" in status["message"], status


def test_restart_arithmetic_and_the_end(story: Story) -> None:
    restarted = story.stages["restarted"].json("status.json")
    assert (restarted["state"], restarted["restarts"], restarted["max_restarts"], restarted["restarts_left"]) == (
        "Running", 1, 2, 1), restarted
    assert all(s["pod_restarts"] == 0 and s["budget_used"] == 0 for s in restarted["slices"])  # fresh Jobs
    failed = story.stages["failed"].json("status.json")
    assert (failed["state"], failed["admission"]) == ("Failed", "Finished"), failed
