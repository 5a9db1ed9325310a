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
    assert f"run B consumed {BROKEN.batch} examples more than once" in out
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
    code, _, err = cli("compare", runs("a", CLEAN), runs("b", BROKEN), "--png", png)
    assert code == 2 and "directory" in err and "does not exist" in err and not png.parent.exists()
    png.parent.mkdir()
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
    assert code == 2 and [line.split()[1].rstrip(":") for line in lines] == ["--rtol", "RUN_A", "RUN_B"]


def _rewrite_metric(run_dir, at_step: int, **fields) -> None:
    """Change one metrics record in place (the last one of `at_step`)."""
    import json

    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    index = max(i for i, line in enumerate(lines) if json.loads(line)["step"] == at_step)
    lines[index] = json.dumps({**json.loads(lines[index]), **fields})
    (run_dir / "metrics.jsonl").write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("bad", ["nan", "inf", "-inf"])
@pytest.mark.parametrize("where", ["a", "b", "both"])
def test_non_finite_loss_is_a_divergence(runs, cli, bad, where):
    step = 17
    a, b = runs("a", CLEAN), runs("b", CLEAN)
    for name, path in (("a", a), ("b", b)):
        if where in (name, "both"):
            _rewrite_metric(path, step, loss=float(bad).hex())
    code, out, err = cli("compare", a, b)
    assert code == 1
    runs_named = ["A", "B"] if where == "both" else [where.upper()]
    for name in runs_named:
        assert f"run {name} diverged: its loss is not finite (NaN or infinite) from step {step}" in out
    assert err.startswith("error: runs differ") and len(err.strip().splitlines()) == 1


def test_a_loss_beyond_float32_is_infinite(runs, cli):
    a, b = runs("a", CLEAN), runs("b", CLEAN)
    _rewrite_metric(b, 3, loss=(1e300).hex())
    code, out, err = cli("compare", a, b)
    assert code == 1 and "run B diverged: its loss is not finite (NaN or infinite) from step 3" in out
    assert "Warning" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("fields", "says"),
    [({"loss": "abc"}, "loss 'abc': not a float.hex() value"), ({"loss": 1.5}, "loss: expected a string"),
     ({"step": "7"}, "step: expected a whole number"), ({"examples": [0]}, "examples: expected 2 values"),
     ({"step": 10**30}, "out of range"), ({"step": -4}, "steps count from 0"),
     ({"step_time_s": float("nan")}, "step_time_s: expected a finite number")],
)
def test_unparseable_values_are_one_line_usage_errors(runs, cli, fields, says):
    a, b = runs("a", CLEAN), runs("b", CLEAN)
    _rewrite_metric(b, 5, **fields)
    code, out, err = cli("compare", a, b)
    lines = err.strip().splitlines()
    assert code == 2 and out == "" and len(lines) == 1, err
    assert lines[0].startswith(f"error: RUN_B: {b / 'metrics.jsonl'} line 6: ") and says in lines[0]


def test_binary_and_damaged_files_are_one_line_usage_errors(runs, cli):
    a = runs("a", CLEAN)
    binary = runs("binary", CLEAN)
    (binary / "metrics.jsonl").write_bytes(b"\x7fELF\x00\x01garbage" * 10)
    code, _, err = cli("compare", a, binary)
    assert code == 2 and err.strip() == f"error: RUN_B: {binary / 'metrics.jsonl'} is binary, not JSON lines (a NUL " \
                                         "byte at offset 4)"
    latin = runs("latin", CLEAN)
    (latin / "events.jsonl").write_bytes(b'{"event": "caf\xe9"}\n')
    code, _, err = cli("compare", a, latin)
    assert code == 2 and "is not UTF-8 text" in err and len(err.strip().splitlines()) == 1
    middle = runs("middle", CLEAN)
    lines = (middle / "metrics.jsonl").read_text().splitlines()
    lines[3] = lines[3][:20]  # a line cut short in the middle of the file: not a killed writer's tail
    (middle / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    code, _, err = cli("compare", a, middle)
    assert code == 2 and f"{middle / 'metrics.jsonl'} line 4 is not JSON" in err
    truncated = runs("truncated", CLEAN)
    (truncated / "run.json").write_text('{"config": {"num_sl')
    code, _, err = cli("compare", a, truncated)
    assert code == 2 and err.strip() == (f"error: RUN_B: {truncated / 'run.json'} is damaged: not valid JSON "
                                         "(truncated?)")


def test_a_torn_last_line_is_a_killed_writer_not_an_error(runs, cli_json):
    a = runs("a", CLEAN)
    b = write_run(runs("b", CLEAN).parent / "torn", CLEAN, torn_tail=True)
    code, data = cli_json("compare", a, b)
    assert code == 0 and data["common_steps"] == CLEAN.steps


def test_an_absurd_step_number_costs_nothing(runs, cli_json):
    # One record claims step 10**11: no array or range may be sized by the step number. A dense one would
    # need 10**11 entries; this returns at once with the true counts.
    import tracemalloc

    far = 10**11
    a, b = runs("a", CLEAN), runs("b", CLEAN)
    _rewrite_metric(b, CLEAN.steps - 1, step=far)
    tracemalloc.start()
    code, data = cli_json("compare", a, b)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert code == 0 and data["only_b"] == 1 and data["only_a"] == 1
    assert data["examples_b"]["missing_count"] == far - (CLEAN.steps - 1)
    assert peak < 50 * 2**20


def _with_fields(run_dir, **fields):
    import json

    info = json.loads((run_dir / "run.json").read_text())
    info["fingerprint_fields"] = {"dataset": "synthetic-v1", "global_batch": 8, "seed": 0, **fields}
    (run_dir / "run.json").write_text(json.dumps(info))
    return run_dir


def test_compare_names_the_settings_that_differ(runs, cli, cli_json):
    a = _with_fields(runs("a", CLEAN))
    b = _with_fields(runs("b", BROKEN), seed=5, dataset="file:x.npy")
    code, out, err = cli("compare", a, b)
    assert code == 1
    assert ("settings that differ (they decide the losses): --data 'synthetic-v1' in A, 'file:x.npy' in B, "
            "--seed 0 in A, 5 in B") in out
    assert err.strip().endswith("; their settings differ: --data, --seed"), err
    code, data = cli_json("compare", a, b)
    assert data["settings_differ"] == {"--data": ["synthetic-v1", "file:x.npy"], "--seed": [0, 5]}
    code, data = cli_json("compare", a, _with_fields(runs("c", CLEAN)))  # the same settings: nothing named
    assert code == 0 and data["settings_differ"] == {}
