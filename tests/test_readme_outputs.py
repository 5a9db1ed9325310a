"""The files and run directories the README's command blocks write into the checkout are git-ignored (#43): a
reader who runs them is not left with a dirty tree to commit by mistake. Read from the README itself."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# `> FILE` (a redirect into the checkout) and `--run-dir DIR` (the default run dir is elxpk-run)
_WRITES = re.compile(r"(?:^|\s)>\s*([A-Za-z0-9_.-]+)(?=\s|$)|--run-dir[ =](?:\$PWD/)?([A-Za-z0-9_.-]+)")


def readme_outputs() -> set[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    found = {a or b for block in blocks for a, b in _WRITES.findall(block)}
    if re.search(r"elxpk local run(?![^\n]*--run-dir)", "\n".join(blocks)):
        found.add("elxpk-run")
    return found


def test_every_file_the_readme_writes_is_ignored():
    outputs = readme_outputs()
    assert {"jobset.yaml", "ref", "elxpk-run"} <= outputs, outputs
    for name in sorted(outputs):
        inside = f"{name}/x" if "." not in name else name  # a run dir: what it holds
        done = subprocess.run(["git", "check-ignore", "-q", inside], cwd=ROOT, check=False)
        assert done.returncode == 0, f"{name}: written by a README block, not in .gitignore"
