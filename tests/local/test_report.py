"""`elxpk report` and the run readers, on run directories written by tests/support/run_writer.py."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from elxpk.runs.examples import account
from elxpk.runs.jsonl import parse_lines
from elxpk.runs.report import build_report, wall_time
from elxpk.runs.rundir import load_run
from tests.support.run_writer import FakeRun, write_run


def executions(spec: FakeRun) -> list[int]:
    """The step sequence the writer executes, derived from the spec alone."""
    out, step, pending = [], 0, list(spec.failures)
    while step < spec.steps:
        if pending and step == pending[0][0]:
            step = pending.pop(0)[1]
        out.append(step)
        step += 1
    return out


def expected_wall(spec: FakeRun) -> float:
    runs = executions(spec)
    saves = sum(1 for s in runs if (s + 1) % spec.checkpoint_period == 0)
    per_failure = spec.wait_s + spec.restore_s + spec.first_step_delay
    return (spec.compile_time + len(runs) * (spec.step_time + spec.host_gap) + len(spec.failures) * per_failure
            + saves * spec.checkpoint_blocking)


ONE_KILL = FakeRun(steps=40, failures=((23, 20),), wait_s=0.7, restore_s=0.3)


@pytest.mark.parametrize("legacy", [False, True], ids=["current", "legacy-format"])
def test_one_recovery_timeline_and_goodput(tmp_path, legacy):
    # The legacy format (no slices_lost, no compile_s, no metric times) exercises the report's fallbacks.
    spec = replace(ONE_KILL, legacy=legacy)
    report = build_report(load_run(write_run(tmp_path / "run", spec)))
    (failed, restored), = spec.failures
    assert len(report.recoveries) == 1
    rec = report.recoveries[0]
    assert (rec.failure_step, rec.restored_step, rec.first_step, rec.lost) == (failed, restored, restored, (1,))
    assert rec.slices_ready_s == pytest.approx(spec.wait_s)
    assert rec.restore_s == pytest.approx(spec.restore_s)
    assert rec.first_step_s == pytest.approx(spec.wait_s + spec.restore_s + spec.step_time)
    assert rec.rewound_steps == failed - restored
    assert rec.caught_up_s == pytest.approx(rec.first_step_s + (failed + 1 - restored) * spec.step_time)
    assert report.steps == spec.steps
    assert report.executed == len(executions(spec))
    assert report.wall_s == pytest.approx(expected_wall(spec))
    productive = spec.steps * spec.step_time
    assert report.productive_s == pytest.approx(productive)
    assert report.goodput == pytest.approx(productive / expected_wall(spec))
    bad = report.badput
    assert bad.rewound_s == pytest.approx((failed - restored) * spec.step_time)
    assert bad.restore_s == pytest.approx(spec.restore_s)
    assert bad.waiting_s == pytest.approx(spec.wait_s)
    assert bad.compile_s == pytest.approx(spec.compile_time)
    saves = sum(1 for s in executions(spec) if (s + 1) % spec.checkpoint_period == 0)
    assert bad.checkpoint_s == pytest.approx(saves * spec.checkpoint_blocking)
    assert bad.other_s == pytest.approx(0.0, abs=1e-6)
    assert report.examples.exactly_once and report.examples.unique == spec.steps * spec.batch
    assert "slice 1 lost at step 23; restored step 20 in 0.3 s" in rec.describe()


def test_trainer_fields_are_used_over_estimates(tmp_path):
    # Host time between steps is in no step_time_s: only the metric times see it.
    spec = replace(ONE_KILL, host_gap=0.05, lost_slice=0)
    run = load_run(write_run(tmp_path / "run", spec))
    report = build_report(run)
    (failed, restored), = spec.failures
    (rec,) = report.recoveries
    assert rec.lost == (0,)  # from slices_lost
    detected = next(e["time"] for e in run.events if e["event"] == "failure_detected")
    back = next(r["time"] for r in reversed(run.metrics) if r["step"] == failed + 1)
    assert rec.caught_up_s == pytest.approx(back - detected)
    estimate = rec.first_step_s + (failed + 1 - restored) * spec.step_time
    assert rec.caught_up_s > estimate + (failed - restored) * spec.host_gap * 0.9  # not the old estimate
    assert report.badput.compile_s == pytest.approx(spec.compile_time)  # restore_done's compile_s
    assert report.wall_s == pytest.approx(expected_wall(spec))


def test_clean_run_has_no_recovery_and_counts_compile(tmp_path):
    spec = FakeRun(steps=25, compile_time=2.0)
    report = build_report(load_run(write_run(tmp_path / "run", spec)))
    assert report.recoveries == ()
    assert report.executed == report.steps == spec.steps
    assert report.badput.compile_s == pytest.approx(spec.compile_time)
    assert report.goodput == pytest.approx(spec.steps * spec.step_time / expected_wall(spec))


def test_two_failures_two_timelines(tmp_path):
    spec = FakeRun(steps=50, failures=((15, 10), (37, 30)))
    report = build_report(load_run(write_run(tmp_path / "run", spec)))
    assert [(r.failure_step, r.restored_step) for r in report.recoveries] == list(spec.failures)
    assert report.executed - report.steps == sum(f - r for f, r in spec.failures)
    for rec, (failed, restored) in zip(report.recoveries, spec.failures, strict=True):
        assert rec.caught_up_s == pytest.approx(rec.first_step_s + (failed + 1 - restored) * spec.step_time)


def test_wall_time_counts_crash_gaps_but_not_clean_stops():
    def session(t: float, finished: bool) -> list[dict]:
        evs = [{"event": "run_started", "time": t, "step": 0}, {"event": "checkpoint_saved", "time": t + 5, "step": 1}]
        return evs + ([{"event": "run_finished", "time": t + 10, "step": 2}] if finished else [])

    clean = session(0, True) + session(100, True)
    assert wall_time(tuple(clean)) == (20.0, 2)
    crashed = session(0, False) + session(100, True)
    assert wall_time(tuple(crashed)) == (110.0, 2)  # 5 s of the crashed session + the 95 s gap + 10 s


def test_torn_lines_are_survived(tmp_path):
    run_dir = write_run(tmp_path / "run", ONE_KILL, torn_tail=True)
    run = load_run(run_dir)
    assert run.damaged_lines == 1
    assert max(run.final_records()) == ONE_KILL.steps - 1  # the torn record was dropped, nothing else
    # a restarted writer appending to a torn line keeps its own record
    parsed = parse_lines('{"step": 1}\n{"step": 2, "lo{"step": 3, "loss": "0x1p+0"}\n')
    assert [r["step"] for r in parsed.records] == [1, 3] and parsed.damaged_lines == 1


def test_example_accounting_finds_duplicates_and_gaps():
    recs = {0: {"examples": [0, 8]}, 1: {"examples": [4, 12]}, 2: {"examples": [16, 24]}, 4: {"examples": [24, 32]}}
    acc = account(recs)
    assert (acc.duplicates, acc.gaps, acc.unique) == (4, 4, 28)
    assert acc.duplicate_ranges == ((4, 8),) and acc.gap_ranges == ((12, 16),)
    assert acc.missing_steps == (3,)


def test_cli_report_json_and_png(tmp_path, cli_json):
    run_dir = write_run(tmp_path / "run", ONE_KILL)
    code, data = cli_json("report", run_dir)
    assert code == 0
    assert len(data["recoveries"]) == 1 and data["recoveries"][0]["restored_step"] == ONE_KILL.failures[0][1]
    assert data["goodput"] == pytest.approx(ONE_KILL.steps * ONE_KILL.step_time / expected_wall(ONE_KILL))
    assert set(data["badput"]) == {"rewound_steps_s", "restore_s", "waiting_for_slices_s", "compile_s",
                                   "checkpoint_blocking_s", "other_s"}
    png = run_dir / "report.png"
    assert data["png"] == str(png) and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_report_text_and_no_png(tmp_path, cli):
    run_dir = write_run(tmp_path / "run", ONE_KILL)
    before = sorted(p.name for p in run_dir.iterdir())
    code, out, _ = cli("report", run_dir, "--no-png")
    assert code == 0
    assert "recoveries: 1" in out and "goodput" in out and "detect +0.00 s -> slices ready +0.70 s" in out
    assert sorted(p.name for p in run_dir.iterdir()) == before


@pytest.mark.parametrize(
    ("argv", "flag"),
    [(["report", "{missing}"], "RUN_DIR"), (["report", "{empty}"], "RUN_DIR"), (["report", "{run}", "-o", "yaml"], "-o/--output")],
)
def test_cli_report_bad_input_exits_2(tmp_path, cli, argv, flag):
    (tmp_path / "empty").mkdir()
    run_dir = write_run(tmp_path / "run", ONE_KILL)
    paths = {"missing": tmp_path / "nope", "empty": tmp_path / "empty", "run": run_dir}
    code, out, err = cli(*[a.format(**paths) for a in argv])
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {flag}")
    assert not (run_dir / "report.png").exists()
    assert "Traceback" not in err


def test_report_json_is_plain_data(tmp_path):
    report = build_report(load_run(write_run(tmp_path / "run", ONE_KILL)))
    assert json.loads(json.dumps(report.to_dict()))["steps"] == ONE_KILL.steps
