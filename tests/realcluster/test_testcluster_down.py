"""`tools/testcluster down` returns once the cluster's processes have ended, those that outlive the process
`up` started included (a pod's processes, once virtual-kubelet itself has been killed). No Go needed: a
stand-in takes the place of one of `up`'s binaries."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

TOOL = Path(__file__).resolve().parents[2] / "tools" / "testcluster"


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_down_returns_once_what_outlived_the_started_process_has_ended(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    # As `up` starts a binary: a session of its own, the run dir on its command line (what `down` checks
    # before it signals a recorded pid). Its child is not in the SIGTERM's way: when the shell dies of it,
    # the child lives on in the session, as a pod's processes would when virtual-kubelet is SIGKILLed.
    leader = subprocess.Popen(["sh", "-c", "sleep 300 & wait", str(run_dir)], start_new_session=True)
    children = Path(f"/proc/{leader.pid}/task/{leader.pid}/children")
    deadline = time.monotonic() + 30
    while not children.read_text().split():
        assert time.monotonic() < deadline, "the stand-in's child did not start"
        time.sleep(0.05)
    [child] = [int(pid) for pid in children.read_text().split()]
    (run_dir / "pids.json").write_text(json.dumps({"stand-in": leader.pid}))
    try:
        down = subprocess.run([sys.executable, str(TOOL), "down", "--dir", str(run_dir)], capture_output=True,
                              text=True, timeout=60, check=False)
        assert down.returncode == 0, down.stderr
        assert not alive(child), "down returned while a process of the cluster's session still ran"
        assert leader.wait(timeout=5) == -15  # the shell itself ended on down's SIGTERM
        assert not run_dir.exists()
    finally:
        for pid in (child, leader.pid):
            if alive(pid):
                subprocess.run(["kill", "-9", str(pid)], check=False)
        leader.wait(timeout=5)
