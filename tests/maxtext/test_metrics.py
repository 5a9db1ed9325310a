"""Reading MaxText metrics files, written here the way MaxText 0.2.5's metric_logger writes them."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from elxpk.maxtext.metrics import MetricsFileError, looks_like_maxtext_metrics, parse_metrics, read_metrics


def maxtext_line(step: int, loss: float, run_name: str = "qwen", step_time: float | None = 0.5) -> str:
    """One line as metric_logger.write_metrics_locally writes it (_prepare_metrics_for_json)."""
    scalars = {"learning/loss": loss, "learning/current_learning_rate": 1e-4, "learning/grad_norm": 1.25}
    if step_time is not None:
        scalars["perf/step_time_seconds"] = step_time
    record = {k: float(v) for k, v in scalars.items()}
    record["step"] = float(step)
    record["run_name"] = run_name
    return json.dumps(record) + "\n"


def eval_line(step: int) -> str:
    return json.dumps({"eval/avg_loss": 2.5, "eval/step_time_seconds": 0.1, "step": float(step),
                       "run_name": "qwen"}) + "\n"


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(lines), encoding="utf-8")
    return path


def losses(n: int, start: float = 10.0) -> list[float]:
    return [start / (1 + s) for s in range(n)]


def test_equal_runs_read_to_equal_curves(tmp_path):
    lines = [maxtext_line(s, v, step_time=0.5 + s / 100) for s, v in enumerate(losses(6))]
    a = read_metrics(write(tmp_path / "a.jsonl", lines))
    b = read_metrics(write(tmp_path / "b.jsonl", lines))
    assert a.steps == b.steps == (0, 1, 2, 3, 4, 5)
    assert a.loss == b.loss == tuple(losses(6))
    assert a.step_time_s == (0.5, 0.51, 0.52, 0.53, 0.54, 0.55)
    assert a.run_names == ("qwen",) and a.repeated_steps == () and a.eval_lines == 0
    assert a.non_finite_steps == () and a.has_example_ids is False
    assert a.loss_by_step()[3] == losses(6)[3]


def test_nan_and_infinity_are_values_not_errors(tmp_path):
    lines = [maxtext_line(0, 3.0), maxtext_line(1, float("nan")), maxtext_line(2, float("inf")),
             maxtext_line(3, float("-inf"))]
    assert "NaN" in lines[1] and "Infinity" in lines[2]  # what json.dumps writes, as MaxText does
    m = read_metrics(write(tmp_path / "m.jsonl", lines))
    assert m.steps == (0, 1, 2, 3)
    assert math.isnan(m.loss[1]) and m.loss[2] == math.inf and m.loss[3] == -math.inf
    assert m.non_finite_steps == (1, 2, 3)


def test_steps_redone_after_a_restore_keep_the_last_value(tmp_path):
    # Steps 0..5, slice lost, restored from the checkpoint at step 3: MaxText appends steps 4.. again.
    first = [maxtext_line(s, v) for s, v in enumerate(losses(6))]
    redone = [maxtext_line(4, 0.123), maxtext_line(5, 0.456), maxtext_line(6, 0.789)]
    m = read_metrics(write(tmp_path / "m.jsonl", first + redone))
    assert m.steps == (0, 1, 2, 3, 4, 5, 6)
    assert m.loss[4:] == (0.123, 0.456, 0.789)
    assert m.repeated_steps == (4, 5)


def test_eval_lines_are_counted_not_curved_and_missing_step_times_are_none(tmp_path):
    lines = [maxtext_line(0, 2.0, step_time=None), eval_line(0), maxtext_line(1, 1.5), eval_line(1)]
    m = read_metrics(write(tmp_path / "m.jsonl", lines))
    assert m.steps == (0, 1) and m.eval_lines == 2
    assert m.step_time_s == (None, 0.5) and m.step_times == (0.5,)


def test_truncated_last_line_is_a_one_line_error(tmp_path):
    lines = [maxtext_line(0, 2.0), maxtext_line(1, 1.5)[:25]]
    with pytest.raises(MetricsFileError) as exc:
        read_metrics(write(tmp_path / "m.jsonl", lines))
    assert str(exc.value).startswith(f"{tmp_path / 'm.jsonl'}: line 2 is cut off (the writer stopped mid-line): ")
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize(("content", "message"), [
    (maxtext_line(0, 2.0) + "not json\n" + maxtext_line(1, 1.0), "line 2 is not JSON: 'not json'"),
    ("[1, 2]\n", "line 1 is not a JSON object"),
    ('{"learning/loss": 1.0, "run_name": "x"}\n', "line 1 has no whole-number 'step'"),
    ('{"learning/loss": 1.0, "step": 1.5}\n', "line 1 has no whole-number 'step'"),
    ('{"learning/loss": "low", "step": 1}\n', "line 1: 'learning/loss' is not a number: 'low'"),
    ("", "no train step (no line has 'learning/loss'); is it a MaxText metrics_file?"),
    (eval_line(0), "no train step"),
    ("[" * 100000 + "\n", "line 1 is nested too deeply"),
])
def test_damaged_files_are_one_line_errors(tmp_path, content, message):
    path = tmp_path / "m.jsonl"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(MetricsFileError) as exc:
        read_metrics(path)
    assert str(exc.value).startswith(f"{path}: ") and message in str(exc.value)
    assert "\n" not in str(exc.value)


def test_unreadable_files(tmp_path):
    cases = {tmp_path / "missing.jsonl": "no such file", tmp_path: "is a directory, not a MaxText metrics_file"}
    binary = tmp_path / "bin"
    binary.write_bytes(b'{"a": 1}\n\x00\x01')
    cases[binary] = "is binary, not JSON lines (a NUL byte at offset 9)"
    latin = tmp_path / "latin"
    data = b'{"learning/loss": 1.0, "step": 0, "run_name": "\xe9"}\n'
    latin.write_bytes(data)
    at = data.index(b"\xe9")
    cases[latin] = f"is not UTF-8 text (byte {at})"
    for path, message in cases.items():
        with pytest.raises(MetricsFileError, match="^" + str(path) + ": ") as exc:
            read_metrics(path)
        assert str(exc.value).endswith(message)


def test_parse_metrics_names_what_it_was_given():
    with pytest.raises(MetricsFileError, match="^runs/b.jsonl: line 1 is not JSON"):
        parse_metrics("{\n", "runs/b.jsonl")


def test_looks_like_maxtext_metrics(tmp_path):
    maxtext = write(tmp_path / "maxtext.jsonl", ["\n", maxtext_line(0, 1.0)])
    evals_first = write(tmp_path / "evals.jsonl", [eval_line(0), maxtext_line(0, 1.0)])
    bundled = write(tmp_path / "metrics.jsonl", [json.dumps({"step": 1, "loss": 2.0, "loss_hex": "0x4000"}) + "\n"])
    garbage = write(tmp_path / "garbage", ["hello\n"])
    empty = write(tmp_path / "empty", [])
    assert looks_like_maxtext_metrics(maxtext) and looks_like_maxtext_metrics(str(evals_first))
    for path in (bundled, garbage, empty, tmp_path, tmp_path / "missing"):
        assert not looks_like_maxtext_metrics(path), path
