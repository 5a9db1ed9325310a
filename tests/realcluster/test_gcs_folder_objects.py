"""Folder placeholder objects on `gs://` (a zero-byte `name/`, what the console's "create folder" and other
tools write), through the real gcsfs against fake-gcs-server, as the user runs `elxpk checkpoint inspect`.

gcsfs lists such a folder inside itself, so epath names it `<folder>/<folder name>`, an entry that does not
exist. Taken for a file, it made a whole orbax step hold an empty file (torn, and moved aside by
`--quarantine`) and an empty step folder hold something (left where orbax's listing restores it). The
in-memory bucket of tests/trainer/fake_gcs.py has no placeholder objects, so only the emulator shows this.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import requests

from tests.realcluster.test_pre_start_process import gcs_env, objects, orbax, placeholder
from tools.testcluster.kubeapi import LocalCluster

ELXPK = Path(sys.executable).with_name("elxpk")


def inspect(directory: str, *flags: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(ELXPK), "checkpoint", "inspect", directory, *flags], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.slow
def test_placeholders_leave_whole_steps_whole_and_an_empty_step_is_moved_aside(testcluster: LocalCluster,
                                                                                tmp_path: Path) -> None:
    bucket = f"folders-{uuid.uuid4().hex[:8]}"
    made = requests.post(f"{testcluster.storage_emulator_host}/storage/v1/b", json={"name": bucket}, timeout=30)
    assert made.status_code == 200, made.text
    directory, prefix = f"gs://{bucket}/run/checkpoints", "run/checkpoints/"
    orbax(testcluster, directory, "2:1,4:1")
    for name in ("run/", prefix, f"{prefix}2/", f"{prefix}4/", f"{prefix}4/items/", f"{prefix}8/"):
        assert placeholder(testcluster, bucket, name), f"the emulator did not keep {name}"
    env = gcs_env(testcluster)

    inspected = inspect(directory, "-o", "json", env=env, cwd=tmp_path)
    assert inspected.returncode == 1, inspected.stderr  # one finding: the empty step 8
    report = json.loads(inspected.stdout)
    states = {s["step"]: s["state"] for s in report["steps"]}
    assert states == {2: "committed", 4: "committed", 8: "torn"}, report
    assert report["restore_step"] == 4, report  # orbax on gs:// lists a step once its commit marker is there

    moved = inspect(directory, "--quarantine", env=env, cwd=tmp_path)
    assert moved.returncode == 0, moved.stdout + moved.stderr
    assert f"moved: 8 -> {directory}/elxpk-quarantine/8-" in moved.stdout, moved.stdout
    names = {n.removeprefix(prefix).split("/")[0] for n in objects(testcluster, bucket, prefix)}
    assert names == {"", "2", "4", "elxpk-quarantine"}, names  # "": the directory's own placeholder
    after = json.loads(orbax(testcluster, directory, "--latest").stdout.splitlines()[-1])
    assert after == {"latest": 4, "steps": [2, 4], "restored_step": 4}  # and orbax restores it whole
