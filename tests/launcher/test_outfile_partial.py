"""No output file is left part-written on any failure (issue 51, finding 9), for every way elxpk/outfile.py
writes: a path the user named (replaced through a temporary file) and elxpk's own default paths (new, or
replaced). The failure is a real one: a file-size limit (RLIMIT_FSIZE), whose write fails with EFBIG part way."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT

SCRIPT = """
import resource, sys
from elxpk.outfile import write_bytes
from elxpk_contract.errors import ElxpkError
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
own = None if sys.argv[2] == "user" else sys.argv[2]
try:
    write_bytes(sys.argv[1], b"x" * 100_000, flag="--out", own=own)
except ElxpkError as exc:
    print(exc.exit_code, str(exc))
"""


# own="new" refuses an existing file before it writes anything
@pytest.mark.parametrize("own, existing", [("user", False), ("user", True), ("new", False), ("replace", False),
                                           ("replace", True)])
def test_a_write_past_a_file_size_limit_leaves_the_path_as_it_was(tmp_path, own, existing):
    target = tmp_path / "out.txt"
    if existing:
        target.write_bytes(b"old\n")
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(target), own], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=60, env={"PYTHONPATH": str(REPO_ROOT), "PYTHONDONTWRITEBYTECODE": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    code, message = done.stdout.split(" ", 1)
    assert int(code) == 74 and "--out" in message, done.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == (["out.txt"] if existing else [])
    if existing:
        assert target.read_bytes() == b"old\n"
