"""A write that runs out of space is the storage's fault (exit 74, storage_full), never the user's (70).

The classifier (elxpk_contract/storage_full.py) is checked on every errno and on the shapes each writer
raises; the trainer on a real tmpfs that fills up between two saves: StorageFull names the checkpoint dir
and the errno, the torn save never shadows the previous checkpoint, and the resume restores it."""

from __future__ import annotations

import errno
import resource
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from elxpk_contract.errors import StorageFull
from elxpk_contract.exit_codes import STORAGE_FULL, USER_ERROR
from elxpk_contract.fd_limit import FD_ERRNOS
from elxpk_contract.storage_full import NO_SPACE_ERRNOS, no_space_errno, storage_full_is_infrastructure
from tests.support.runs import read_jsonl, tiny_config
from tests.support.small_disk import SmallDisk, mounted_small_disk
from trainer.elastic.outcome import exit_code_for

ALL_ERRNOS = sorted(errno.errorcode)


@given(st.sampled_from(ALL_ERRNOS), st.booleans())
def test_an_oserror_is_storage_full_exactly_for_the_three_errnos(code, chained):
    error: BaseException = OSError(code, "whatever the OS says", "/some/file")
    if chained:  # the way an async writer re-raises it
        try:
            raise RuntimeError("commit failed") from error
        except RuntimeError as wrapped:
            error = wrapped
    expected = code if code in NO_SPACE_ERRNOS else None
    assert no_space_errno(error) == expected
    # Out of file descriptors (EMFILE, ENFILE) shares exit 74 with its own line (elxpk_contract/fd_limit.py); any
    # other errno is the infrastructure's or unclassified (elxpk_contract.transient): never a user error.
    exits_74 = bool(expected) or code in FD_ERRNOS
    assert (exit_code_for(error) is STORAGE_FULL) == exits_74 and exit_code_for(error) is not USER_ERROR


@given(st.sampled_from(ALL_ERRNOS))
def test_tensorstore_status_is_classified_by_its_os_error_code_not_its_status(code):
    # orbax's array writer: RESOURCE_EXHAUSTED is also a device out of memory, which is the user's.
    message = (f'RESOURCE_EXHAUSTED: Error writing "x" in OCDBT database at local file "/c/4.orbax-checkpoint-tmp/": '
               f"Failed to write 2539520 bytes to file 6: [os_error_code='{code}']")
    assert no_space_errno(ValueError(message)) == (code if code in NO_SPACE_ERRNOS else None)


@pytest.mark.parametrize("error, expected", [
    (ValueError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 4.0GiB"), None),
    (OSError(errno.EACCES, "Permission denied"), None),
    (RuntimeError("HTTP 429: rateLimitExceeded"), None),  # a quota of requests: the client retries it
    (RuntimeError("step 507 of the run"), None),  # a number is not an HTTP status
    (RuntimeError("HTTP 507 Insufficient Storage"), errno.ENOSPC),
    (ValueError("Failed writing: No space left on device"), errno.ENOSPC),
])
def test_the_shapes_other_layers_raise(error, expected):
    assert no_space_errno(error) == expected



@pytest.fixture
def small_disk(tmp_path) -> Iterator[SmallDisk]:
    yield from mounted_small_disk(tmp_path)

def test_the_guard_names_where_and_the_errno_in_one_line_and_passes_other_errors():
    with pytest.raises(StorageFull) as full, storage_full_is_infrastructure("--run-dir /r: writing run.json",
                                                                           then="all is intact"):
        raise OSError(errno.EDQUOT, "Disk quota exceeded")
    assert str(full.value) == ("--run-dir /r: writing run.json: disk quota exceeded (EDQUOT); all is intact; "
                               "free space or raise the quota there, then run again")
    assert full.value.__cause__ is None and full.value.exit_code == STORAGE_FULL.code == 74
    with pytest.raises(ZeroDivisionError), storage_full_is_infrastructure("x"):
        raise ZeroDivisionError


def test_a_file_size_limit_is_efbig_from_the_kernel(tmp_path):
    # RLIMIT_FSIZE in a child (SIGXFSZ ignored): the write itself fails with EFBIG, no fake involved.
    code = ("import errno, sys\nfrom elxpk_contract.storage_full import no_space_errno\n"
            "try:\n    open(sys.argv[1], 'wb').write(b'x' * 100000)\n"
            "except OSError as e:\n    print(no_space_errno(e) == errno.EFBIG)\n")

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))

    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "big")], preexec_fn=limit,
                          capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "True", done.stderr


