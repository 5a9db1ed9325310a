"""`workload validate` applies the Job API's defaults before the Job rules, as the API server does when the
JobSet controller creates each Job (pkg/apis/batch/v1/defaults.go SetDefaults_Job): an Indexed Job with
neither completions nor parallelism gets both as 1 and is admitted; parallelism alone leaves completions
unset, which an Indexed Job refuses. The real control plane's verdict on both files is
tests/realcluster/test_admission_verdicts.py's (ok-job-defaults-completions, bad-indexed-without-completions)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from elxpk.admission.jobs import job_spec_problems

CORPUS = Path(__file__).parents[1] / "realcluster" / "corpus"
ELXPK = str(Path(sys.executable).with_name("elxpk"))


POD = {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}}


def _completions_problems(**spec: object) -> list[tuple[str, str]]:
    return [(v.path, v.message) for v in job_spec_problems({**POD, "completionMode": "Indexed", **spec}, "spec")
            if "completions" in v.path]


def test_neither_completions_nor_parallelism_is_one_of_each():
    assert _completions_problems() == []
    assert _completions_problems(parallelism=4) == [
        ("spec.completions", "Required value: when completion mode is Indexed")]
    assert _completions_problems(completions=3) == []


def test_validate_admits_the_defaulted_job_and_refuses_the_half_given_one():
    ok = subprocess.run([ELXPK, "workload", "validate", str(CORPUS / "ok-job-defaults-completions.yaml")],
                        capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    bad = subprocess.run([ELXPK, "workload", "validate", str(CORPUS / "bad-indexed-without-completions.yaml")],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1 and "completions: Required value: when completion mode is Indexed" in bad.stdout
