"""#33, speed a person feels: `workload status` loads neither the official kubernetes client (about a second
of imports: every API class and model, its kubeconfig loader) nor google-auth on a kubeconfig cluster. A
fresh interpreter runs the `elxpk` entry point against the fake API server holding a captured workload and
lists what it imported. The time itself is a bench, side by side with `elxpk --version`:
bench/bench_status_start.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.cluster.captured import load_captured

REPO = Path(__file__).resolve().parents[2]
RUN = """
import sys
from elxpk.cli.main import main
code = main(sys.argv[1:])
heavy = sorted({m.split(".")[0] for m in sys.modules if m.split(".")[0] in ("kubernetes", "google")})
print("IMPORTED", ",".join(heavy) or "-", "EXIT", code, file=sys.stderr)
"""


def test_status_imports_no_kubernetes_nor_google(fake, kubeconfig: Path) -> None:
    load_captured(fake, "running")
    env = {**{k: v for k, v in os.environ.items() if k != "KUBECONFIG"}, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", RUN, "workload", "status", "ops", "--kubeconfig", str(kubeconfig)],
                          capture_output=True, text=True, timeout=120, env=env, check=False)
    assert "IMPORTED - EXIT 0" in done.stderr, done.stderr[-2000:]
    assert "Workload" in done.stdout and "ops" in done.stdout and "Slices healthy   2/2" in done.stdout, done.stdout
