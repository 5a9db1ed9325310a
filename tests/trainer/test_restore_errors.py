"""Restore errors by class (issue 41) and exit codes by class (issue 44): the one classifier of transient
failures (elxpk_contract.transient), the bounded retry of a restore (trainer/ckpt/transient_retry.py) under a
real memory limit, and the GCS bucket-name rules every gs:// setting is checked against before training."""

from __future__ import annotations

import errno
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from gcsfs.retry import HttpError
from hypothesis import given
from hypothesis import strategies as st

from elxpk_contract.bucket_names import bucket_problem, gcs_url_problem
from elxpk_contract.exit_codes import SLICE_LOST
from elxpk_contract.transient import (
    ACCESS_DENIED,
    HOST,
    OUT_OF_MEMORY,
    UNAVAILABLE,
    describe,
    transient_cause,
)
from tests.conftest import REPO_ROOT
from tests.process.conftest import user_env


def _wrapped(inner: BaseException, outer: BaseException) -> BaseException:
    """`outer` raised from `inner`, as orbax wraps tensorstore's error."""
    try:
        raise outer from inner
    except BaseException as exc:  # noqa: BLE001 - built to be classified
        return exc


@pytest.mark.parametrize("error, expected", [
    (MemoryError(), OUT_OF_MEMORY),
    (ValueError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 4.00GiB"), OUT_OF_MEMORY),
    (ValueError("RESOURCE_EXHAUSTED: Error writing local file: [os_error_code=28]"), None),  # a full disk: 74's
    (HttpError({"code": 503, "message": "Service Unavailable"}), UNAVAILABLE),  # gcsfs, a 5xx after its retries
    (HttpError({"code": 429, "message": "rate"}), UNAVAILABLE),
    (HttpError({"code": 401, "message": "Invalid Credentials"}), ACCESS_DENIED),  # a token expiring mid-restore
    (HttpError({"code": 400, "message": "bad"}), None),
    (OSError("Forbidden: gs://bkt/ckpt/30/state\nAccess denied."), ACCESS_DENIED),  # gcsfs's 403
    (ValueError('UNAVAILABLE: Error reading "x" in OCDBT database at gs://bkt/c/30/state: HTTP 503'), UNAVAILABLE),
    (ValueError("DEADLINE_EXCEEDED: deadline exceeded"), UNAVAILABLE),
    (ValueError("UNAUTHENTICATED: token expired"), ACCESS_DENIED),
    (ValueError("NOT_FOUND: Error reading x: [os_error_code=13] Permission denied"), ACCESS_DENIED),
    (PermissionError(errno.EACCES, "Permission denied"), ACCESS_DENIED),
    (OSError(errno.ECONNRESET, "Connection reset by peer"), UNAVAILABLE),
    (TimeoutError("The read operation timed out"), UNAVAILABLE),
    (RuntimeError("can't start new thread"), HOST),
    (FileNotFoundError(errno.ENOENT, "No such file"), None),  # a missing file of a step is its content
    (ValueError("DATA_LOSS: Error decoding chunk"), None),  # corrupt bytes: content
    (_wrapped(ValueError("PERMISSION_DENIED: Failed to open [os_error_code=13]"),
              Exception("Encountered error while reading array index")), ACCESS_DENIED),
    (KeyError("params"), None),
])
def test_each_failure_has_its_class(error, expected):
    assert transient_cause(error) == expected


def test_the_one_line_names_the_link_that_classified_it():
    error = _wrapped(ValueError("PERMISSION_DENIED: Failed to open [os_error_code=13]\nmore"),
                     Exception("Encountered error while reading array index\nTensorStore({"))
    assert describe(error) == "storage access denied: ValueError: PERMISSION_DENIED: Failed to open [os_error_code=13]"


@given(st.text(max_size=300), st.sampled_from([ValueError, RuntimeError, Exception, OSError]))
def test_classifying_any_message_never_raises_and_a_404_is_never_transient(text, kind):
    cause = transient_cause(kind(text))
    assert cause in (None, OUT_OF_MEMORY, UNAVAILABLE, ACCESS_DENIED, HOST)
    assert transient_cause(_wrapped(kind(text), FileNotFoundError(text))) == cause  # the chain decides, not the top


def test_a_real_memory_limit_is_retried_then_ends_in_75():
    """Under RLIMIT_AS, an allocation beyond it raises a real MemoryError: 3 tries with frees between them,
    then TrainerStopped(SLICE_LOST), never the user's 70."""
    script = textwrap.dedent("""
        import resource, sys
        from elxpk_contract.exit_codes import TrainerStopped
        from trainer.ckpt.transient_retry import retry_transient
        frees = []
        def restore():
            return bytearray(8 << 30)  # 8 GiB: over the limit below
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, hard))
        try:
            retry_transient("reading step 30", restore, free=lambda: frees.append(1), sleep=lambda s: None)
        except TrainerStopped as stop:
            print(stop.exit_code, len(frees), str(stop))
            sys.exit(0)
        sys.exit(1)
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO_ROOT, env=user_env(), capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    code, frees, message = done.stdout.split(" ", 2)
    assert (int(code), int(frees)) == (SLICE_LOST.code, 3)
    assert message.startswith("restore: reading step 30 failed 3 times (out of memory: MemoryError")
    assert done.stderr.count("warning: restore: reading step 30 failed (out of memory") == 2


@pytest.mark.parametrize("bucket, ok", [
    ("ab", False), ("abc", True), ("a" * 63, True), ("a" * 64, False), ("my.bucket.example", True),
    ("My-Bucket", False), ("-abc", False), ("abc_", False), ("192.168.5.4", False), ("goog-x", False),
    ("a..b", False), ("my-google-x", False), ("a_b-c.d", True),
])
def test_bucket_names_follow_the_gcs_rules(bucket, ok):
    assert (bucket_problem(bucket) is None) == ok


def test_a_bucket_gcs_cannot_have_is_refused_before_training_in_one_line(tmp_path):
    """It was found at the first save after 10 steps, with 92 tracebacks and exit 70 (issue 44)."""
    line = gcs_url_problem("--checkpoint-dir", "gs://ab/run")
    assert line == ("--checkpoint-dir 'gs://ab/run': the bucket name 'ab' has 2 characters; GCS needs 3 to 63; give "
                    "gs://BUCKET/PATH with a valid bucket, e.g. gs://my-bucket/run")
    for flag in ("--checkpoint-dir", "--run-dir"):
        done = subprocess.run([sys.executable, "-m", "trainer", flag, "gs://ab/run", "--steps", "2"], cwd=tmp_path,
                              env=user_env(), capture_output=True, text=True, timeout=120)
        assert done.returncode == 2 and done.stderr == f"error: {line.replace('--checkpoint-dir', flag)}\n"
        assert list(tmp_path.iterdir()) == []  # nothing written
    done = subprocess.run([str(Path(sys.executable).parent / "elxpk"), "workload", "create", "--workload", "run-1", "--tpu-type", "v5p-8", "--trainer",
                           "--docker-image", "gcr.io/p/trainer:1", "--checkpoint-dir", "gs://ab/run", "--dry-run"],
                          cwd=tmp_path, env=user_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stdout == "", done.stderr
    assert done.stderr == f"error: {line}\n"


def test_a_move_aside_cut_short_by_the_storage_leaves_no_half_copy(tmp_path):
    """The quarantine's copy-then-delete (an object store's move) fails on a file it cannot read: the source
    stays whole and no part-made copy is left in the quarantine (a longer outage used to leave one)."""
    from tests.process.conftest import as_a_plain_user

    source, target = tmp_path / "ckpt" / "30", tmp_path / "ckpt" / "elxpk-quarantine" / "30-1"
    (source / "state").mkdir(parents=True)
    for name in ("a", "b", "c"):
        (source / "state" / name).write_text(name * 100)
    (source / "state" / "b").chmod(0)
    script = ("import sys; from etils import epath; from elxpk_storage import checkpoint_files as c\n"
              "try:\n    c._copy_then_delete(epath.Path(sys.argv[1]), epath.Path(sys.argv[2]))\n"
              "except PermissionError:\n    sys.exit(3)\n")
    try:
        done = subprocess.run([*as_a_plain_user(), sys.executable, "-c", script, str(source), str(target)],
                              cwd=REPO_ROOT, env=user_env(), capture_output=True, text=True, timeout=60)
    finally:
        (source / "state" / "b").chmod(0o644)
    assert done.returncode == 3, done.stderr[-2000:]
    assert not target.exists()
    assert sorted(p.name for p in (source / "state").iterdir()) == ["a", "b", "c"]
