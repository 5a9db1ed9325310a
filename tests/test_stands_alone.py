"""The repository stands alone: no code, script or CI step reads the notes folder beside a checkout, and a
checkout imports, renders and validates with its own code and files only.

`.ci/run` runs this file again from a fresh clone in an empty folder (its stand-alone clone check), where the
canary below proves the clone's own packages, templates and CRDs are the ones used."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.launcher.cases import CASES

ROOT = Path(__file__).resolve().parents[1]
# `../shared`, `/ "shared" /` and `parent / "shared"` (the ways a path to the notes folder is spelt).
_OUTSIDE = re.compile(r"\.\./shared\b|[/(]\s*[\"']shared[\"']\s*[/)]")


def test_nothing_in_the_repository_reads_the_notes_folder_beside_it():
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    offenders = []
    for name in tracked:
        path = ROOT / name
        if path.suffix not in (".py", ".sh", ".toml", ".cfg", ".ini", ".yaml", ".yml") and name not in (".ci/run", "tools/test"):
            continue
        if name == "tests/test_stands_alone.py" or not path.is_file():
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if _OUTSIDE.search(line):
                offenders.append(f"{name}:{number}: {line.strip()}")
    assert offenders == []


WHERE = """
import elxpk, elxpk_contract, elxpk_storage, trainer
from elxpk.admission.schema import crds_dir
from elxpk.create.template_build import templates_dir
for path in (elxpk.__file__, elxpk_contract.__file__, elxpk_storage.__file__, trainer.__file__, templates_dir(),
             crds_dir()):
    print(path)
"""
ELXPK = "import sys; from elxpk.cli.main import main; sys.exit(main())"


def test_a_checkout_imports_renders_and_validates_with_its_own_files(tmp_path):
    """From an empty folder, with only this checkout on PYTHONPATH: every package, the templates and the CRDs
    come from the checkout, the golden renders byte for byte, and `workload validate` accepts it."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ELXPK_DEBUG")}
    env["PYTHONPATH"] = str(ROOT)

    def run(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", *argv], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=120)

    where = run(WHERE)
    assert where.returncode == 0, where.stderr
    outside = [p for p in where.stdout.splitlines() if not Path(p).resolve().is_relative_to(ROOT.resolve())]
    assert outside == [] and len(where.stdout.splitlines()) == 6, where.stdout
    rendered = run(ELXPK, "workload", "create", *CASES["pathways-v5p-8"], "--dry-run")
    assert rendered.returncode == 0, rendered.stderr
    golden = ROOT / "tests" / "launcher" / "goldens" / "pathways-v5p-8.yaml"
    assert rendered.stdout == golden.read_text(encoding="utf-8")
    (tmp_path / "m.yaml").write_text(rendered.stdout, encoding="utf-8")
    validated = run(ELXPK, "workload", "validate", str(tmp_path / "m.yaml"))
    assert validated.returncode == 0, validated.stdout + validated.stderr
