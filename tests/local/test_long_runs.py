"""`elxpk report` and `elxpk compare` on runs longer than the 80,000 records they used to refuse: the summary
is what the generator says it wrote (steps, redone steps, recoveries, checkpoints, examples), counted
while generating, not by the code under test."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.support.maxtext_metrics import MaxTextRun, write_maxtext_metrics
from tests.support.maxtext_metrics import executed_steps as maxtext_executed
from tests.support.run_writer import FakeRun, executed_steps, write_run

ELXPK = Path(sys.executable).parent / "elxpk"
OLD_CAP = 80_000
PERIOD = 100
LONG = FakeRun(steps=OLD_CAP + 9_000, batch=4, checkpoint_period=PERIOD,
               failures=((30_017, 30_000), (60_055, 60_000), (88_999, 88_900)))


def elxpk(*argv: str) -> tuple[int, str, str]:
    done = subprocess.run([str(ELXPK), *argv], capture_output=True, text=True, timeout=600)
    return done.returncode, done.stdout, done.stderr


@pytest.fixture(scope="module")
def long_run(tmp_path_factory) -> Path:
    return write_run(tmp_path_factory.mktemp("long") / "run", LONG)


@pytest.mark.slow
def test_a_run_past_the_old_cap_reports_what_was_written(long_run):
    executed = executed_steps(LONG.steps, LONG.failures)
    assert len(executed) > OLD_CAP
    times = Counter(executed)
    checkpoints = sum(1 for step in executed if (step + 1) % PERIOD == 0)
    code, out, err = elxpk("report", str(long_run), "--no-png", "-o", "json")
    assert code == 0, err
    report = json.loads(out)
    assert report["steps"] == len(times) == LONG.steps and report["last_step"] == LONG.steps - 1
    assert report["executed_steps"] == len(executed)
    assert report["rewound_steps"] == sum(n - 1 for n in times.values()) == 17 + 55 + 99
    assert len(report["recoveries"]) == len(LONG.failures)
    assert [(r["failure_step"], r["restored_step"]) for r in report["recoveries"]] == list(LONG.failures)
    assert report["checkpoints"] == {"committed": checkpoints, "skipped": 0}
    assert report["examples"]["unique"] == LONG.steps * LONG.batch and report["examples"]["duplicates"] == 0
    assert report["examples"]["gaps"] == 0 and report["examples"]["missing_count"] == 0
    assert report["productive_s"] == pytest.approx(LONG.steps * LONG.step_time)
    assert report["badput"]["rewound_steps_s"] == pytest.approx(report["rewound_steps"] * LONG.step_time)
    code, out, _ = elxpk("report", str(long_run), "--no-png")
    assert out.splitlines()[0] == (f"run {long_run}: {LONG.steps} steps done, {report['rewound_steps']} rewound, "
                                   f"1 session")


@pytest.mark.slow
def test_two_runs_past_the_old_cap_compare_step_by_step(long_run, tmp_path):
    copy = shutil.copytree(long_run, tmp_path / "copy")
    code, out, err = elxpk("compare", str(long_run), str(copy), "-o", "json")
    assert code == 0, err
    result = json.loads(out)
    redone = {s for s, n in Counter(executed_steps(LONG.steps, LONG.failures)).items() if n > 1}
    assert result["common_steps"] == result["bitwise_equal_steps"] == LONG.steps and result["bitwise_equal"]
    assert result["redone_steps_a"] == result["redone_steps_b"] == len(redone)
    # One step's loss changed in B, far past the old cap: found, and nowhere else.
    lines = (copy / "metrics.jsonl").read_text().splitlines(keepends=True)
    at = max(i for i, line in enumerate(lines) if json.loads(line)["step"] == LONG.steps - 7)
    record = json.loads(lines[at])
    record["loss"] = float.fromhex(record["loss"]).__mul__(2.0).hex()
    lines[at] = json.dumps(record) + "\n"
    (copy / "metrics.jsonl").write_text("".join(lines))
    code, out, _ = elxpk("compare", str(long_run), str(copy), "-o", "json")
    result = json.loads(out)
    assert code == 1 and result["first_divergent_step"] == LONG.steps - 7
    assert result["bitwise_equal_steps"] == LONG.steps - 1


@pytest.mark.slow
def test_a_maxtext_file_past_the_old_cap_reports_its_steps_and_redone_ones(tmp_path):
    run = MaxTextRun(steps=OLD_CAP + 5_000, restores=((50_030, 50_000),))
    path = write_maxtext_metrics(tmp_path / "metrics.txt", run)
    executed = maxtext_executed(run)
    code, out, err = elxpk("report", str(path), "--no-png", "-o", "json")
    assert code == 0, err
    report = json.loads(out)
    assert report["steps"] == len(set(executed)) == run.steps and len(executed) > OLD_CAP
    assert report["redone_steps"] == len(executed) - run.steps == 30
    assert report["final_loss"] == run.loss(run.steps - 1) and report["step_time"]["timed_steps"] == run.steps
