"""The time budgets of docs/testing.md: read from the doc, matched per test, and the tests past theirs named at
the end of a real pytest run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.budgets import Budget, budget_of, over_budget, read_budgets

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "testing.md"


def test_the_doc_gives_every_test_a_budget():
    budgets = read_budgets(DOC)
    assert len(budgets) >= 3 and budgets[-1].selector == "*", budgets
    assert all(b.seconds > 0 for b in budgets)
    assert budget_of(budgets, "tests/launcher/test_cli.py::test_x", {"parametrize"}) == budgets[-1]


def test_the_first_matching_row_is_the_budget():
    budgets = [Budget("tests/realcluster/", 180), Budget("-m slow", 120), Budget("*", 30)]
    assert budget_of(budgets, "tests/realcluster/test_soak.py::test_soak", {"slow"}).seconds == 180
    assert budget_of(budgets, "tests/local/test_hang.py::test_h", {"slow"}).seconds == 120
    assert budget_of(budgets, "tests/local/test_hang.py::test_h", set()).seconds == 30
    assert budget_of(budgets[:2], "tests/local/test_hang.py::test_h", set()) is None


def test_only_tests_past_their_budget_are_named_slowest_first():
    budgets = [Budget("-m slow", 120), Budget("*", 30)]
    durations = {"a::fast": (29.0, frozenset()), "b::over": (31.0, frozenset()),
                 "c::slow_ok": (100.0, frozenset({"slow"})), "d::slow_over": (200.0, frozenset({"slow"}))}
    lines = over_budget(budgets, durations)
    assert [line.split()[1] for line in lines] == ["d::slow_over", "b::over"]
    assert lines[0] == "200.0s d::slow_over (budget 120 s for `-m slow`)"


def test_a_missing_doc_or_section_reports_nothing(tmp_path):
    assert read_budgets(tmp_path / "none.md") == []
    (tmp_path / "other.md").write_text("# Title\n| `*` | 1 s |\n")
    assert read_budgets(tmp_path / "other.md") == []


PROBE = "tests/test_stands_alone.py::test_nothing_in_the_repository_reads_the_notes_folder_beside_it"


def _pytest_with_budget(tmp_path: Path, seconds: str) -> str:
    doc = tmp_path / f"budget-{seconds}.md"
    doc.write_text(f"## Time budgets\n\n| tests | budget |\n|---|---|\n| `*` | {seconds} s |\n\n## Next\n")
    env = {**os.environ, "ELXPK_TEST_BUDGETS": str(doc), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", PROBE],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:]
    return done.stdout


def test_a_real_run_names_the_test_past_its_budget(tmp_path):
    over = _pytest_with_budget(tmp_path, "0")
    assert "1 tests over their time budget (docs/testing.md)" in over
    assert f"{PROBE} (budget 0 s for `*`)" in over
    assert "over their time budget" not in _pytest_with_budget(tmp_path, "1000")
