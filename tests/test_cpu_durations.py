"""`--cpu-durations=N` (tests/support/cpu_durations.py) in a real pytest run: a test whose child burns CPU is
ranked by that CPU, a test that only sleeps costs next to none, and a bad N is one usage line."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# The child spins until its own CPU clock says 1 s: at least 1 CPU second however loaded the machine is.
PROBE = '''
import subprocess, sys, time

def test_a_child_burns_a_cpu_second():
    subprocess.run([sys.executable, "-c", "import time\\nwhile time.process_time() < 1.0: pass"], check=True)

def test_a_sleep_costs_no_cpu():
    time.sleep(1.0)
'''


def _pytest(tmp_path: Path, *flags: str) -> subprocess.CompletedProcess:
    (tmp_path / "test_probe.py").write_text(PROBE)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-p", "tests.support.cpu_durations", *flags, "test_probe.py"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


def test_tests_are_ranked_by_the_cpu_of_the_process_and_its_children(tmp_path):
    done = _pytest(tmp_path, "--cpu-durations=5")
    assert done.returncode == 0, done.stdout[-3000:]
    rows = re.findall(r"^\s*([\d.]+)s cpu \(([\d.]+) pytest \+ ([\d.]+) children\)\s+(\S+)$", done.stdout, re.M)
    assert [row[3] for row in rows] == ["test_probe.py::test_a_child_burns_a_cpu_second",
                                        "test_probe.py::test_a_sleep_costs_no_cpu"], done.stdout
    burn, sleep = rows
    assert float(burn[2]) >= 0.99  # the child's second, counted once it was reaped
    assert float(sleep[0]) < 0.5  # a second of sleep is wall time, not CPU
    total = re.search(r"^2 tests, ([\d.]+) CPU s in all \(pytest process ([\d.]+) s, children ([\d.]+) s\)$",
                      done.stdout, re.M)
    assert total and float(total[3]) >= 0.99 and float(total[1]) + float(total[3]) >= float(burn[0]) + float(sleep[0]), done.stdout


def test_without_the_option_nothing_is_printed_and_a_negative_count_is_a_usage_error(tmp_path):
    plain = _pytest(tmp_path)
    assert plain.returncode == 0 and "CPU durations" not in plain.stdout
    bad = _pytest(tmp_path, "--cpu-durations=-1")
    assert bad.returncode == 4  # pytest's usage error
    assert "--cpu-durations: -1 is negative" in bad.stderr and "Traceback" not in bad.stderr
