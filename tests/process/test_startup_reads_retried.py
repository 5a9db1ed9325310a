"""Every read a restore makes gets the trainer's own bounded tries (issue 51, finding 2), the reads before
the restore too: one 403 on the newest digest (read at start-up to refuse another configuration), a `state/`
at mode 000. `python -m trainer` as a user runs it: against the repo's Cloud Storage endpoint, and on a real
directory under a real permission check."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.process.conftest import as_a_plain_user, events, user_env
from tests.support.fake_gcs import FakeGcs

FLAGS = ["--checkpoint-period", "2"]


def _trainer(cwd: Path, *flags: str, env: dict[str, str], prefix: list[str] | None = None):
    return subprocess.run([*(prefix or []), sys.executable, "-m", "trainer", *FLAGS, *flags], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_one_403_on_the_newest_digest_at_start_is_retried_and_the_run_resumes(tmp_path):
    fake = FakeGcs().start()
    fake.buckets.add("startup")
    env = {**user_env(), "STORAGE_EMULATOR_HOST": fake.url, "TENSORSTORE_GCS_HTTP_URL": fake.url,
           "GOOGLE_AUTH_TOKEN_FOR_TESTING": "anon"}
    ckpt = ["--checkpoint-dir", "gs://startup/ckpt"]
    try:
        first = _trainer(tmp_path, "--run-dir", str(tmp_path / "a"), "--steps", "4", *ckpt, env=env)
        assert first.returncode == 0, first.stderr[-3000:]
        fake.object_faults["read ckpt/4/elxpk_digest.json"] = [403]
        again = _trainer(tmp_path, "--run-dir", str(tmp_path / "b"), "--steps", "6", *ckpt, env=env)
        left = fake.object_faults["read ckpt/4/elxpk_digest.json"]
    finally:
        fake.stop()
    assert again.returncode == 0, again.stderr[-3000:]  # it was exit 75 at once, a whole group restart
    assert left == []  # the 403 was answered
    assert "warning: restore: reading the newest digest failed (storage access denied" in again.stderr
    assert [e["step"] for e in events(tmp_path / "b", "restore_done")] == [4]  # the newest step, whole


@pytest.mark.slow
def test_a_step_state_at_mode_000_is_tried_three_times_then_75_with_every_step_in_place(tmp_path):
    run = tmp_path / "run"
    first = _trainer(tmp_path, "--run-dir", str(run), "--steps", "4", env=user_env())
    assert first.returncode == 0, first.stderr[-3000:]
    state = run / "checkpoints" / "4" / "state"
    before = sorted(p.name for p in (run / "checkpoints").iterdir())
    state.chmod(0)
    try:
        again = _trainer(tmp_path, "--run-dir", str(run), "--steps", "6", env=user_env(), prefix=as_a_plain_user())
    finally:
        state.chmod(0o755)
    assert again.returncode == 75, again.stderr[-3000:]
    (line,) = [x for x in again.stderr.splitlines() if x.startswith("error: ")]
    assert "failed 3 times (storage access denied: PermissionError" in line, line
    assert again.stderr.count("warning: restore: ") == 2  # the second and third tries, said
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == before  # nothing moved aside
