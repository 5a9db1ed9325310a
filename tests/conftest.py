"""Process-wide test environment. Set before anything imports jax or google.auth.

- 4 virtual CPU devices = 2 simulated slices x 2 devices (the trainer's test topology).
- Short collective timeouts, so a CPU collective stall aborts in seconds, not minutes.
- NO_GCE_CHECK: google.auth must never probe the metadata server from a test.
- One XLA compilation cache for the run and its subprocesses (tests/support/xla_cache.py).
- SIGINT handled, so every process a test starts can be stopped with Ctrl-C as from a terminal.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

os.environ.setdefault(
    "XLA_FLAGS",
    "--xla_force_host_platform_device_count=4"
    " --xla_cpu_collective_call_warn_stuck_timeout_seconds=10"
    " --xla_cpu_collective_call_terminate_timeout_seconds=30",
)
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ["NO_GCE_CHECK"] = "true"
os.environ.setdefault("GCE_METADATA_HOST", "127.0.0.1:9")  # belt and braces: a closed loopback port
os.environ.pop("KUBECONFIG", None)
# .ci/run's lanes are started with `&` by a non-interactive shell, which ignores SIGINT, and an ignored
# signal stays ignored in every process started below it: the tests that press Ctrl-C on `--watch` sent it
# into nothing. A handled signal is reset to the default at exec, so each child gets Ctrl-C back.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

from tests.support.xla_cache import xla_cache_env  # noqa: E402

for _name, _value in xla_cache_env().items():  # one XLA compilation cache for every jax process of the run
    if _name == "PYTHONPATH":  # the cache's site folder goes first, before what the caller set
        os.environ[_name] = _value
    else:
        os.environ.setdefault(_name, _value)

import pytest  # noqa: E402

# Before jax: the pytest process's own jax gets the cache's cheap writes too (children get it from PYTHONPATH).
import tests.support.xla_site.sitecustomize  # noqa: E402,F401
from tests.support.budgets import over_budget, read_budgets  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]

pytest_plugins = ["tests.support.cpu_durations"]  # --cpu-durations=N (docs/testing.md, "How CI runs")


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def crd_dir() -> Path:
    """The CRDs vendored in the package (elxpk/crds/), as `elxpk workload validate` reads them."""
    from elxpk.admission.schema import crds_dir

    return crds_dir()


@pytest.fixture(autouse=True)
def _the_sessions_xla_cache_stays() -> Iterator[None]:
    """A trainer run inside this process (trainer.__main__.main with an environ that names no cache, or
    `--compilation-cache-dir`) points jax's cache where its settings say, for the rest of the process: behind
    tests/trainer/test_exit_codes.py, which runs one so, every later in-process test of the trainer lane
    compiled again (test_resize.py's two 3.6 CPU s cases took 12 each). Put back after each test."""
    yield
    jax = sys.modules.get("jax")
    wanted = os.environ.get("JAX_COMPILATION_CACHE_DIR")
    enabled = os.environ.get("JAX_ENABLE_COMPILATION_CACHE", "true").lower() not in ("0", "false")
    if jax is None or not wanted:
        return
    if jax.config.jax_compilation_cache_dir != wanted:
        jax.config.update("jax_compilation_cache_dir", wanted)
    if jax.config.jax_enable_compilation_cache != enabled:
        jax.config.update("jax_enable_compilation_cache", enabled)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-goldens",
        action="store_true",
        default=False,
        help="rewrite golden files (manifests, reports) from the current code instead of comparing",
    )


@pytest.fixture(scope="session")
def update_goldens(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-goldens"))


class _BudgetWatch:
    """Adds up each test's setup, call and teardown; at the end names those past their budget in
    docs/testing.md (`## Time budgets`; ELXPK_TEST_BUDGETS names another file, for this hook's own test).
    Reported, never failed."""

    def __init__(self) -> None:
        self.durations: dict[str, tuple[float, frozenset[str]]] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        seconds, markers = self.durations.get(report.nodeid, (0.0, frozenset(report.keywords)))
        self.durations[report.nodeid] = (seconds + report.duration, markers)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        doc = Path(os.environ.get("ELXPK_TEST_BUDGETS", REPO_ROOT / "docs" / "testing.md"))
        lines = over_budget(read_budgets(doc), self.durations)
        if lines:
            terminalreporter.section(f"{len(lines)} tests over their time budget (docs/testing.md)")
            for line in lines:
                terminalreporter.write_line(line)


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(_BudgetWatch(), "elxpk-budget-watch")
