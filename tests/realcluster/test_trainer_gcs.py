"""The trainer's checkpoints on `gs://` against fake-gcs-server, as a user runs it: `python -m trainer` saves
steps 2 and 4, a second run to 6 restores step 4, and `elxpk checkpoint inspect` reads the bucket healthy.
The compilation cache and the executable store are the trainer's defaults, beside the checkpoints in the
bucket: the first run writes both, the second loads its step from the store.

Two clients write there: gcsfs (etils.epath/fsspec: listings, metadata, commit markers) honours
STORAGE_EMULATOR_HOST and goes anonymous under it; orbax's arrays go through tensorstore's own GCS driver,
which takes the emulator from TENSORSTORE_GCS_HTTP_URL and a token from GOOGLE_AUTH_TOKEN_FOR_TESTING (its
documented testing variables). Without them tensorstore waits on Google's credential lookups for ever."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import pytest
import requests

from tools.testcluster.kubeapi import LocalCluster

REPO = Path(__file__).resolve().parents[2]
ELXPK = Path(sys.executable).with_name("elxpk")
HIT = "Persistent compilation cache hit for 'jit_train_step'"
# A small model: each run compiles it cold but for the cache's own loads (no shared test cache here).
SMALL = ["--seq-len", "16", "--vocab-size", "64", "--d-model", "32", "--n-layers", "2", "--n-heads", "2",
         "--d-ff", "64"]


@pytest.fixture()
def gcs_env(testcluster: LocalCluster, tmp_path: Path) -> tuple[dict[str, str], str]:
    host = testcluster.storage_emulator_host
    bucket = f"ckpt-{tmp_path.name.lower().replace('_', '-')}"[:60]
    made = requests.post(f"{host}/storage/v1/b", json={"name": bucket}, timeout=30)
    assert made.status_code in (200, 409), made.text
    for item in requests.get(f"{host}/storage/v1/b/{bucket}/o", timeout=30).json().get("items", []):
        gone = requests.delete(f"{host}/storage/v1/b/{bucket}/o/{quote(item['name'], safe='')}", timeout=30)
        assert gone.status_code in (200, 204), gone.text  # an earlier run's checkpoints on a reused cluster
    env = {**os.environ, "STORAGE_EMULATOR_HOST": host, "TENSORSTORE_GCS_HTTP_URL": host,
           "GOOGLE_AUTH_TOKEN_FOR_TESTING": "anon", "PYTHONPATH": str(REPO)}
    env.pop("JAX_COMPILATION_CACHE_DIR")  # not the tests' shared cache: the run's own, on gs:// (docs/trainer.md)
    env["JAX_LOG_COMPILES"] = "1"
    return env, f"gs://{bucket}/run/ckpt"


def trainer(env: dict[str, str], cwd: Path, steps: int, directory: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "trainer", "--steps", str(steps), "--checkpoint-period", "2",
                           "--checkpoint-dir", directory, *SMALL], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=300, check=False)


@pytest.mark.slow
def test_checkpoints_resume_and_inspect_on_gs(gcs_env: tuple[dict[str, str], str], tmp_path: Path) -> None:
    env, directory = gcs_env
    first = trainer(env, tmp_path, 4, directory)
    assert first.returncode == 0, first.stderr[-3000:]
    resumed = trainer(env, tmp_path, 6, directory)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    # gcsfs's plain file system under the emulator (elxpk_storage/gcs_auth.py): its default one asked the
    # storage control API for the bucket's type at every operation and logged each failure (hundreds a run).
    assert "bucket type" not in first.stderr + resumed.stderr, (first.stderr + resumed.stderr)[-3000:]
    events = [json.loads(line) for line in (tmp_path / "elxpk-run" / "events.jsonl").read_text().splitlines()]
    restores = [(e["step"], e["from_checkpoint"]) for e in events if e["event"] == "restore_done"]
    assert restores == [(0, False), (4, True)], restores
    # The second run loaded its step from the bucket: the serialized executable the first wrote there
    # (trainer/core/executable_store.py), with no trace and no lookup in jax's cache, which the first wrote too
    # (jax logs each cache hit under JAX_LOG_COMPILES). Until gcsfs's files were read right, it was a cache hit.
    made = [e.get("executable") for e in events if e["event"] == "restore_done"]
    assert made == ["compiled", "deserialized"], made
    assert HIT not in first.stderr + resumed.stderr, resumed.stderr[-3000:]
    host, bucket = env["STORAGE_EMULATOR_HOST"], directory.split("/")[2]
    for prefix, suffix in (("run/xla-cache/", "-cache"), ("run/xla-cache-executables/", ".xexec")):
        listed = requests.get(f"{host}/storage/v1/b/{bucket}/o", params={"prefix": prefix}, timeout=30)
        assert any(item["name"].endswith(suffix) for item in listed.json().get("items", [])), listed.text[:2000]

    inspected = subprocess.run([str(ELXPK), "checkpoint", "inspect", directory, "-o", "json"], env=env,
                               cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    assert inspected.returncode == 0, inspected.stdout + inspected.stderr[-3000:]
    report = json.loads(inspected.stdout)
    steps = [(s["step"], s["state"]) for s in report["steps"]]
    assert steps == [(2, "committed"), (4, "committed"), (6, "committed")], report
    assert (report["restore_step"], report["trainer_step"], report["healthy"]) == (6, 6, True), report
