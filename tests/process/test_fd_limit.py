"""Running out of file descriptors (issue 51, finding 10) is the host's limit: exit 74 with one line saying
which limit and how to raise it, never "internal error" (exit 1). Real EMFILEs, under a real RLIMIT_NOFILE:
elxpk's one error handler, a writer (elxpk/outfile.py), the trainer's exit code and the restore's classifier."""

from __future__ import annotations

import errno
import subprocess
import sys

from hypothesis import given
from hypothesis import strategies as st

from elxpk_contract.fd_limit import descriptors_error, fd_errno
from elxpk_contract.transient import HOST, transient_cause
from tests.conftest import REPO_ROOT

SCRIPT = """
import os, resource, sys
from elxpk.cli.main import run_guarded
from elxpk.outfile import write_text
held = []
def exhaust():
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    while True:
        held.append(os.open(os.devnull, os.O_RDONLY))
def write():
    exhaust()
def then_write():
    try:
        exhaust()
    except OSError:
        write_text(sys.argv[2], "x", flag="--out")
code = run_guarded({"open": exhaust, "write": then_write}[sys.argv[1]])
for fd in held:
    os.close(fd)
sys.exit(code)
"""


def _run(kind: str, tmp_path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", SCRIPT, kind, str(tmp_path / "out.txt")], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=120)


def test_out_of_descriptors_anywhere_in_elxpk_is_74_with_how_to_raise_the_limit(tmp_path):
    for kind, where in (("open", "error: elxpk: "), ("write", f"error: --out {str(tmp_path / 'out.txt')!r}: ")):
        done = _run(kind, tmp_path)
        assert done.returncode == 74, (kind, done.stderr[-2000:])
        (line,) = done.stderr.splitlines()
        assert line.startswith(where), line
        assert "ran out of file descriptors (EMFILE: its limit is 64" in line and "ulimit -n" in line, line
        assert "internal error" not in line
    assert not (tmp_path / "out.txt").exists()


def test_the_trainer_maps_a_real_emfile_to_74_and_a_restore_retries_it():
    script = ("import os, resource\nfrom trainer.elastic.outcome import exit_code_for\n"
              "resource.setrlimit(resource.RLIMIT_NOFILE, (32, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))\n"
              "held = []\ntry:\n    while True:\n        held.append(os.open(os.devnull, os.O_RDONLY))\n"
              "except OSError as exc:\n    caught = exc\nfor fd in held:\n    os.close(fd)\n"
              "print(exit_code_for(caught).code)\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["74"]
    assert transient_cause(OSError(errno.EMFILE, "Too many open files")) == HOST  # never sets a step aside
    assert transient_cause(ValueError("UNKNOWN: Error opening file [os_error_code=24]")) == HOST


@given(st.text(max_size=200), st.sampled_from([errno.EMFILE, errno.ENFILE]), st.booleans())
def test_either_limit_is_found_wherever_it_sits_in_the_chain(text, code, wrapped):
    error: BaseException = OSError(code, text)
    if wrapped:
        try:
            raise RuntimeError(text) from error
        except RuntimeError as outer:
            error = outer
    assert fd_errno(error) == code
    line = str(descriptors_error(error, "where"))
    assert line.startswith("where: ") and ("ulimit -n" in line if code == errno.EMFILE else "fs.file-max" in line)
    if "Too many open files" not in text:
        assert fd_errno(RuntimeError(text)) is None and descriptors_error(ValueError(text), "w") is None
