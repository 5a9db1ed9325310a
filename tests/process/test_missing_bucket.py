"""A gs:// path in a bucket that does not exist is the flag's fault (issue 51, finding 8): exit 2, one line
naming the flag, nothing written; it used to be exit 1 at the first write, paid for by the restart budget.
Only Cloud Storage's definite "no such bucket" refuses: a 403 on the bucket (object grants alone) does not."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT
from tests.process.conftest import user_env
from tests.support.fake_gcs import FakeGcs


@pytest.fixture
def gcs():
    server = FakeGcs().start()
    server.buckets.add("there")
    yield server
    server.stop()


def _env(server: FakeGcs) -> dict[str, str]:
    return {**user_env(), "STORAGE_EMULATOR_HOST": server.url, "TENSORSTORE_GCS_HTTP_URL": server.url,
            "GOOGLE_AUTH_TOKEN_FOR_TESTING": "anon"}


@pytest.mark.parametrize("flags, named", [
    (["--run-dir", "gs://no-such-bucket/run"], "--run-dir gs://no-such-bucket/run"),
    (["--run-dir", "run", "--checkpoint-dir", "gs://no-such-bucket/ckpt"], "--checkpoint-dir gs://no-such-bucket/ckpt"),
])
def test_a_missing_bucket_is_exit_2_naming_the_flag_and_nothing_is_written(gcs, tmp_path, flags, named):
    done = subprocess.run([sys.executable, "-m", "trainer", "--steps", "2", *flags], cwd=tmp_path, env=_env(gcs),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr[-3000:]
    assert done.stderr.splitlines()[-1] == (
        f"error: {named}: the bucket 'no-such-bucket' does not exist; create it (gcloud storage buckets create "
        "gs://no-such-bucket) or give a path in an existing bucket")
    assert list(tmp_path.iterdir()) == [] and gcs.objects == {}


def test_only_a_definite_no_such_bucket_refuses(gcs, tmp_path):
    script = ("import sys\nfrom elxpk_storage import gcs_auth\n"
              "gcs_auth.require_bucket('--run-dir gs://there/x', 'gs://there/x')\n"
              "gcs_auth.require_bucket('--run-dir gs://denied/x', 'gs://denied/x')\n"
              "try:\n    gcs_auth.require_bucket('--run-dir gs://gone/x', 'gs://gone/x')\n"
              "except Exception as exc:\n    print(type(exc).__name__)\n")
    gcs.faults = [None, 403]  # the bucket that exists answers; the next one's answer is a 403
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO_ROOT, env=_env(gcs), capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["UsageError"]
