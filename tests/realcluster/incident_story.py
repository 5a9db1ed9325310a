"""The story test_incidents_real.py reads, on the real Job, JobSet and Kueue controllers (each test reads one
stage of it; the story runs once per module):
- `incidents` (2 slices of v5p-8, --max-restarts=2, a local --checkpoint-dir, made by `workload create`):
  1. the trainer's progress record says step 130 was done before anything failed; both slices' containers
     exit 77 (preempted: the podFailurePolicy ignores it, the Failed pods stay and the Job controller replaces
     them); a Warning Event about slice 0's pod is posted, as a kubelet posts FailedMount, and one about a pod
     of nobody's. Stage "ignored".
  2. slice 1's container exits 75 (slice lost: counted, the Job fails, the JobSet recreates every Job:
     restart 1, and the pods of attempt 0 go with their Jobs), the progress record saying so (exit 75, a
     stop the restart retries). Stage "restarted".
  3. slice 0's container of attempt 1 exits 70 (user error: FailJob, the JobSet fails at once), the progress
     record saying the trainer gave up (exit 70). Stage "failed".
- `plain` (2 slices of v6e-16): a JobSet applied without Kueue's queue label and without xpk's label (the JobSet controller starts
  it at once), running beside it, whose failurePolicy has a RestartJobSetAndIgnoreMaxRestarts rule (as a user's
  JobSet may): its containers exiting 75 restart it without spending maxRestarts;
  one of its pods exits 75 first, on a cordoned node (1 of its Job's backoffLimit 1 spent, the Job goes on,
  the replacement Pending until the node is uncordoned: `status --why` reads it as recovering);
- `evicted` (1 slice of v5p-16, shaped like xpk's: restartPolicy OnFailure): running, then its Kueue Workload
  deactivated, and Kueue evicts it.

With ELXPK_INCIDENTS_CAPTURE=DIR the objects of each stage are written to DIR/STAGE.json: what
tests/cluster/incidents_corpus/ holds for the tests that stay on the fake API server (watch protocol, call
counts, log faults), so they read the components' own objects.
"""

from __future__ import annotations

import dataclasses
import json
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import requests
import yaml

from elxpk.cluster.records.status import parse_time
from elxpk_contract.progress_record import PROGRESS_FILE, Progress
from tests.realcluster.capture import KUEUE
from tests.realcluster.capture import capture as shared_capture
from tests.realcluster.test_lifecycle import pods, wait
from tests.realcluster.test_submit_goldens import elxpk
from tools.testcluster.kubeapi import JOBS, JOBSETS, LocalCluster

EVENTS = "/api/v1/namespaces/default/events"
MERGE = "application/merge-patch+json"
NAME, PLAIN, EVICTED = "incidents", "incidents-plain", "incidents-evicted"
SHAPE = ["--tpu-type=v5p-8", "--num-slices=2", "--no-pathways", "--max-restarts=2", "--command", "python3 train.py"]
START = 1_780_000_000.0  # the injected `now` of status; the progress records' times are relative to it
SLICE = "jobset.sigs.k8s.io/job-index"
BUCKET = "incidents"
# what the trainer's progress record says as its group stops for a lost slice, and as it gives up for good
LOST = "process 1 (slice 1) was preempted (SIGTERM); the group stopped together at step 130"
GAVE_UP = "elastic: 2 attempts in a row ended in class slice_lost with no checkpoint past step 100"


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


def capture(cluster: LocalCluster, stage: str, name: str) -> None:
    """With ELXPK_INCIDENTS_CAPTURE=DIR, the objects `events` and `status` read, to DIR/STAGE.json."""
    shared_capture(cluster, stage, name, env="ELXPK_INCIDENTS_CAPTURE", events=True)


def post_event(cluster: LocalCluster, name: str, pod: str, reason: str, message: str, node: str,
               uid: str | None = None) -> None:
    """A Warning Event as a kubelet posts one (kwok's kubelet posts none of these): now, about the pod's uid
    (`events` leaves out an Event older than the JobSet: an earlier JobSet's of the same name)."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    involved = {"apiVersion": "v1", "kind": "Pod", "name": pod, "namespace": "default", **({"uid": uid} if uid else {})}
    event = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "namespace": "default"},
             "type": "Warning", "reason": reason, "message": message, "count": 1,
             "firstTimestamp": now, "lastTimestamp": now, "involvedObject": involved,
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


@contextmanager
def run_story(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Story]:
    """Play the story, keeping what `elxpk` answered at each stage; remove its workloads after."""
    mp = pytest.MonkeyPatch()
    mp.setenv("COLUMNS", "200")
    mp.setenv("STORAGE_EMULATOR_HOST", cluster.storage_emulator_host)
    make_bucket(cluster)
    record = tmp_path_factory.mktemp("record") / "incidents.jsonl"
    checkpoints = tmp_path_factory.mktemp("checkpoints")
    gs = f"gs://{BUCKET}/{NAME}/incidents.jsonl"
    stages = {key: Stage() for key in ("ignored", "plain", "restarted", "failed", "evicted")}
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
                   "MountVolume.SetUp failed for volume gcs-fuse", first["spec"]["nodeName"], first["metadata"]["uid"])
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
            stages["plain"].run(cluster, "why.degraded", "workload", "status", PLAIN, "--why", "-o", "json")
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
        # the record the trainer leaves when its group stops for a lost slice: retryable (75), no giving up
        lost = dataclasses.replace(progress, state="failed", exit_code=75, stopped=LOST)
        (checkpoints / PROGRESS_FILE).write_text(json.dumps(lost.to_json()))
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
        stage.run(cluster, "status", "workload", "status", NAME)
        capture(cluster, "restarted", NAME)

        # 3. exit 70 on slice 0 of attempt 1: FailJob, the JobSet fails
        stage = stages["failed"]
        gave_up = dataclasses.replace(progress, state="failed", exit_code=70, stopped=GAVE_UP)
        (checkpoints / PROGRESS_FILE).write_text(json.dumps(gave_up.to_json()))
        assert cluster.exit_pods("default", f"jobset.sigs.k8s.io/jobset-name={NAME},{SLICE}=0", 70) == 1
        assert wait(cluster, NAME, "completed") == 1
        stage.run(cluster, "why", "workload", "status", NAME, "--why", "-o", "json")
        stage.run(cluster, "events", "workload", "events", NAME)
        stage.run(cluster, "events.json", "workload", "events", NAME, "-o", "json")
        stage.run(cluster, "watch", "workload", "events", NAME, "--watch")
        stage.run(cluster, "status", "workload", "status", NAME)
        stage.run(cluster, "status.json", "workload", "status", NAME, "-o", "json")
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

        yield Story(stages, record, record_first, gcs_read(cluster, f"{NAME}/incidents.jsonl"), first["metadata"]["name"])
    finally:
        mp.undo()
        for name in (NAME, PLAIN, EVICTED):
            cluster.remove_jobset("default", name)

