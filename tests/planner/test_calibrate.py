"""`elxpk plan --from-run`: step, save and restore times (and more) from a run directory."""

from __future__ import annotations

import json
import statistics

import pytest

from elxpk.errors import UsageError
from elxpk.plan.calibrate import calibrate

from .helpers import run_plan, write_run


def test_medians_from_events_and_metrics(tmp_path):
    truth = write_run(tmp_path / "run", checkpoint_bytes={10: 1000, 30: 3000, 20: 2000})
    cal = calibrate(tmp_path / "run")
    assert cal.step_time_s == pytest.approx(0.5)
    assert cal.compile_s == pytest.approx(2.5)
    assert cal.save_s == pytest.approx(statistics.median(truth["blocking"]))
    assert cal.save_method.startswith("median blocking time")
    assert cal.restore_s == pytest.approx(1.2)
    assert cal.replacement_s == pytest.approx(5.0)
    assert cal.checkpoint_size_bytes == 3000  # the newest step directory
    assert (cal.num_slices, cal.checkpoint_period, cal.max_to_keep) == (2, 10, 3)
    assert cal.steps_sampled == len(truth["step_times"]) and cal.restores_sampled == 1


def test_save_cost_is_estimated_when_events_carry_no_blocking_time(tmp_path):
    truth = write_run(tmp_path / "run", blocking=(0.4,), with_blocking_field=False)
    cal = calibrate(tmp_path / "run")
    expected = (truth["wall"] - truth["startup"] - sum(truth["step_times"]) - truth["recovering"]) / truth["saves"]
    assert expected == pytest.approx(0.4)
    assert cal.save_s == pytest.approx(expected)
    assert "upper bound" in cal.save_method and cal.notes


def test_replacement_is_not_taken_from_simulated_slices(tmp_path):
    write_run(tmp_path / "run", config={"slice_backend": "simulated"})
    cal = calibrate(tmp_path / "run")
    assert cal.replacement_s is None and any("--slice-replacement-time" in n for n in cal.notes)


def test_torn_last_line_is_survived(tmp_path):
    write_run(tmp_path / "run")
    with (tmp_path / "run" / "metrics.jsonl").open("a") as fh:
        fh.write('{"step": 99, "step_time_s": 1e9, "lo')
    assert calibrate(tmp_path / "run").step_time_s == pytest.approx(0.5)


def test_not_a_run_directory(tmp_path):
    with pytest.raises(UsageError, match="^--from-run: .* is not a directory"):
        calibrate(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match="^--from-run: .* has no metrics.jsonl"):
        calibrate(tmp_path / "empty")
    (tmp_path / "empty" / "metrics.jsonl").write_text("")
    with pytest.raises(UsageError, match="^--from-run: .* no step records"):
        calibrate(tmp_path / "empty")


def test_plan_from_run_uses_run_values_and_flags_override_them(tmp_path, capsys):
    write_run(tmp_path / "run", checkpoint_bytes={40: 4096})
    code, out, err = run_plan(["--from-run", str(tmp_path / "run"), "--slice-mtbf", "2h", "-o", "json"], capsys)
    assert code == 0, err
    data = json.loads(out)
    inputs = data["inputs"]
    assert inputs["step_time_s"] == pytest.approx(0.5) and inputs["restore_s"] == pytest.approx(1.2)
    assert inputs["num_slices"] == 2 and inputs["checkpoint_period"] == 10
    assert inputs["sources"]["save_s"] == "run" and inputs["sources"]["image_pull_s"] == "default"
    assert data["calibration"]["checkpoint_size_bytes"] == 4096
    assert "current" in [m for row in data["sla"] for m in row["marks"]]

    code, out, _ = run_plan(["--from-run", str(tmp_path / "run"), "--slice-mtbf", "2h", "--num-slices", "16",
                             "--restore", "30s", "-o", "json"], capsys)
    inputs = json.loads(out)["inputs"]
    assert (inputs["num_slices"], inputs["restore_s"]) == (16, 30.0)
    assert inputs["sources"]["num_slices"] == "flag"


def test_plan_from_run_without_saves_or_restores_asks_for_both(tmp_path, capsys):
    write_run(tmp_path / "run", failure_at=None, period=1000, blocking=())
    code, _, err = run_plan(["--from-run", str(tmp_path / "run"), "--slice-mtbf", "2h"], capsys)
    assert code == 2
    assert err.strip().splitlines() == [
        "error: --checkpoint-save-time is required (the --from-run run has no sample of it): give a duration such as 20s",
        "error: --restore is required (the --from-run run has no sample of it): give a duration such as 90s",
    ]


