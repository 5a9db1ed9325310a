"""`elxpk compare` and `elxpk report` on MaxText metrics files (issue 13): MaxText against MaxText and
against the bundled trainer's run directory, bitwise or with --rtol, NaN/inf as divergence, and the plain
"not checked" line for exactly-once data, which a MaxText file cannot show.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import replace

import numpy as np
import pytest

from elxpk.maxtext.metrics import read_metrics
from elxpk.runs.compare import compare_runs
from tests.support.maxtext_metrics import MaxTextRun, executed_steps, write_maxtext_metrics
from tests.support.run_writer import FakeRun, write_run

CLEAN = MaxTextRun(steps=40)
RESTORED = MaxTextRun(steps=40, restores=((27, 20),))  # an elastic retry redid steps 20..26
NOT_CHECKED_A = "examples A: NOT CHECKED: a MaxText metrics file has no example ids"


@pytest.fixture
def metrics(tmp_path):
    def make(name: str, run: MaxTextRun = CLEAN):
        return write_maxtext_metrics(tmp_path / name / "metrics.txt", run)

    return make


# ---- compare ------------------------------------------------------------------------------------------

def test_equal_maxtext_runs_match_and_say_what_is_not_checked(metrics, cli):
    code, out, err = cli("compare", metrics("a"), metrics("b", RESTORED))
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert f"steps compared: {CLEAN.steps}" in lines and "loss: bitwise equal at every step" in lines
    assert [line for line in lines if line.startswith("examples ")] == [
        NOT_CHECKED_A + ", so whether each example was consumed exactly once cannot be checked",
        NOT_CHECKED_A.replace(" A:", " B:") + ", so whether each example was consumed exactly once cannot be checked"]
    ((reached, restored),) = RESTORED.restores
    redone = reached - restored  # steps 20..26 ran twice
    assert f"note: run B wrote {redone} steps twice (redone after a restore); the last line of each step is " \
           "compared" in lines
    assert "result: match on losses only" in lines
    assert "  - not checked: exactly-once data in run A: a MaxText metrics file has no example ids" in lines


def test_json_lists_what_is_not_checked(metrics, cli_json):
    code, data = cli_json("compare", metrics("a"), metrics("b"))
    assert code == 0 and data["passed"] and data["bitwise_equal"]
    assert data["kind_a"] == data["kind_b"] == "MaxText metrics file"
    assert data["examples_a"] is None and data["examples_b"] is None
    assert data["not_checked"][:2] == [f"exactly-once data in run {n}: a MaxText metrics file has no example ids"
                                       for n in "AB"]


def test_maxtext_against_the_bundled_trainer_on_the_same_data(metrics, cli, tmp_path):
    run_dir = write_run(tmp_path / "elxpk", FakeRun(steps=CLEAN.steps, batch=CLEAN.batch))
    code, out, _ = cli("compare", metrics("a"), run_dir)
    assert code == 0, out
    assert "loss: bitwise equal at every step" in out and NOT_CHECKED_A in out
    assert f"examples B: {CLEAN.steps * CLEAN.batch} ids over {CLEAN.steps} steps, each exactly once" in out
    # The other way round, and the bundled run's own metrics.jsonl named directly.
    code, out, _ = cli("compare", run_dir / "metrics.jsonl", metrics("b"))
    assert code == 0 and "examples B: NOT CHECKED" in out and "examples A: 320 ids" in out


def test_a_directory_holding_one_metrics_file_is_read(metrics, cli_json):
    a = metrics("a")
    code, data = cli_json("compare", a.parent, metrics("b"))
    assert code == 0 and data["run_a"] == str(a) and data["common_steps"] == CLEAN.steps


def test_divergent_maxtext_run_fails_and_rtol_accepts_it(metrics, cli):
    scale = 1.0 + 2e-7
    a, b = metrics("a"), metrics("b", replace(CLEAN, loss_scale=scale))
    code, out, err = cli("compare", a, b)
    assert code == 1 and "MISMATCH" in out and err.startswith("error: runs differ: losses diverge beyond --rtol 0")
    la, lb = np.array(read_metrics(a).loss), np.array(read_metrics(b).loss)
    first = int(np.flatnonzero(la != lb)[0])
    assert f"losses diverge beyond --rtol 0 from step {first}" in out
    assert cli("compare", a, b, "--rtol", "1e-5")[0] == 0


def test_maxtext_against_maxtext_is_bitwise_in_float64(metrics, cli, tmp_path):
    """Both files hold float64 text: one ulp of float64 is a difference (float32 would hide it)."""
    a = metrics("a")
    lines = a.read_text().splitlines(keepends=True)
    record = json.loads(lines[5])
    record["learning/loss"] = math.nextafter(record["learning/loss"], math.inf)
    lines[5] = json.dumps(record) + "\n"
    b = tmp_path / "b.txt"
    b.write_text("".join(lines))
    code, out, _ = cli("compare", a, b)
    assert code == 1 and f"from step {int(record['step'])}" in out
    assert np.float32(read_metrics(a).loss[5]) == np.float32(read_metrics(b).loss[5])


@pytest.mark.parametrize("bad", [math.nan, math.inf])
@pytest.mark.parametrize("where", ["a", "b", "both"])
def test_nan_or_infinite_maxtext_loss_is_a_divergence(metrics, cli, bad, where):
    step = 17
    blown = replace(CLEAN, non_finite=((step, bad),))
    a = metrics("a", blown if where in ("a", "both") else CLEAN)
    b = metrics("b", blown if where in ("b", "both") else CLEAN)
    code, out, err = cli("compare", a, b)
    assert code == 1 and len(err.strip().splitlines()) == 1
    for name in (["A", "B"] if where == "both" else [where.upper()]):
        assert f"run {name} diverged: its loss is not finite (NaN or infinite) from step {step}" in out


def test_compare_png_with_maxtext(metrics, cli, tmp_path):
    png = tmp_path / "cmp.png"
    code, _, _ = cli("compare", metrics("a"), metrics("b"), "--png", png)
    assert code == 0 and png.read_bytes()[:4] == b"\x89PNG"


def test_unreadable_maxtext_inputs_are_one_line_usage_errors(metrics, cli, tmp_path):
    two = tmp_path / "two"
    write_maxtext_metrics(two / "x.txt", CLEAN)
    write_maxtext_metrics(two / "y.txt", CLEAN)
    cut = metrics("cut")
    cut.write_text(cut.read_text()[:-40])  # the writer stopped mid-line
    code, out, err = cli("compare", two, cut)
    lines = err.strip().splitlines()
    assert code == 2 and out == "" and len(lines) == 2
    assert lines[0] == f"error: RUN_A: {two} holds 2 MaxText metrics files (x.txt, y.txt); pass one of them"
    assert lines[1].startswith(f"error: RUN_B: {cut}: line {CLEAN.steps} is cut off")


def test_compare_runs_takes_either_kind(metrics, tmp_path):
    from elxpk.runs.rundir import load_run

    run = load_run(write_run(tmp_path / "elxpk", FakeRun(steps=10, batch=CLEAN.batch)))
    result = compare_runs(read_metrics(metrics("a")), run)
    assert result.steps == tuple(range(10)) and result.only_a == CLEAN.steps - 10
    assert result.examples_a is None and result.examples_b.exactly_once
    assert result.not_checked()[0].startswith("exactly-once data in run A")


# ---- report -------------------------------------------------------------------------------------------

def test_report_on_a_maxtext_file_gives_loss_curve_and_step_times(metrics, cli_json):
    path = metrics("run", replace(RESTORED, eval_every=10))
    code, data = cli_json("report", path)
    assert code == 0
    m = read_metrics(path)
    assert data["kind"] == "MaxText metrics file" and data["run_names"] == [RESTORED.run_name]
    assert (data["steps"], data["first_step"], data["last_step"]) == (RESTORED.steps, 0, RESTORED.steps - 1)
    ((reached, restored),) = RESTORED.restores
    assert data["redone_steps"] == len(m.repeated_steps) == reached - restored
    assert data["final_loss"] == RESTORED.loss(RESTORED.steps - 1) and data["first_loss"] == RESTORED.loss(0)
    times = [RESTORED.time(s) for s in range(RESTORED.steps)]
    assert data["step_time"]["first_s"] == RESTORED.compile_time
    assert data["step_time"]["median_s"] == statistics.median(times[1:])
    assert data["step_time"]["total_s"] == pytest.approx(sum(times))
    assert data["eval_lines"] == len([s for s in executed_steps(RESTORED) if (s + 1) % 10 == 0])
    png = path.parent / "report.png"  # next to the file by default
    assert data["png"] == str(png) and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_text_on_a_maxtext_directory(metrics, cli):
    path = metrics("run")
    before = sorted(p.name for p in path.parent.iterdir())
    code, out, _ = cli("report", path.parent, "--no-png")
    assert code == 0 and sorted(p.name for p in path.parent.iterdir()) == before
    lines = out.splitlines()
    assert lines[0] == f"MaxText metrics file {path} (run_name qwen): {CLEAN.steps} steps (steps 0..39)"
    assert lines[1].startswith(f"loss: {CLEAN.loss(0):.6g} at step 0, final {CLEAN.loss(39):.6g} at step 39")
    assert lines[2].startswith(f"step time: {sum(CLEAN.time(s) for s in range(40)):.2f} s over 40 steps; "
                               f"first step {CLEAN.compile_time:.3g} s (includes compilation)")
    assert "not available from a MaxText metrics file: exactly-once data: MaxText writes no example ids" in lines


def test_report_says_when_a_maxtext_run_diverged(metrics, cli):
    code, out, _ = cli("report", metrics("run", replace(CLEAN, non_finite=((12, math.nan),))), "--no-png")
    assert code == 0 and "diverged: the loss is not finite (NaN or infinite) from step 12" in out
