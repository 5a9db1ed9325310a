"""The real-cluster tier: tests against the control plane of tools/testcluster (upstream Kubernetes, JobSet,
Kueue, kwok, fake-gcs-server).

Which cluster: ELXPK_TESTCLUSTER names the run directory of one already up (what .ci/run sets); otherwise,
when the control plane is built, one is started for this session and stopped after it. Without Go or without
the build the tier is skipped with one line, except under CI=true, where that is a failure. KUBECONFIG from
the environment is never used: it may point at someone's real cluster.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.realcluster.kubeapi import TestCluster

REPO = Path(__file__).resolve().parents[2]
TOOL = REPO / "tools" / "testcluster"


def _unavailable(reason: str) -> None:
    message = f"real-cluster tests need the control plane of tools/testcluster: {reason}"
    if os.environ.get("CI") == "true":
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def _go_installed() -> bool:
    return bool(shutil.which("go")) or Path("/usr/local/go/bin/go").exists()


@pytest.fixture(scope="session")
def testcluster() -> Iterator[TestCluster]:
    given = os.environ.get("ELXPK_TESTCLUSTER")
    if given:
        cluster = TestCluster.from_run_dir(Path(given))
        if not cluster.ready():
            _unavailable(f"ELXPK_TESTCLUSTER={given} does not answer (start it with `python tools/testcluster up`)")
        yield cluster
        return
    if not _go_installed():
        _unavailable("Go is not installed (the control plane is built from upstream Go modules)")
    if subprocess.run([sys.executable, str(TOOL), "built"], check=False).returncode != 0:
        _unavailable("it is not built: run `python tools/testcluster build` once (about 40 minutes on 2 cores)")
    run_dir = Path(tempfile.mkdtemp(prefix="elxpk-testcluster-"))
    started = subprocess.run([sys.executable, str(TOOL), "up", "--dir", str(run_dir)], capture_output=True,
                             text=True, check=False)
    try:
        if started.returncode != 0:
            _unavailable(f"`testcluster up` failed: {started.stderr.strip().splitlines()[-1:]}")
        yield TestCluster.from_run_dir(run_dir)
    finally:
        subprocess.run([sys.executable, str(TOOL), "down", "--dir", str(run_dir)], check=False)
