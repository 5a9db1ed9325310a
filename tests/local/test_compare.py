"""`elxpk compare` on synthetic runs: bitwise equality, divergence, and the data-loader bug detector."""

from __future__ import annotations

import numpy as np
import pytest

from elxpk.runs.compare import compare_runs
from elxpk.runs.rundir import load_run
from tests.support.run_writer import FakeRun, loss_at, write_run

CLEAN = FakeRun(steps=40)
KILLED = FakeRun(steps=40, failures=((27, 20),))
BROKEN = FakeRun(steps=40, failures=((27, 20),), repeat_batch_after_restore=True)


@pytest.fixture
def runs(tmp_path):
    def make(name: str, spec: FakeRun):
        return write_run(tmp_path / name, spec)

    return make


def test_resumed_run_equals_uninterrupted_bitwise(runs, cli_json):
    code, data = cli_json("compare", runs("clean", CLEAN), runs("killed", KILLED))
    assert code == 0
    assert data["bitwise_equal"] and data["common_steps"] == CLEAN.steps
    assert data["first_divergent_step"] is None and data["max_abs_diff"] == 0.0
    assert data["examples_b"]["duplicates"] == 0 and data["examples_b"]["gaps"] == 0


def test_broken_loader_is_caught(runs, cli):
    code, out, err = cli("compare", runs("clean", CLEAN), runs("broken", BROKEN))
    assert code == 1
    restored = BROKEN.failures[0][1]
    assert f"run B consumed {BROKEN.batch} example(s) more than once" in out
    assert "MISMATCH" in out
    assert err.strip().splitlines() == [err.strip().splitlines()[0]] and err.startswith("error: runs differ")
    result = compare_runs(load_run(runs("a", CLEAN)), load_run(runs("b", BROKEN)))
    assert result.examples_b.duplicate_ranges == (((restored - 1) * BROKEN.batch, restored * BROKEN.batch),)
    assert result.first_data_mismatch_step == restored


def test_tiny_divergence_needs_rtol(runs, cli):
    scale = 1.0 + 2e-7
    other = FakeRun(steps=40, loss_scale=scale)
    a, b = runs("a", CLEAN), runs("b", other)
    code, out, _ = cli("compare", a, b)
    assert code == 1 and "diverge beyond --rtol 0 from step" in out
    result = compare_runs(load_run(a), load_run(b))
    la = np.array([loss_at(s, s * CLEAN.batch) for s in range(CLEAN.steps)], dtype=np.float32)
    lb = np.array([loss_at(s, s * CLEAN.batch, scale) for s in range(CLEAN.steps)], dtype=np.float32)
    differs = np.flatnonzero(la.view(np.uint32) != lb.view(np.uint32))
    assert result.first_divergent_step == int(differs[0])
    assert result.bitwise_equal == CLEAN.steps - differs.size
    rel = np.abs(la.astype(np.float64) - lb) / np.maximum(np.abs(la), np.abs(lb))
    assert result.max_rel_diff == pytest.approx(float(rel.max()))
    assert cli("compare", a, b, "--rtol", "1e-5")[0] == 0


def test_shorter_run_is_compared_on_its_prefix(runs, cli_json):
    code, data = cli_json("compare", runs("long", CLEAN), runs("short", FakeRun(steps=25)))
    assert code == 0 and data["common_steps"] == 25 and data["only_a"] == CLEAN.steps - 25


def test_png_overlay(runs, cli, tmp_path):
    png = tmp_path / "out" / "cmp.png"
    code, _, _ = cli("compare", runs("a", CLEAN), runs("b", BROKEN), "--png", png)
    assert code == 1 and png.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(
    ("extra", "flag"), [(["--rtol", "-1"], "--rtol"), (["--rtol", "nan"], "--rtol"), (["-o", "xml"], "-o/--output")]
)
def test_bad_flags_exit_2(runs, cli, extra, flag, tmp_path):
    png = tmp_path / "x.png"
    code, out, err = cli("compare", runs("a", CLEAN), runs("b", CLEAN), *extra, "--png", png)
    assert code == 2 and err.startswith(f"error: {flag}") and len(err.strip().splitlines()) == 1
    assert out == "" and not png.exists()


def test_missing_run_names_its_argument(runs, cli, tmp_path):
    code, _, err = cli("compare", runs("a", CLEAN), tmp_path / "absent")
    assert code == 2 and err.startswith("error: RUN_B")


def test_both_missing_runs_are_reported_at_once(cli, tmp_path):
    code, _, err = cli("compare", tmp_path / "a", tmp_path / "b", "--rtol", "-2")
    lines = err.strip().splitlines()
    assert code == 2 and [line.split(":")[1].strip() for line in lines] == ["--rtol", "RUN_A", "RUN_B"]
