"""`elxpk workload validate` against the real API server and JobSet webhook: for every golden and every
manifest of corpus/ (one admission rule broken, or one boundary kept, per file) the two verdicts agree.

Where they disagree, upstream is right and elxpk/admission/ is what gets fixed. The corpus files say in their
first line what they break; those named ok-* are boundaries the cluster admits."""

from __future__ import annotations

import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
import yaml

from tools.testcluster.kubeapi import LocalCluster, server_verdict

HERE = Path(__file__).parent
GOLDENS = sorted((HERE.parent / "launcher" / "goldens").glob("*.yaml"))
CORPUS = sorted((HERE / "corpus").glob("*.yaml"))
ELXPK = Path(sys.executable).parent / "elxpk"
# elxpk's own cross-field checks and the trainer's start-up refusals, not the cluster's: left out here.
OWN = (": timeouts and budgets: ", ": the trainer refuses at its start: ")


@pytest.fixture(scope="module")
def validate_lines() -> dict[str, list[str]]:
    """One `elxpk workload validate` run over every file: its admission lines, by file."""
    files = [str(p) for p in GOLDENS + CORPUS]
    done = subprocess.run([str(ELXPK), "workload", "validate", *files], capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode in (0, 1), done.stderr
    lines: dict[str, list[str]] = defaultdict(list)
    for line in done.stdout.splitlines():
        path = next((f for f in files if line.startswith(f + ":")), None)
        if path is not None and not any(label in line for label in OWN):
            lines[path].append(line)
    return lines


def test_the_corpus_is_big_enough() -> None:
    assert len([p for p in CORPUS if not p.name.startswith("ok-")]) >= 30


@pytest.mark.parametrize("path", GOLDENS + CORPUS, ids=lambda p: p.stem)
def test_validate_agrees_with_the_cluster(path: Path, testcluster: LocalCluster,
                                          validate_lines: dict[str, list[str]]) -> None:
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    assert len(docs) == 1
    server = server_verdict(testcluster, docs[0])
    ours = validate_lines.get(str(path), [])
    if path.name.startswith("bad-"):
        assert server, f"{path.name}: the cluster admits it; the corpus says it breaks: {path.read_text()[:120]}"
    else:
        assert not server, f"{path.name}: the cluster refuses it: {server}"
    assert bool(ours) == bool(server), (f"{path.name}: elxpk {'refuses' if ours else 'admits'} it, the cluster "
                                        f"{'refuses' if server else 'admits'} it\n elxpk: {ours}\n cluster: {server}")