def test_plan_from_a_missing_run_is_a_usage_error(tmp_path, capsys):
    code, _, err = run_plan(["--from-run", str(tmp_path / "nope"), "--slice-mtbf", "2h"], capsys)
    assert code == 2 and err.startswith("error: --from-run")


def test_trainer_layout_cold_restore_and_ahead_of_time_compile(tmp_path):
    # The trainer compiles before the first step and logs a cold restore of nothing at every start.
    write_run(tmp_path / "run", compile_extra=3.0)
    cal = calibrate(tmp_path / "run")
    assert cal.restore_s == pytest.approx(1.2) and cal.restores_sampled == 1
    assert cal.compile_s == pytest.approx(3.0)
    assert cal.step_time_s == pytest.approx(0.5)


def test_a_run_the_trainer_wrote(tmp_path):
    # Recorded from `python -m trainer --steps 40 --checkpoint-period 10 --num-slices 2 --elastic-enabled
    # --fault 1@25 --revive-after 1 --d-model 64 --n-layers 2 --d-ff 256` (checkpoints left out): a cold
    # start, one slice loss, one restore. Re-record it when the record format (elxpk_contract/records.py)
    # changes.
    import shutil
    from pathlib import Path

    run = shutil.copytree(Path(__file__).parent / "data" / "trainer_run", tmp_path / "run")
    # Moved runs: the recorded absolute checkpoint_dir is gone, the copy's own checkpoints/ is used.
    meta = json.loads((run / "run.json").read_text())
    meta["config"]["checkpoint_dir"] = str(tmp_path / "gone")
    (run / "run.json").write_text(json.dumps(meta))
    (run / "checkpoints" / "40" / "state").mkdir(parents=True)
    (run / "checkpoints" / "40" / "state" / "d").write_bytes(b"x" * 777)
    (run / "checkpoints" / "40.orbax-checkpoint-tmp-9").mkdir()
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    by_name = {}
    for e in events:
        by_name.setdefault(e["event"], []).append(e)
    cal = calibrate(run)
    restore = by_name["restore_done"][1]["time"] - by_name["restore_started"][1]["time"]
    assert cal.restore_s == pytest.approx(restore) and cal.restores_sampled == 1
    assert cal.save_s == pytest.approx(statistics.median(e["blocking_s"] for e in by_name["checkpoint_saved"]))
    assert cal.compile_s == pytest.approx(by_name["restore_done"][0]["compile_s"])
    steps = [json.loads(line)["step_time_s"] for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert cal.step_time_s == pytest.approx(statistics.median(steps)) and cal.steps_sampled == 45
    assert (cal.num_slices, cal.checkpoint_period, cal.max_to_keep) == (2, 10, 3)
    assert cal.replacement_s is None  # simulated slices: their "replacement" is the fault's revive delay
    assert cal.checkpoint_size_bytes == 777


def test_a_run_period_too_short_for_the_planned_save_is_left_out(tmp_path, capsys):
    # The local run saved every 10 steps of 0.5s; a 20s production save does not fit in 5s.
    write_run(tmp_path / "run")
    code, out, err = run_plan(["--from-run", str(tmp_path / "run"), "--slice-mtbf", "30d", "--num-slices", "32",
                               "--checkpoint-save", "20s", "-o", "json"], capsys)
    assert code == 0, err
    data = json.loads(out)
    assert data["inputs"]["checkpoint_period"] is None and data["omitted_periods"][0] == 10


def test_a_run_that_never_restored_estimates_restore_from_its_saves(tmp_path, capsys):
    """The README's demo recovers live: it saves but never reads a checkpoint back. `plan --from-run` asks
    only for what a run cannot know (the MTBF), and says where the restore figure came from."""
    write_run(tmp_path / "run", failure_at=None)
    cal = calibrate(tmp_path / "run")
    assert cal.restores_sampled == 0 and cal.restore_s == pytest.approx(cal.save_s)
    assert any("never restored" in n and "--restore" in n for n in cal.notes)
    code, out, err = run_plan(["--from-run", str(tmp_path / "run"), "--slice-mtbf", "30d", "-o", "json"], capsys)
    assert code == 0, err
    assert json.loads(out)["inputs"]["restore_s"] == pytest.approx(cal.save_s)
