"""`workload validate -o json`: one JSON object on stdout (the verdict, the counts, every violation line),
the exit code as in text (0 all pass, 1 a violation, 2 bad input)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ELXPK = str(Path(sys.executable).with_name("elxpk"))
CORPUS = Path(__file__).parents[1] / "realcluster" / "corpus"
GOLDEN = Path(__file__).parent / "goldens" / "pathways-v5p-8.yaml"


def _validate(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([ELXPK, "workload", "validate", *argv], capture_output=True, text=True, timeout=120)


def test_a_passing_manifest_is_ok_true():
    done = _validate(str(GOLDEN), "-o", "json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["ok"] is True and result["violations"] == [] and result["documents"] == result["checked"] == 1


def test_violations_are_listed_and_exit_1():
    bad = CORPUS / "bad-indexed-without-completions.yaml"
    done = _validate(str(bad), str(GOLDEN), "--output=JSON")
    assert done.returncode == 1
    result = json.loads(done.stdout)
    assert result["ok"] is False and result["documents"] == 2
    assert result["violations"] == [f"{bad}: spec.replicatedJobs[0].template.spec.completions: Required value: "
                                    "when completion mode is Indexed"]
    text = _validate(str(bad), str(GOLDEN))
    assert text.stdout.splitlines() == result["violations"]  # the same lines as the text output


def test_an_unknown_format_is_refused_before_reading():
    done = _validate(str(GOLDEN), "-o", "xml")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip() == "error: -o/--output 'xml': use text or json"
