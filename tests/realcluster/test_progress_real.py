"""`workload status` reading the trainer's progress record (CHECKPOINT_DIR/elxpk-progress.json) from the
directory the workload gives its trainer (`workload create --checkpoint-dir`), locally and on gs://
(fake-gcs-server), on the real API server; ages and the save cadence on an injected clock."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

from elxpk.cluster.access.connect import connect
from elxpk.cluster.access.target import ClusterTarget
from elxpk.cluster.verbs.observe import fetch_status
from elxpk_contract.progress_record import PROGRESS_FILE, Progress
from tests.realcluster.incident_story import BUCKET, START, make_bucket
from tests.realcluster.test_submit_goldens import elxpk
from tools.testcluster.kubeapi import LocalCluster

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

