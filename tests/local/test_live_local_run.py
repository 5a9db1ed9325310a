"""`elxpk local run --kill-slice 1@37 --checkpoint-period 20` with live recovery (the default): the
survivors keep step 37, so nothing is rewound, each step runs once and each example is read once; the
pause-and-resume run is bitwise equal to an uninterrupted one (issue 11's acceptance runs)."""

from __future__ import annotations

import json

import pytest

from tests.local.test_local_run import TINY_FLAGS, run_cli

STEPS, PERIOD, KILL = 45, 20, 37


def _run(root, name: str, *flags: str):
    run_dir = root / name
    code, out, err = run_cli("local", "run", "--run-dir", run_dir, "--steps", STEPS, "--checkpoint-period", PERIOD,
                             "--plain", *flags, *TINY_FLAGS)
    assert code == 0, err
    assert "Traceback" not in out + err
    return run_dir, out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("live-local")
    return {
        "reference": _run(root, "reference", "--no-faults"),
        "pause-resume": _run(root, "pause", "--kill-slice", f"1@{KILL}", "--revive-after", "0.2"),
        "resize": _run(root, "resize", "--mode", "resize", "--kill-slice", f"1@{KILL}", "--revive-after", "1h"),
    }


def _lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("mode", ["pause-resume", "resize"])
def test_kill_at_37_rewinds_nothing_and_runs_each_step_once(runs, mode):
    run_dir, out = runs[mode]
    assert f"slice 1 lost at step {KILL}" in out
    assert f"state of step {KILL} rebuilt from the surviving slices" in out and "0 steps rewound" in out
    # The progress line of the rebuild says so too (it once read "no valid checkpoint: initialised").
    assert f"initialised at step {KILL}" not in out
    assert f"\nstate of step {KILL} rebuilt from the surviving slices in " in out
    metrics = _lines(run_dir / "metrics.jsonl")
    assert [m["step"] for m in metrics] == list(range(STEPS))
    code, text, _ = run_cli("report", run_dir, "-o", "json", "--no-png")
    report = json.loads(text)
    assert code == 0 and report["rewound_steps"] == 0
    examples = report["examples"]
    assert (examples["duplicates"], examples["gaps"], examples["unique"]) == (0, 0, STEPS * 8)
    (rec,) = report["recoveries"]
    assert (rec["failure_step"], rec["restored_step"], rec["rewound_steps"], rec["state_source"]) == (
        KILL, KILL, 0, "live")
    assert rec["first_step_s"] >= rec["restored_s"] >= rec["slices_ready_s"] >= 0
    code, text, _ = run_cli("report", run_dir, "--no-png")
    timeline = [line for line in text.splitlines() if line.strip().startswith("detect")]
    assert code == 0 and len(timeline) == 1  # detect -> slices ready -> state rebuilt -> first new step
    assert [m.split(" +")[0].split(" -")[0] for m in timeline[0].strip().split(" -> ")] == [
        "detect", "slices ready", "state rebuilt", "first new step"]
    restores = [e for e in _lines(run_dir / "events.jsonl") if e["event"] == "restore_done"]
    assert restores[-1]["slices"] == ([0, 1] if mode == "pause-resume" else [0])


def test_pause_resume_is_bitwise_equal_to_the_uninterrupted_run(runs):
    code, out, _ = run_cli("compare", runs["reference"][0], runs["pause-resume"][0], "-o", "json")
    result = json.loads(out)
    assert code == 0, result["failures"]
    assert result["bitwise_equal"] and result["common_steps"] == STEPS


def test_the_report_figure_names_a_live_rebuild_as_such(runs):
    import matplotlib.pyplot as plt

    from elxpk.runs.plots import report_figure
    from elxpk.runs.report import build_report
    from elxpk.runs.rundir import load_run

    run = load_run(runs["pause-resume"][0])
    fig = report_figure(run, build_report(run))
    legends = [[t.get_text() for t in ax.get_legend().get_texts()] for ax in fig.axes if ax.get_legend()]
    plt.close(fig)
    # Nothing rewound: the loss and the rebuild share a step, so one line says both (two would hide each other).
    assert any("slice lost, state rebuilt from the survivors there" in labels for labels in legends), legends
    assert not any("slice lost" in labels for labels in legends)
    assert ["failure detected", "state rebuilt", "first new step"] in legends
    assert not any("restored checkpoint" in labels for labels in legends)
