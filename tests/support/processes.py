"""Processes in tests: groups waited for together (never left running when a test fails), and single
processes whose peak memory is measured."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

# Runs argv and reports its exit code, output and peak RSS (KiB on Linux) as JSON. Measured from this small
# wrapper, not from the test process: a child's ru_maxrss includes the memory of the process it was forked
# from before its exec, and a test process that has run jax is over a gigabyte.
_MEASURED = ("import json, resource, subprocess, sys\n"
             "done = subprocess.run(sys.argv[1:], capture_output=True, text=True, timeout=300)\n"
             "print(json.dumps({'code': done.returncode, 'out': done.stdout, 'err': done.stderr,\n"
             "                  'rss_kib': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))\n")


def run_measured(argv: list[str], *, env: Mapping[str, str], cwd: Path | None = None, stdin: Any = subprocess.DEVNULL,
                 timeout: float = 360) -> dict:
    """{'code', 'out', 'err', 'rss_kib'} of `argv` run to its end."""
    done = subprocess.run([sys.executable, "-c", _MEASURED, *argv], stdin=stdin, capture_output=True, text=True,
                          timeout=timeout, env=dict(env), cwd=cwd)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def wait_group(group: list[subprocess.Popen], timeout: float) -> tuple[list[int], list[str]]:
    """Exit codes and (stdout+stderr) outputs of every process; stragglers are killed on the way out."""
    try:
        outputs = [p.communicate(timeout=timeout)[0] for p in group]
    finally:
        for p in group:
            if p.poll() is None:
                p.kill()
                p.wait()
    return [p.returncode for p in group], outputs
