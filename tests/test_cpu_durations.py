"""`--cpu-durations=N` (tests/support/cpu_durations.py) in a real pytest run: a test whose child burns CPU is
ranked by that CPU, a test that only sleeps costs next to none, a session fixture's teardown is a row of its
own (not the last test's), and a bad N is one usage line."""

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

# A session fixture whose teardown reaps a child that burned a CPU second, as a server fixture's does.
TEARDOWN_PROBE = '''
import subprocess, sys
import pytest

@pytest.fixture(scope="session")
def server():
    yield
    subprocess.run([sys.executable, "-c", "import time\\nwhile time.process_time() < 1.0: pass"], check=True)

def test_first(server):
    pass

def test_last(server):
    pass
'''
ROW = re.compile(r"^\s*([\d.]+)s cpu \(([\d.]+) pytest \+ ([\d.]+) children\)\s+(\S.*)$", re.M)


def _pytest(tmp_path: Path, *flags: str, probe: str = PROBE) -> subprocess.CompletedProcess:
    (tmp_path / "test_probe.py").write_text(probe)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-p", "tests.support.cpu_durations", *flags, "test_probe.py"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


def test_tests_are_ranked_by_the_cpu_of_the_process_and_its_children(tmp_path):
    done = _pytest(tmp_path, "--cpu-durations=5")
    assert done.returncode == 0, done.stdout[-3000:]
    rows = ROW.findall(done.stdout)
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


def test_a_session_fixtures_teardown_is_its_own_row_not_the_last_tests(tmp_path):
    done = _pytest(tmp_path, "--cpu-durations=5", probe=TEARDOWN_PROBE)
    assert done.returncode == 0, done.stdout[-3000:]
    rows = {row[3]: row for row in ROW.findall(done.stdout)}
    assert set(rows) == {"<server teardown (session fixture)>", "test_probe.py::test_first",
                         "test_probe.py::test_last"}, done.stdout
    assert float(rows["<server teardown (session fixture)>"][2]) >= 0.99, done.stdout  # reaped there
    assert float(rows["test_probe.py::test_last"][0]) < 0.5, done.stdout  # during whose teardown it ran
    assert re.search(r"^2 tests, ", done.stdout, re.M), done.stdout
