"""The real-cluster tier: tests against the control plane of tools/testcluster (upstream Kubernetes, JobSet,
Kueue, kwok, fake-gcs-server).

Which cluster: ELXPK_TESTCLUSTER names the run directory of one already up (what .ci/run sets); otherwise,
when the control plane is built, one is started for this session and stopped after it. Without Go or without
the build the tier's tests are left out with one line at the end of the run, except under CI=true, where they
run and fail. KUBECONFIG from
the environment is never used: it may point at someone's real cluster.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tools.testcluster.kubeapi import LocalCluster

REPO = Path(__file__).resolve().parents[2]
TOOL = REPO / "tools" / "testcluster"


def _missing() -> str | None:
    """Why this machine cannot run the tier (None: it can, or ELXPK_TESTCLUSTER names a cluster)."""
    if os.environ.get("ELXPK_TESTCLUSTER"):
        return None
    if not _go_installed():
        return "Go is not installed (the control plane is built from upstream Go modules)"
    spec = importlib.util.spec_from_file_location("testcluster_main", TOOL / "__main__.py")
    assert spec and spec.loader
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    if not tool.is_built():
        return "it is not built: run `python tools/testcluster build` once (about 40 minutes on 2 cores)"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Without the control plane (and outside CI) the tier's tests are left out, with one line at the end."""
    reason = _missing()
    if reason is None or os.environ.get("CI") == "true":
        return
    left_out = [item for item in items if "testcluster" in getattr(item, "fixturenames", ())]
    if left_out:
        items[:] = [item for item in items if item not in left_out]
        config.hook.pytest_deselected(items=left_out)
        config.stash[_LEFT_OUT] = f"real-cluster tests: {len(left_out)} not run: {reason}"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    if _LEFT_OUT in config.stash:
        terminalreporter.write_line(f"SKIPPED {config.stash[_LEFT_OUT]}")


_LEFT_OUT = pytest.StashKey[str]()


def _unavailable(reason: str) -> None:
    message = f"real-cluster tests need the control plane of tools/testcluster: {reason}"
    if os.environ.get("CI") == "true":
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def _go_installed() -> bool:
    return bool(shutil.which("go")) or Path("/usr/local/go/bin/go").exists()


@pytest.fixture(scope="session")
def testcluster() -> Iterator[LocalCluster]:
    given = os.environ.get("ELXPK_TESTCLUSTER")
    if given:
        cluster = LocalCluster.from_run_dir(Path(given))
        if not cluster.ready():
            _unavailable(f"ELXPK_TESTCLUSTER={given} does not answer (start it with `python tools/testcluster up`)")
        yield cluster
        return
    reason = _missing()
    if reason is not None:
        _unavailable(reason)
    run_dir = Path(tempfile.mkdtemp(prefix="elxpk-testcluster-"))
    started = subprocess.run([sys.executable, str(TOOL), "up", "--dir", str(run_dir)], capture_output=True,
                             text=True, check=False)
    try:
        if started.returncode != 0:
            _unavailable(f"`testcluster up` failed: {started.stderr.strip().splitlines()[-1:]}")
        yield LocalCluster.from_run_dir(run_dir)
    finally:
        subprocess.run([sys.executable, str(TOOL), "down", "--dir", str(run_dir)], check=False)
