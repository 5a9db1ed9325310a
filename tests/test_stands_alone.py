"""The repository stands alone: no code, script or CI step reads the notes folder beside a checkout."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# `../shared`, `/ "shared" /` and `parent / "shared"` (the ways a path to the notes folder is spelt).
_OUTSIDE = re.compile(r"\.\./shared\b|[/(]\s*[\"']shared[\"']\s*[/)]")


def test_nothing_in_the_repository_reads_the_notes_folder_beside_it():
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    offenders = []
    for name in tracked:
        path = ROOT / name
        if path.suffix not in (".py", ".sh", ".toml", ".cfg", ".ini", ".yaml", ".yml") and name != ".ci/run":
            continue
        if name == "tests/test_stands_alone.py" or not path.is_file():
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if _OUTSIDE.search(line):
                offenders.append(f"{name}:{number}: {line.strip()}")
    assert offenders == []
