"""The README's "On GKE" commands as a new user pastes them: its `--dry-run` renders (elxpk's, xpk's and
gcluster's spellings) and `elxpk translate` lines, each split as the shell splits it."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def gke_commands() -> list[list[str]]:
    text = ROOT.joinpath("README.md").read_text(encoding="utf-8")
    section = text.split("## On GKE", 1)[1].split("\n## ", 1)[0]
    joined = re.sub(r"\\\n\s*", "", section)  # shell line continuations
    commands = []
    for line in joined.splitlines():
        line = line.split(" > ", 1)[0].strip()
        if line.startswith(("elxpk workload create", "elxpk job submit")) and "--dry-run" in line or \
                line.startswith("elxpk translate -- "):
            commands.append(shlex.split(line, comments=True))
    return commands
