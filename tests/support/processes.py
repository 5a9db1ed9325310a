"""Processes in tests: groups waited for together (never left running when a test fails), and single
processes whose peak memory is measured."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

# Runs argv and reports its exit code, output, peak RSS (KiB on Linux) and CPU seconds as JSON. Measured from
# this small wrapper, not from the test process: a child's ru_maxrss includes the memory of the process it was
# forked from before its exec, and a test process that has run jax is over a gigabyte. What bounds the child is
# its CPU time (RLIMIT_CPU: past it the kernel ends it with SIGXCPU), which a loaded machine does not stretch;
# the wall-clock guard only ends a child that waits for ever (a hang uses no CPU), far past any loaded run.
_MEASURED = ("import json, resource, subprocess, sys\n"
             "cpu_s, guard_s = int(sys.argv[1]), float(sys.argv[2])\n"
             "def limit():\n"
             "    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 5))\n"
             "done = subprocess.run(sys.argv[3:], capture_output=True, text=True, timeout=guard_s, preexec_fn=limit)\n"
             "used = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
             "print(json.dumps({'code': done.returncode, 'out': done.stdout, 'err': done.stderr,\n"
             "                  'rss_kib': used.ru_maxrss, 'cpu_s': used.ru_utime + used.ru_stime}))\n")
CPU_S = 120  # a measured command's CPU seconds at most (the largest here, compare at its caps, takes ~20)
HANG_GUARD_S = 3600.0  # wall seconds: catches a child that waits for ever, never a slow one on a loaded machine


def run_measured(argv: list[str], *, env: Mapping[str, str], cwd: Path | None = None, stdin: Any = subprocess.DEVNULL,
                 cpu_s: int = CPU_S) -> dict:
    """{'code', 'out', 'err', 'rss_kib', 'cpu_s'} of `argv` run to its end, its CPU time bounded by `cpu_s`
    (a child past it is ended by SIGXCPU, and this says so)."""
    done = subprocess.run([sys.executable, "-c", _MEASURED, str(cpu_s), str(HANG_GUARD_S), *argv], stdin=stdin,
                          capture_output=True, text=True, timeout=HANG_GUARD_S + 60, env=dict(env), cwd=cwd)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["code"] != -signal.SIGXCPU, f"{argv[:3]}: over its {cpu_s} CPU s: {result['err'][-2000:]}"
    return result


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
