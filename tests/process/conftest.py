"""The process boundary: `python -m trainer` and `elxpk` run as subprocesses, as the container and the
user run them, under the default settings, and every exit code is read from the real process.

The in-process tests elsewhere call `trainer.__main__.main` and never see what happens after it returns:
the interpreter's finalization (a background thread still inside XLA there aborts the process, exit 134)
and the signal handlers of a real process. These tests do.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.runs import read_jsonl

# A short run of the defaults: the default model, slices, recovery (live) and elastic settings; only the
# length and the save cadence are shortened, so that a run ends and a resume has a checkpoint to find.
SHORT = ["--steps", "4", "--checkpoint-period", "2"]


def user_env() -> dict[str, str]:
    """The environment a user's shell has: none of the test session's XLA settings (the trainer sets its
    own device count) and no ELXPK_* settings."""
    return {k: v for k, v in os.environ.items() if k != "XLA_FLAGS" and not k.startswith("ELXPK_")}


@dataclass
class Exited:
    code: int
    out: str
    err: str

    @property
    def last_error_line(self) -> str:
        lines = self.err.strip().splitlines()
        return lines[-1] if lines else ""


def run_process(args: list[str], cwd: Path, *, env: dict[str, str] | None = None, timeout: float = 300,
                until: Callable[[], bool] | None = None, then: int | None = None, stdout: Any = None) -> Exited:
    """Run `args` to its end. With `until` and `then`, send signal `then` once `until()` holds (polled;
    no timing is asserted). `stdout`: a file to write to instead of a pipe. Never leaves the process running."""
    proc = subprocess.Popen(args, cwd=cwd, env=env if env is not None else user_env(),
                            stdout=subprocess.PIPE if stdout is None else stdout,
                            stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    try:
        if until is not None and then is not None:
            deadline = time.monotonic() + timeout
            while proc.poll() is None and not until() and time.monotonic() < deadline:
                time.sleep(0.1)
            if proc.poll() is None:
                proc.send_signal(then)
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return Exited(proc.returncode, out, err)


def trainer(flags: list[str], cwd: Path, **kw) -> Exited:
    return run_process([sys.executable, "-m", "trainer", *flags], cwd, **kw)


def elxpk(args: list[str], cwd: Path, **kw) -> Exited:
    exe = shutil.which("elxpk", path=str(Path(sys.executable).parent))
    assert exe is not None, "the elxpk console script is installed beside this interpreter"
    return run_process([exe, *args], cwd, **kw)


def as_a_plain_user() -> list[str]:
    """A prefix that runs a command without root's overrides of file permissions (CAP_DAC_OVERRIDE,
    CAP_DAC_READ_SEARCH), so that a file with mode 000 cannot be read, as for any other user."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: a mode-000 file would still be readable")
    drop = "-dac_override,-dac_read_search"
    return [setpriv, "--inh-caps", drop, "--bounding-set", drop]


def events(run_dir: Path, kind: str) -> list[dict]:
    return [e for e in read_jsonl(run_dir / "events.jsonl") if e["event"] == kind]


@pytest.fixture(scope="session")
def finished_short_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A completed short default run (checkpoints at steps 2 and 4): the starting point of every resume case,
    copied per test so that none changes it."""
    root = tmp_path_factory.mktemp("finished")
    done = trainer(["--run-dir", str(root / "run"), *SHORT], root)
    assert done.code == 0, done.err[-3000:]
    return root / "run"


@pytest.fixture
def resumable(finished_short_run: Path, tmp_path: Path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(finished_short_run, run)
    return run


SIGTERM = signal.SIGTERM
