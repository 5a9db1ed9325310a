"""`--cpu-durations=N`: the CPU seconds each test cost, the N largest printed at the end of the run.

Wall time says little on a shared 2-core machine (it is mostly the other processes' load); CPU time is what
a test takes from the others. Per test (setup, call and teardown together) this adds the pytest process's
own user+system time and that of its children (`RUSAGE_CHILDREN`: every descendant that has ended and been
waited for, grandchildren included once their parent waited for them). A child is counted where it is
reaped; threads are the process's own time. The teardown of a fixture wider than one test (module,
package, session) is a row of its own, "<NAME teardown (SCOPE fixture)>": a session fixture's server would
otherwise land on whichever test ran last (the MaxText worker's 30 s did, on a config check). The summary also gives the run's total (interpreter start and collection included), which is what a CI
lane costs.

A plugin of its own, so that a pytest run in a bare folder can load it with `-p tests.support.cpu_durations`;
tests/conftest.py loads it for the suite.
"""

from __future__ import annotations

import resource
from collections.abc import Generator

import pytest


def cpu_seconds() -> tuple[float, float]:
    """(this process, its reaped children): user + system seconds so far."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def _add(table: dict[str, tuple[float, float]], key: str, own: float, children: float) -> None:
    was_own, was_children = table.get(key, (0.0, 0.0))  # a rerun adds to the first
    table[key] = (was_own + own, was_children + children)


class CpuDurations:
    def __init__(self, top: int) -> None:
        self.top = top
        self.per_test: dict[str, tuple[float, float]] = {}  # nodeid: (own seconds, children's seconds)
        self.teardowns: dict[str, tuple[float, float]] = {}  # a wider fixture's teardown row: the same
        self._since: tuple[float, float] | None = None  # during a teardown: when the last fixture finished
        self._moved = (0.0, 0.0)  # this test's teardown seconds that went to wider fixtures' rows

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Generator[None, None, None]:
        own0, children0 = cpu_seconds()
        self._moved = (0.0, 0.0)
        yield
        own1, children1 = cpu_seconds()
        _add(self.per_test, item.nodeid, own1 - own0 - self._moved[0], children1 - children0 - self._moved[1])

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> Generator[None, None, None]:
        self._since = cpu_seconds()
        yield
        self._since = None

    def pytest_fixture_post_finalizer(self, fixturedef: pytest.FixtureDef, request: pytest.FixtureRequest) -> None:
        """Called after each fixture's teardown (pytest calls it last among the fixture's finalizers)."""
        if self._since is None:
            return
        now = cpu_seconds()
        own, children = now[0] - self._since[0], now[1] - self._since[1]
        if fixturedef.scope != "function" and own + children >= 0.01:  # not a row per tmp_path_factory
            _add(self.teardowns, f"<{fixturedef.argname} teardown ({fixturedef.scope} fixture)>", own, children)
            self._moved = (self._moved[0] + own, self._moved[1] + children)
        self._since = now

    def summary_lines(self) -> list[str]:
        own, children = cpu_seconds()  # the whole run: interpreter start, collection, every test
        ranked = sorted([*self.per_test.items(), *self.teardowns.items()], key=lambda kv: -(kv[1][0] + kv[1][1]))
        lines = [f"{len(self.per_test)} tests, {own + children:.1f} CPU s in all "
                 f"(pytest process {own:.1f} s, children {children:.1f} s)"]
        lines += [f"{a + b:8.2f}s cpu ({a:.2f} pytest + {b:.2f} children)  {nodeid}"
                  for nodeid, (a, b) in ranked[:self.top]]
        return lines

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        terminalreporter.section(f"largest {self.top} CPU durations (tests/support/cpu_durations.py)")
        for line in self.summary_lines():
            terminalreporter.write_line(line)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--cpu-durations", type=int, default=0, metavar="N",
                     help="print the N tests that used the most CPU seconds (pytest process and its children), "
                          "and the run's total")


def pytest_configure(config: pytest.Config) -> None:
    top = config.getoption("--cpu-durations")
    if top < 0:
        raise pytest.UsageError(f"--cpu-durations: {top} is negative; give the number of tests to list, e.g. 25")
    if top:
        config.pluginmanager.register(CpuDurations(top), "elxpk-cpu-durations")
