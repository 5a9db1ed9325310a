"""Story 4 of #31, for real: `--checkpoint-pre-start` on a process pool, through the `elxpk` console script.

A `--trainer maxtext` workload whose MaxText image nobody here has (it runs as the process pool's
placeholder) and whose pre-start image is the trainer image (it runs `python -m elxpk.checkpoints` from this
checkout). In `gs://` (the cluster's fake-gcs-server) orbax's own writer, set up as MaxText sets it up, left
steps 2 and 4 whole and a save of step 6 killed before its commit (its files partly written, no commit
marker). The init container rendered by elxpk runs before the main container starts and moves step 6
aside; afterwards orbax's own `CheckpointManager.latest_step()` on that directory is 4, the last whole step.

A save killed before its first write leaves a newer step as an empty folder: on GCS, the zero-byte object
`checkpoints/8/`. fake-gcs-server keeps it on its memory backend (what `testcluster up` runs; the filesystem
backend answered 200 to its upload and stored nothing, and a GET of it is asserted below), so the init
container moves that step aside too.

On `gs://` orbax lists a step only once its commit marker is there, so its latest_step() is already 4
before the move (checked below, so that the test says what the quarantine does and does not change there).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from urllib.parse import quote

import pytest
import requests

from tests.realcluster.test_process_pool import TRAINER_IMAGE, log
from tests.realcluster.test_submit_goldens import elxpk
from tools.testcluster.kubeapi import PODS, LocalCluster

REPO = Path(__file__).resolve().parents[2]
MAXTEXT_IMAGE = "us-docker.pkg.dev/my-project/maxtext/maxtext-runner:1"  # a placeholder on the process pool
TORN_STEP, EMPTY_STEP = "6", "8"


def gcs_env(cluster: LocalCluster) -> dict[str, str]:
    host = cluster.storage_emulator_host
    return {**os.environ, "STORAGE_EMULATOR_HOST": host, "TENSORSTORE_GCS_HTTP_URL": host,
            "GOOGLE_AUTH_TOKEN_FOR_TESTING": "anon", "PYTHONPATH": str(REPO)}


def orbax(cluster: LocalCluster, directory: str, *args: str) -> subprocess.CompletedProcess[str]:
    """tests/support/orbax_writer.py (orbax's CheckpointManager as MaxText makes it) on `directory`."""
    done = subprocess.run([sys.executable, "-m", "tests.support.orbax_writer", directory, *args], cwd=REPO,
                          env=gcs_env(cluster), capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def objects(cluster: LocalCluster, bucket: str, prefix: str) -> list[str]:
    host = cluster.storage_emulator_host
    listed = requests.get(f"{host}/storage/v1/b/{bucket}/o", params={"prefix": prefix}, timeout=30)
    assert listed.status_code == 200, listed.text
    return sorted(item["name"] for item in listed.json().get("items", []))


def tear(cluster: LocalCluster, bucket: str, prefix: str) -> bool:
    """Step TORN_STEP as a save killed mid-write leaves it on an object store: orbax writes a step where it
    stays and marks it committed last, so the markers and the item's merged OCDBT manifest are not there
    yet. EMPTY_STEP is tried as a bare folder (the zero-byte `name/` object a save killed before its first
    write leaves on GCS); True when the emulator kept it (see the module's docstring)."""
    host = cluster.storage_emulator_host
    for rel in ("commit_success.txt", "items/commit_success.txt", "items/manifest.ocdbt"):
        name = quote(f"{prefix}{TORN_STEP}/{rel}", safe="")
        gone = requests.delete(f"{host}/storage/v1/b/{bucket}/o/{name}", timeout=30)
        assert gone.status_code in (200, 204), gone.text
    return placeholder(cluster, bucket, f"{prefix}{EMPTY_STEP}/")


def placeholder(cluster: LocalCluster, bucket: str, name: str) -> bool:
    """Upload the zero-byte folder object `name` (ending in `/`); whether the emulator kept it."""
    host = cluster.storage_emulator_host
    made = requests.post(f"{host}/upload/storage/v1/b/{bucket}/o",
                         params={"uploadType": "media", "name": name}, data=b"", timeout=30)
    assert made.status_code == 200, made.text
    return requests.get(f"{host}/storage/v1/b/{bucket}/o/{quote(name, safe='')}", timeout=30).status_code == 200


def pod_of(cluster: LocalCluster, name: str) -> dict | None:
    pods = cluster.items(PODS.format(ns="default"), labelSelector=f"jobset.sigs.k8s.io/jobset-name={name}")
    return pods[0] if len(pods) == 1 else None


def init_done_and_main_running(cluster: LocalCluster, name: str) -> dict | None:
    pod = pod_of(cluster, name)
    if pod is None:
        return None
    inits = pod["status"].get("initContainerStatuses") or [{}]
    mains = pod["status"].get("containerStatuses") or [{}]
    if "terminated" in inits[0].get("state", {}) and "running" in mains[0].get("state", {}):
        return pod
    if pod["status"].get("phase") == "Failed":
        raise AssertionError(f"the pod failed: {json.dumps(pod['status'])[:2000]}")
    return None


@pytest.mark.slow
def test_the_pre_start_init_container_quarantines_before_maxtext_starts(testcluster: LocalCluster) -> None:
    bucket = f"prestart-{uuid.uuid4().hex[:8]}"
    made = requests.post(f"{testcluster.storage_emulator_host}/storage/v1/b", json={"name": bucket}, timeout=30)
    assert made.status_code == 200, made.text
    run_dir, prefix = f"gs://{bucket}/runs/r1", "runs/r1/checkpoints/"
    orbax(testcluster, run_dir + "/checkpoints", "2:1,4:1,6:1")
    assert tear(testcluster, bucket, prefix), "the emulator did not keep the empty folder object"
    before = json.loads(orbax(testcluster, run_dir + "/checkpoints", "--latest-step").stdout.splitlines()[-1])
    assert before == {"latest": 4, "steps": [2, 4]}  # orbax on gs://: a step counts once its marker is there

    name = f"pre-start-{uuid.uuid4().hex[:4]}"
    from tests.launcher.cases import MAXTEXT_DEMO_COMMAND

    created = elxpk("workload", "create", f"--workload={name}", "--tpu-type=v4-8", "--num-slices=1",
                    "--no-pathways", "--trainer=maxtext", f"--docker-image={MAXTEXT_IMAGE}",
                    "--command", MAXTEXT_DEMO_COMMAND, f"--checkpoint-dir={run_dir}",
                    f"--checkpoint-pre-start={TRAINER_IMAGE}", cluster=testcluster)
    assert created.returncode == 0, created.stderr
    try:
        pod = testcluster.wait_for("the pre-start done and MaxText's container running",
                                   lambda: init_done_and_main_running(testcluster, name), timeout=180)
        [init] = pod["status"]["initContainerStatuses"]
        assert (init["name"], init["state"]["terminated"]["exitCode"]) == ("elxpk-pre-start", 0), init
        main = pod["status"]["containerStatuses"][0]
        # The init container ended before the main one started (second resolution: equal is "before").
        assert init["state"]["terminated"]["finishedAt"] <= main["state"]["running"]["startedAt"]
        pod_name = pod["metadata"]["name"]
        said = log(testcluster, pod_name, "elxpk-pre-start")
        for step in (TORN_STEP, EMPTY_STEP):
            assert f"moved: {step} -> {run_dir}/checkpoints/elxpk-quarantine/{step}-" in said, said
        assert "restore: step 4" in said and said.rstrip().endswith("healthy"), said
        events = testcluster.items("/api/v1/namespaces/default/events",
                                   fieldSelector=f"involvedObject.name={pod_name},reason=Placeholder")
        assert MAXTEXT_IMAGE in events[0]["message"]  # MaxText itself is not here: its container only waits

        names = {n.removeprefix(prefix).split("/")[0] for n in objects(testcluster, bucket, prefix)}
        assert names == {"2", "4", "elxpk-quarantine"}, names
        moved = {n.removeprefix(prefix + "elxpk-quarantine/").split("/")[0].split("-")[0]
                 for n in objects(testcluster, bucket, prefix + "elxpk-quarantine/")}
        assert moved == {TORN_STEP, EMPTY_STEP}, moved
        after = json.loads(orbax(testcluster, run_dir + "/checkpoints", "--latest").stdout.splitlines()[-1])
        assert after == {"latest": 4, "steps": [2, 4], "restored_step": 4}  # and orbax restores it whole
    finally:
        assert elxpk("workload", "delete", name, "--yes", cluster=testcluster).returncode == 0
