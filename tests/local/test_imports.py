"""Start-up hygiene: the CLI, report and compare never import jax (checked in a fresh interpreter)."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO_ROOT

_PROBE = """
import sys
from elxpk.cli.commands import build_app
build_app([])  # the whole command table
import elxpk.local.options, elxpk.local.progress, elxpk.local.view, elxpk.local.supervisor
import elxpk.runs.report, elxpk.runs.compare, elxpk.runs.health
heavy = sorted(m for m in ("jax", "jaxlib", "orbax", "optax", "matplotlib") if m in sys.modules)
print(",".join(heavy))
"""


def test_cli_and_readers_import_no_jax():
    out = subprocess.run([sys.executable, "-c", _PROBE], cwd=REPO_ROOT, capture_output=True, text=True,
                         timeout=120, check=True).stdout.strip()
    assert out == ""
