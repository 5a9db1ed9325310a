"""Process groups in tests: wait for all, and never leave one running when a test fails."""

from __future__ import annotations

import subprocess


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
