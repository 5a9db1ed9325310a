"""A full disk, as the container and the user meet it: `python -m trainer` and `elxpk local run` as
subprocesses on a real tmpfs that fills up, and under a real file-size limit (RLIMIT_FSIZE: EFBIG).

Each ends with exit 74 (storage_full, retryable: Count, not FailJob) and one line naming the directory and
the errno, no traceback; the previous checkpoint is left valid, and a run after space is freed restores it."""

from __future__ import annotations

import resource
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from elxpk.local.options import config_flags
from elxpk_contract.exit_codes import DONE, STORAGE_FULL
from tests.process.conftest import elxpk, events, trainer, user_env
from tests.support.runs import tiny_config
from tests.support.small_disk import SmallDisk, mounted_small_disk

pytestmark = pytest.mark.slow
MARGIN = 96 * 1024  # a tiny step is ~320 KiB: the next save cannot fit in this
TINY = ("--d-model=32", "--n-layers=1", "--n-heads=2", "--d-ff=64", "--seq-len=16", "--vocab-size=64",
        "--global-batch=8")



@pytest.fixture
def small_disk(tmp_path) -> Iterator[SmallDisk]:
    yield from mounted_small_disk(tmp_path)

def _flags(run: Path, steps: int) -> list[str]:
    return config_flags(tiny_config(run, steps=steps, checkpoint_period=2))


def _one_error_line(err: str) -> str:
    assert "Traceback" not in err, err[-3000:]
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, err[-3000:]
    return lines[0]


def test_the_trainer_exits_74_on_a_full_disk_and_the_resume_restores_the_previous_step(small_disk, tmp_path):
    run = small_disk.path / "run"
    assert trainer(_flags(run, 2), tmp_path).code == DONE.code
    small_disk.fill_to(MARGIN)
    full = trainer(_flags(run, 4), tmp_path)
    assert full.code == STORAGE_FULL.code == 74, full.err[-3000:]
    assert _one_error_line(full.err) == (
        f"error: --checkpoint-dir {run / 'checkpoints'}: saving step 4: no space left on device (ENOSPC); step 2, "
        "the previous checkpoint, is intact; free space or raise the quota there, then run again")
    small_disk.resize(16 << 20)
    done = trainer(_flags(run, 4), tmp_path)
    assert done.code == DONE.code, done.err[-3000:]
    assert events(run, "restore_done")[-1]["step"] == 2


def test_a_file_size_limit_exits_74_naming_efbig(tmp_path):
    def limit() -> None:  # what a container's ulimit -f does; the signal would kill before the errno
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        # Under every checkpoint's _sharding and _METADATA (about 14 KiB each, every save), above every file
        # the run writes beside them (run.json 2 KiB). Not 64 KiB: how orbax splits the arrays' data into
        # files depends on timing (119 + 86 KiB at one step, 82 + 77 + 25 + 24 at the next), so step 2 now
        # and then fitted and step 4 failed instead.
        resource.setrlimit(resource.RLIMIT_FSIZE, (8 * 1024, 8 * 1024))

    run = tmp_path / "run"
    env = {**user_env(), "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run([sys.executable, "-m", "trainer", *_flags(run, 4)], cwd=tmp_path, env=env,
                          preexec_fn=limit, capture_output=True, text=True, timeout=300)
    assert done.returncode == STORAGE_FULL.code, done.stderr[-3000:]
    line = _one_error_line(done.stderr)
    assert line.startswith(f"error: --checkpoint-dir {run / 'checkpoints'}: saving step 2: file too large (EFBIG); "
                           "no earlier checkpoint of this run"), line


def test_local_run_reports_a_full_disk_in_one_line_with_exit_74_and_resumes_after(small_disk, tmp_path):
    run = small_disk.path / "run"
    common = ["local", "run", "--run-dir", str(run), "--checkpoint-period", "2", "--no-faults", "--plain",
              *[f"--trainer-arg={a}" for a in TINY]]
    first = elxpk([*common, "--steps", "2"], tmp_path)
    assert first.code == DONE.code, first.err[-3000:]
    small_disk.fill_to(MARGIN)
    full = elxpk([*common, "--steps", "4"], tmp_path)
    assert full.code == STORAGE_FULL.code, full.err[-3000:]
    line = _one_error_line(full.err)
    assert line.startswith(f"error: --checkpoint-dir {run / 'checkpoints'}: saving step 4: no space left on device "
                           "(ENOSPC); step 2, the previous checkpoint, is intact"), line
    small_disk.resize(16 << 20)
    again = elxpk([*common, "--steps", "4"], tmp_path)
    assert again.code == DONE.code, again.err[-3000:]
    assert events(run, "restore_done")[-1]["step"] == 2


@pytest.mark.parametrize("argv", [("checkpoint", "inspect", "{run}/checkpoints", "-o", "json"), ("report", "{run}"),
                                  ("compare", "{run}", "{run}"),
                                  ("plan", "--from-run", "{run}", "--slice-mtbf", "30d", "--restore", "90s")])
def test_a_verb_whose_stdout_is_full_exits_74_not_0(finished_short_run, tmp_path, argv):
    """`elxpk checkpoint inspect -o json > full` exited 0 with the report lost (the fifth pass)."""
    import shutil

    exe = shutil.which("elxpk", path=str(Path(sys.executable).parent))
    with open("/dev/full", "w") as full:
        done = subprocess.run([exe, *(a.format(run=finished_short_run) for a in argv)], stdout=full,
                              stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=user_env(), timeout=300)
    assert done.returncode == 74, done.stderr[-2000:]
    assert done.stderr.splitlines() == ["error: cannot write to stdout: no space left on device (ENOSPC); free "
                                        "space or raise the quota there, then run again"], done.stderr[-2000:]


def test_a_read_only_filesystem_is_the_users_exit_2_and_never_hangs(small_disk, tmp_path):
    """EROFS is not space: every retry fails until the run points elsewhere, so it is bad input (exit 2, one
    line naming the flag), not the retryable 74. Before the fifth pass, `local run` ended in an internal
    error, and the trainer's save into a read-only --checkpoint-dir printed exit 70 and then hung: orbax's
    threads waited for the failed save's signals and the interpreter's exit joined them forever."""
    import time

    ckpt = small_disk.path / "checkpoints"
    run = tmp_path / "run"
    first = trainer([*_flags(run, 2), f"--checkpoint-dir={ckpt}"], tmp_path)
    assert first.code == DONE.code, first.err[-3000:]
    small_disk.read_only()
    started = time.monotonic()
    resumed = trainer([*_flags(run, 4), f"--checkpoint-dir={ckpt}"], tmp_path)
    assert resumed.code == 2, resumed.err[-3000:]
    assert time.monotonic() - started < 240  # a generous bound: it catches the hang, it measures nothing
    # orbax logs its failed save with a traceback (absl, before the trainer's own line): only the line is ours
    assert [line for line in resumed.err.splitlines() if line.startswith("error:")] == [
        f"error: --checkpoint-dir {ckpt}: cannot write there (Read-only file system); give a writable --checkpoint-dir"]
    for where in (small_disk.path / "new", small_disk.path / "run"):
        done = elxpk(["local", "run", "--run-dir", str(where), "--steps", "2", "--no-faults", "--plain"], tmp_path)
        assert done.code == 2, done.err[-3000:]
        assert _one_error_line(done.err) == (f"error: --run-dir {where}: cannot write there (Read-only file system); "
                                             "give a writable --run-dir")