def test_a_save_that_fills_the_disk_is_storage_full_and_the_resume_restores_the_previous_step(small_disk):
    from trainer.elastic.loop import train

    run = small_disk.path / "run"
    train(tiny_config(run, steps=4, checkpoint_period=4))
    small_disk.fill_to(96 * 1024)  # a step is ~320 KiB: the next save cannot fit
    with pytest.raises(StorageFull) as full:
        train(tiny_config(run, steps=8, checkpoint_period=4))
    ckpt = run / "checkpoints"
    assert str(full.value).startswith(f"--checkpoint-dir {ckpt}: saving step 8: no space left on device (ENOSPC); "
                                      "step 4, the previous checkpoint, is intact")
    assert "\n" not in str(full.value)
    small_disk.resize(16 << 20)
    train(tiny_config(run, steps=8, checkpoint_period=4))
    events = read_jsonl(run / "events.jsonl")
    restores = [e["step"] for e in events if e["event"] == "restore_done"]
    assert restores[-1] == 4  # the torn step 8 did not shadow it
    assert (ckpt / "8").is_dir() and not list(ckpt.glob("*.orbax-checkpoint-tmp"))


def test_a_place_that_cannot_be_written_is_the_users_not_the_storages():
    """EROFS, EACCES, EPERM: exit 2 naming the flag; out of space and any other error pass unchanged."""
    import errno
    import os

    import pytest

    from elxpk_contract.errors import UsageError
    from elxpk_contract.storage_full import unwritable_is_usage

    for code in (errno.EROFS, errno.EACCES, errno.EPERM):
        with pytest.raises(UsageError) as info, unwritable_is_usage("--run-dir", "/r"):
            raise OSError(code, os.strerror(code), "/r/x")
        assert str(info.value) == f"--run-dir /r: cannot write there ({os.strerror(code)}); give a writable --run-dir"
    for other in (OSError(errno.ENOSPC, "full"), OSError(errno.EIO, "io"), ValueError("x")):
        with pytest.raises(type(other)), unwritable_is_usage("--run-dir", "/r"):
            raise other


def test_a_writer_threads_traceback_after_the_run_ended_is_dropped_for_the_process(capsys):
    """A save's writer threads may fail after train() has returned (a second file over a size limit, after
    the run's one 74 line): orbax's thread logs each failure with its traceback through absl. The filter
    that drops exactly the expected ones stays for the process (it used to leave with train()); an error
    of another kind still gets its traceback. Installed once however many runs a process makes."""
    import logging

    from trainer.elastic.loop import quiet_expected_errors

    quiet_expected_errors()
    quiet_expected_errors()
    absl = logging.getLogger("absl")
    assert sum(type(f).__name__ == "_QuietExpectedErrors" for f in absl.filters) == 1
    handler = logging.StreamHandler()
    absl.addHandler(handler)
    try:
        for error in (ValueError('OUT_OF_RANGE: Error writing "x" in OCDBT database: File too large '
                                 "[os_error_code='27']"), ValueError("a bug of its own")):
            try:
                raise error
            except ValueError:
                absl.exception("_SignalingThread.run() raised an exception: %s", error)
    finally:
        absl.removeHandler(handler)
    err = capsys.readouterr().err
    assert "a bug of its own" in err and "Traceback" in err
    assert "File too large" not in err
