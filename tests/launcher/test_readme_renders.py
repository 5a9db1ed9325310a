"""The README's "On GKE" renders run exactly as written (their `--dry-run` commands, in elxpk's, xpk's and
gcluster's spellings, and `elxpk translate`), as a new user pastes them, and what they print passes `workload
validate`: the cluster's rules and what the bundled trainer would refuse when it starts on those slices.
Their `--check-fit` runs in the compile-only tier (tests/trainer/test_compile_only.py)."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

from tests.support.readme_commands import ROOT, gke_commands


def _run(argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([str(Path(sys.executable).with_name("elxpk")), *argv[1:]], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)


def test_the_readme_renders_run_as_written(tmp_path):
    commands = gke_commands()
    assert len(commands) >= 5, "the README's On GKE section lost its --dry-run examples"
    spellings = {tuple(argv[:3]) for argv in commands}
    assert {("elxpk", "workload", "create"), ("elxpk", "job", "submit"), ("elxpk", "translate", "--")} <= spellings
    assert any("--pathways-elastic-slices=1" in argv for argv in commands)  # gcluster's, from MaxText's guide
    for argv in commands:
        done = _run(argv)
        if argv[1] == "translate":  # its line renders too, as printed
            assert done.returncode == 0, (argv, done.stderr)
            done = _run([*shlex.split(done.stdout), "--dry-run"])
        assert done.returncode == 0 and "kind: JobSet" in done.stdout, (argv, done.stderr)
        # What it printed passes validate too: the cluster's rules and what its trainer refuses at its start.
        rendered = tmp_path / "jobset.yaml"
        rendered.write_text(done.stdout, encoding="utf-8")
        checked = _run(["elxpk", "workload", "validate", str(rendered)])
        assert checked.returncode == 0, (argv, checked.stdout, checked.stderr)
