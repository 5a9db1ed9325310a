"""The speed where people look (issue 50): `python -m trainer` prints MaxText's `completed step` line every
--log-period steps, its records carry the speed (run_started's basis, the progress record), `elxpk report`
states it beside goodput, and `--profiler xplane` leaves a trace TensorBoard reads beside the records.

Real processes on the CPU: the micro preset on one slice of two devices. A CPU has no bf16 peak, so every
reader says "no MFU" and none states one; the figures are checked against the metrics the run wrote.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from elxpk_contract.progress_record import PROGRESS_FILE
from tests.process.conftest import elxpk, events, trainer
from tests.support.runs import read_jsonl

pytestmark = pytest.mark.slow  # real trainer processes, as the exit-code tier's

RUN = ["--model", "micro", "--num-slices", "1", "--devices-per-slice", "2", "--global-batch", "4", "--steps", "4",
       "--checkpoint-period", "4"]
LINE = re.compile(r"completed step: (\d+), seconds: ([0-9.]+), TFLOP/s/device: ([0-9.]+), Tokens/s/device: (\d+), "
                  r"tokens/s: (\d+), loss: ([0-9.]+)")


@pytest.fixture(scope="module")
def profiled_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    root = tmp_path_factory.mktemp("speed")
    done = trainer(["--run-dir", str(root / "run"), *RUN, "--log-period", "2", "--profiler", "xplane",
                    "--skip-first-n-steps-for-profiler", "1", "--profiler-steps", "2"], root)
    assert done.code == 0, done.err[-3000:]
    return root / "run", done.out.splitlines()


def test_the_trainer_prints_a_speed_line_every_log_period_steps_that_agrees_with_its_records(profiled_run):
    run, out = profiled_run
    assert out[0].startswith("speed: no MFU: elxpk knows no bf16 peak for cpu"), out
    lines = [m for line in out if (m := LINE.fullmatch(line))]
    assert [int(m[1]) for m in lines] == [1, 3], out
    assert not any("MFU:" in line for line in out if line.startswith("completed step"))
    assert out[-1].startswith("done: 4 steps")
    metrics = {m["step"]: m for m in read_jsonl(run / "metrics.jsonl")}
    seq_len = json.loads((run / "run.json").read_text())["config"]["seq_len"]
    for m in lines:
        window = [metrics[s] for s in (int(m[1]) - 1, int(m[1]))]
        seconds = sum(w["step_time_s"] for w in window)
        tokens = sum(w["examples"][1] - w["examples"][0] for w in window) * seq_len
        assert float(m[2]) == pytest.approx(seconds / 2, abs=6e-4)
        assert int(m[5]) == pytest.approx(tokens / seconds, rel=1e-3, abs=1)
        assert int(m[4]) == pytest.approx(tokens / seconds / 2, rel=1e-3, abs=1)  # two devices
        assert float(m[6]) == pytest.approx(float.fromhex(metrics[int(m[1])]["loss"]), abs=1e-4)


def test_the_records_carry_the_speed_and_report_states_it_beside_goodput(profiled_run, tmp_path):
    run, _ = profiled_run
    (started,) = events(run, "run_started")
    assert started["device_kind"] == "cpu" and started["peak_tflops"] is None
    assert started["devices_per_slice"] == 2 and started["flops_per_example"] > 0
    progress = json.loads((run / "checkpoints" / PROGRESS_FILE).read_text())
    assert progress["tokens_per_s"] > 0 and progress["tflops_per_device"] > 0 and progress["mfu"] is None
    shown = elxpk(["report", str(run), "--no-png"], tmp_path)
    assert shown.code == 0, shown.err
    text = shown.out.splitlines()
    assert text[1].startswith("goodput ") and text[2].startswith("speed "), text
    assert "tokens/s" in text[2] and "no MFU" in text[2] and "MFU " not in text[2].replace("no MFU", "")
    data = json.loads(elxpk(["report", str(run), "--no-png", "-o", "json"], tmp_path).out)
    metrics = read_jsonl(run / "metrics.jsonl")
    tokens = sum(m["examples"][1] - m["examples"][0] for m in metrics) * started["tokens_per_example"]
    assert data["speed"]["tokens_per_s"] == pytest.approx(tokens / sum(m["step_time_s"] for m in metrics))
    assert data["speed"]["mfu"] is None and data["speed"]["device_kind"] == "cpu"


def test_the_profiler_writes_an_xplane_trace_beside_the_records(profiled_run):
    run, out = profiled_run
    assert f"profile: steps 1-2 traced into {run / 'profile'} (tensorboard --logdir {run / 'profile'})" in out
    traces = list((run / "profile" / "plugins" / "profile").glob("*/*.xplane.pb"))
    assert len(traces) == 1 and traces[0].stat().st_size > 0


def test_log_period_0_prints_no_speed_line_and_a_profile_past_the_run_says_so(tmp_path):
    done = trainer(["--run-dir", str(tmp_path / "run"), *RUN, "--log-period", "0", "--profiler", "xplane",
                    "--skip-first-n-steps-for-profiler", "4"], tmp_path)
    assert done.code == 0, done.err[-3000:]
    assert done.out.splitlines() == [
        "profile: none: this process ran 4 step(s), not more than --skip-first-n-steps-for-profiler 4",
        done.out.splitlines()[-1]]
    assert done.out.splitlines()[-1].startswith("done: 4 steps")
    assert not (tmp_path / "run" / "profile").exists()


@pytest.mark.parametrize("flag, value", [("--log-period", "-1"), ("--profiler", "nsys"),
                                         ("--profiler-steps", "0"), ("--skip-first-n-steps-for-profiler", "x")])
def test_a_bad_speed_or_profile_setting_is_one_line_exit_2(tmp_path, flag, value):
    done = trainer(["--run-dir", str(tmp_path / "run"), flag, value], tmp_path)
    assert done.code == 2, done.err
    assert len(done.err.strip().splitlines()) == 1 and flag in done.err
    assert not (tmp_path / "run").exists()
