"""`elxpk report` and the run readers, on run directories written by tests/support/run_writer.py."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from elxpk.chip_hours import Session, billed_s
from elxpk.json_lines import parse_lines
from elxpk.runs.examples import account
from elxpk.runs.report import build_report, wall_time
from elxpk.runs.rundir import load_run
from elxpk_contract.event_records import FailureDetected
from elxpk_contract.records import Metric, make_event
from tests.support.run_writer import FakeRun, executed_steps, write_run


def executions(spec: FakeRun) -> list[int]:
    """The step sequence the writer executes, derived from the spec alone."""
    return executed_steps(spec.steps, spec.failures)


def expected_wall(spec: FakeRun) -> float:
    runs = executions(spec)
    saves = sum(1 for s in runs if (s + 1) % spec.checkpoint_period == 0)
    per_failure = spec.wait_s + spec.restore_s + spec.first_step_delay
    return (spec.compile_time + len(runs) * (spec.step_time + spec.host_gap) + len(spec.failures) * per_failure
            + saves * spec.checkpoint_blocking)


ONE_KILL = FakeRun(steps=40, failures=((23, 20),), wait_s=0.7, restore_s=0.3)


def test_one_recovery_timeline_and_goodput(tmp_path):
    spec = ONE_KILL
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
    detected = next(e.time for e in run.events_of(FailureDetected))
    back = next(r.time for r in reversed(run.metrics) if r.step == failed + 1)
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
    def session(t: float, finished: bool) -> list:
        evs = [make_event("run_started", t, 0), make_event("checkpoint_saved", t + 5, 1)]
        return evs + ([make_event("run_finished", t + 10, 2)] if finished else [])

    clean = session(0, True) + session(100, True)
    assert wall_time(tuple(clean)) == (20.0, 2)
    crashed = session(0, False) + session(100, True)
    assert wall_time(tuple(crashed)) == (110.0, 2)  # 5 s of the crashed session + the 95 s gap + 10 s


@given(st.lists(st.tuples(st.floats(0, 1e5), st.floats(0, 1e5), st.booleans()), min_size=1, max_size=6),
       st.floats(1.6e9, 2e9))
def test_the_billed_interval_is_one_subtraction_per_stretch_of_sessions(gaps, origin):
    """billed_s: each session's time, the gap after it unless it finished cleanly; a stretch of sessions that
    did not finish cleanly is its last end minus its first start, one subtraction, so that `status` (which
    knows only those two times, from the progress record) gets the very float report gets."""
    sessions, t = [], origin
    for gap, length, finished in gaps:
        start = t + gap
        sessions.append(Session(start, start + length, finished))
        t = start + length
    by_parts = sum(s.end - s.start for s in sessions) + sum(
        b.start - a.end for a, b in zip(sessions, sessions[1:], strict=False) if not a.finished)
    assert billed_s(sessions) == pytest.approx(by_parts, rel=1e-12, abs=1e-6)
    if not any(s.finished for s in sessions[:-1]):
        assert billed_s(sessions) == billed_s([Session(sessions[0].start, sessions[-1].end)]) == (
            sessions[-1].end - sessions[0].start)


def test_torn_lines_are_survived(tmp_path):
    run_dir = write_run(tmp_path / "run", ONE_KILL, torn_tail=True)
    run = load_run(run_dir)
    assert run.damaged_lines == 1
    assert max(run.final_records()) == ONE_KILL.steps - 1  # the torn record was dropped, nothing else
    # a restarted writer appending to a torn line keeps its own record
    parsed = parse_lines('{"step": 1}\n{"step": 2, "lo{"step": 3, "loss": "0x1p+0"}\n')
    assert [r["step"] for r in parsed.records] == [1, 3] and parsed.damaged_lines == 1


def _metric(step: int, first: int, end: int) -> Metric:
    return Metric(step=step, loss="0x1p+0", lr=0.0, step_time_s=0.1, examples=(first, end), slices=(0,), time=0.0)


def test_example_accounting_finds_duplicates_and_gaps():
    recs = {0: _metric(0, 0, 8), 1: _metric(1, 4, 12), 2: _metric(2, 16, 24), 4: _metric(4, 24, 32)}
    acc = account(recs)
    assert (acc.duplicates, acc.gaps, acc.unique) == (4, 4, 28)
    assert acc.duplicate_ranges == ((4, 8),) and acc.gap_ranges == ((12, 16),)
    assert acc.missing_steps == (3,) and acc.missing_count == 1


def test_missing_steps_are_counted_gap_by_gap():
    # One stray record far ahead: counted without walking every step below it.
    far = 10**11
    acc = account({0: _metric(0, 0, 8), far: _metric(far, 8, 16)})
    assert acc.missing_count == far - 1 and acc.missing_steps == (1, 2, 3, 4, 5)


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


def test_png_writes_the_path_it_names(tmp_path, cli):
    run_dir = write_run(tmp_path / "run", ONE_KILL)
    target = tmp_path / "plots" / "mine.png"
    target.parent.mkdir()
    code, out, _ = cli("report", run_dir, "--png", target)
    assert code == 0 and f"plot: {target}" in out
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and not (run_dir / "report.png").exists()


@pytest.mark.parametrize(
    ("target", "says"),
    [("{dir}", "is a directory; name the file to write"), ("{missing}/r.png", "does not exist; create it first"),
     ("{dir}/plot.jpg", "must end in .png"), ("{dir}/plot", "must end in .png")],
)
def test_png_refuses_what_it_would_not_write_exactly(tmp_path, cli, target, says):
    run_dir = write_run(tmp_path / "run", ONE_KILL)
    (tmp_path / "out.png").mkdir()  # a directory whose name ends in .png
    paths = {"dir": tmp_path / "out.png", "missing": tmp_path / "nope"}
    before = sorted(p.name for p in tmp_path.rglob("*"))
    code, out, err = cli("report", run_dir, "--png", target.format(**paths))
    lines = err.strip().splitlines()
    assert code == 2 and out == "" and len(lines) == 1 and lines[0].startswith("error: --png ") and says in lines[0]
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # nothing written anywhere


def test_a_cold_restart_recovery_is_recovered(tmp_path, cli):
    # The process died after the detection; a new session restored and trained on, with no
    # first_step_after_recovery of its own: its first step ends the recovery.
    spec = replace(ONE_KILL, cold_restart=True)
    run = load_run(write_run(tmp_path / "run", spec))
    (rec,) = build_report(run).recoveries
    (failed, restored), = spec.failures
    assert rec.complete and rec.cold_restart and rec.first_step == restored
    assert rec.first_step_s == pytest.approx(spec.wait_s + spec.restore_s + spec.step_time)
    assert "not recovered" not in rec.describe() and "cold restart" in rec.describe()
    code, out, _ = cli("report", tmp_path / "run", "--no-png")
    assert code == 0 and "not recovered" not in out and "2 sessions" in out


def test_a_failure_without_recovery_says_so(tmp_path):
    spec = FakeRun(steps=20)
    run_dir = write_run(tmp_path / "run", spec)
    with (run_dir / "events.jsonl").open("a") as fh:
        fh.write(json.dumps(make_event("failure_detected", spec.t0 + 999, 20, slices_lost=[1]).to_json()) + "\n")
    (rec,) = build_report(load_run(run_dir)).recoveries
    assert rec.describe().endswith("not recovered")


def test_counts_are_proper_plurals(tmp_path, cli):
    code, out, _ = cli("report", write_run(tmp_path / "one", ONE_KILL), "--no-png")
    assert code == 0 and "1 session," not in out and "1 session" in out and "(s)" not in out
    assert f": {ONE_KILL.steps} steps done," in out and "last" not in out.splitlines()[0]
    two = FakeRun(steps=30, failures=((15, 10), (25, 20)), cold_restart=True)
    code, out, _ = cli("report", write_run(tmp_path / "two", two), "--no-png")
    assert code == 0 and "3 sessions" in out and "(s)" not in out and "(ies)" not in out


def test_report_png_has_a_legend_for_the_recovery_lines(tmp_path):
    import matplotlib.pyplot as plt

    from elxpk.runs.plots import report_figure

    run = load_run(write_run(tmp_path / "run", ONE_KILL))
    fig = report_figure(run, build_report(run))
    legends = [[t.get_text() for t in ax.get_legend().get_texts()] for ax in fig.axes if ax.get_legend()]
    plt.close(fig)
    assert ["failure detected", "restored", "first new step"] in legends


def test_report_png_says_where_the_time_went_and_covers_no_bar(tmp_path):
    """The third panel splits the wall time as the report does (the parts add up to it); the timeline's
    legend sits outside its axes, so it covers no slice's bar; a restore that rewound draws two lines."""
    import matplotlib.pyplot as plt

    from elxpk.runs.plots import report_figure

    run = load_run(write_run(tmp_path / "run", ONE_KILL))
    report = build_report(run)
    fig = report_figure(run, report)
    ax_loss, ax_health, ax_split = fig.axes
    fig.canvas.draw()
    widths = [patch.get_width() for patch in ax_split.patches]
    parts = [report.productive_s, *report.badput.to_dict().values()]
    assert sum(widths) == pytest.approx(1.0) and len(widths) == sum(1 for p in parts if p > 0)
    health_box = ax_health.get_window_extent()
    legend_box = ax_health.get_legend().get_window_extent()
    assert legend_box.x0 >= health_box.x1  # beside the bars, not over them
    loss_labels = [t.get_text() for t in ax_loss.get_legend().get_texts()]
    plt.close(fig)
    assert "slice lost" in loss_labels and "restored checkpoint" in loss_labels


def test_a_refused_resize_shows_in_the_recovery_and_its_wait_counts():
    """The attempt on the survivors was refused (out of device memory) before it restored; the recovery's
    phases are those of the attempt that ran, after the wait for the slice."""
    from elxpk.runs.recoveries import recoveries

    events = [make_event("failure_detected", 100.0, 6, slices_lost=(1,), kind="slice_down"),
              make_event("slices_ready", 100.1, 6, slices=(0, 2, 3)),
              make_event("restore_started", 100.1, 6, slices=(0, 2, 3)),
              make_event("resize_refused", 100.2, 6, slices=(0, 2, 3), needed_bytes=10, limit_bytes=9, min_slices=4),
              make_event("slices_ready", 104.0, 6, slices=(0, 1, 2, 3)),
              make_event("restore_started", 104.0, 6, slices=(0, 1, 2, 3)),
              make_event("restore_done", 104.5, 6, slices=(0, 1, 2, 3), state_source="live", from_checkpoint=False),
              make_event("first_step_after_recovery", 105.0, 6)]
    (rec,) = recoveries(events)
    assert rec.refused_widths == (3,)
    assert rec.slices_ready_s == pytest.approx(4.0) and rec.restore_s == pytest.approx(0.5)
    assert "resize to 3 slices refused (out of device memory), waited for more" in rec.describe()
    assert rec.to_dict()["refused_widths"] == [3]


def test_local_runs_own_report_files_are_never_written_through_a_link(tmp_path):
    """report.json (and report.png) are names elxpk chose in the run dir: a link planted there is refused in
    one line and its target kept; a regular one is replaced (a run extended in place rewrites its report)."""
    import io
    from types import SimpleNamespace

    from elxpk.errors import UsageError
    from elxpk.local.run import write_report
    from tests.support.run_writer import FakeRun, write_run

    run_dir = write_run(tmp_path / "run", FakeRun(steps=12))
    victim = tmp_path / "victim"
    victim.write_text("keep me\n")
    (run_dir / "report.json").symlink_to(victim)
    with pytest.raises(UsageError, match="is a symlink; elxpk does not write through it"):
        write_report(SimpleNamespace(run_dir=run_dir), io.StringIO())
    assert victim.read_text() == "keep me\n"
    (run_dir / "report.json").unlink()
    (run_dir / "report.json").write_text("old\n")
    write_report(SimpleNamespace(run_dir=run_dir), io.StringIO())
    assert (run_dir / "report.json").read_text().startswith("{") and (run_dir / "report.png").is_file()
    from elxpk.local.supervisor import _open_log

    (run_dir / "logs").mkdir()
    (run_dir / "logs" / "attempt0-process0.log").symlink_to(victim)
    with pytest.raises(UsageError, match="never through a link"):
        _open_log(run_dir / "logs" / "attempt0-process0.log")
    assert victim.read_text() == "keep me\n"


def test_drains_are_read_from_both_stop_records_and_older_records_are_left_out():
    """`report`'s drain lines (elxpk/runs/drains.py): a `preempted` and a `peer_preempted` with the drain's
    fields each make one; a record written before them (no drain_steps_lost) says nothing it cannot know."""
    from elxpk.runs.drains import drains

    events = [
        make_event("preempted", 1.0, 12, signal="SIGTERM", checkpoint_step=12, saved=True, heard_by=0,
                   drain_steps_lost=0),
        make_event("failure_detected", 2.0, 30, kind="peer_preempted", heard_by=1, saved=False,
                   drain_steps_lost=6, save_skipped="too little grace left to save: ..."),
        make_event("preempted", 3.0, 40, signal="SIGTERM", checkpoint_step=36),  # an older trainer's
        make_event("failure_detected", 4.0, 50, kind="slice_down"),
    ]
    found = drains(events)
    assert [d.describe() for d in found] == [
        "stopped at step 12 (process 0 heard SIGTERM): saved on the way out; 0 steps lost",
        "stopped at step 30 (process 1 heard SIGTERM): not saved: too little grace left to save: ...; 6 steps lost",
    ]
    assert found[1].to_dict()["drain_steps_lost"] == 6


def test_a_sigterm_heard_by_the_records_writer_is_one_recovery_per_fault(tmp_path, cli):
    # Multi-controller: when process 0 (the one that writes the records) hears SIGTERM itself, it writes
    # `preempted`, not failure_detected, and the group restart's new session restores. Each such fault is
    # one recovery, timed from the stop to the new session's first step, its rewind from the records.
    spec = FakeRun(steps=40, failures=((15, 10), (33, 30)), preempted_heard_by=0, wait_s=1.5, restore_s=0.25)
    run_dir = write_run(tmp_path / "run", spec)
    report = build_report(load_run(run_dir))
    assert [(r.failure_step, r.restored_step, r.rewound_steps) for r in report.recoveries] == [
        (f, c, f - c) for f, c in spec.failures]
    for rec, (_, restored) in zip(report.recoveries, spec.failures, strict=True):
        assert rec.complete and rec.cold_restart and rec.first_step == restored and rec.heard_by == 0
        assert rec.first_step_s == pytest.approx(spec.wait_s + spec.restore_s + spec.step_time)
        assert rec.describe().startswith(f"SIGTERM heard by process 0, the group stopped at step {rec.failure_step}")
    assert report.executed - report.steps == sum(f - c for f, c in spec.failures)  # the runs' own count agrees
    code, out, _ = cli("report", run_dir, "--no-png")
    assert code == 0 and "recoveries: 2" in out and "not recovered" not in out, out


def test_a_preemption_that_ended_the_run_is_no_recovery(tmp_path):
    # No new session after it: the run stopped there (a Ctrl-C, a deleted workload), nothing recovered.
    spec = FakeRun(steps=20)
    run_dir = write_run(tmp_path / "run", spec)
    with (run_dir / "events.jsonl").open("a") as fh:
        fh.write(json.dumps(make_event("preempted", spec.t0 + 999, 20, heard_by=0).to_json()) + "\n")
    assert build_report(load_run(run_dir)).recoveries == ()


def _concatenated(target, *runs):
    """One run directory holding the records of `runs` in order, as two workloads of one name leave it."""
    target.mkdir()
    for name in ("metrics.jsonl", "events.jsonl"):
        (target / name).write_text("".join((r / name).read_text() for r in runs))
    (target / "run.json").write_text((runs[-1] / "run.json").read_text())
    return target


def test_two_workloads_in_one_run_dir_are_reported_apart_by_run_id(tmp_path, cli, cli_json):
    # The README's try-it block run twice: the second JobSet (another UID) writes beside the first's records.
    first = FakeRun(steps=40, failures=((23, 20),), cold_restart=True, run_id="uid-first")
    second = replace(first, failures=((35, 30),), run_id="uid-second", t0=first.t0 + 3600)
    run_dir = _concatenated(tmp_path / "both", write_run(tmp_path / "a", first), write_run(tmp_path / "b", second))
    code, data = cli_json("report", run_dir, "--no-png")
    alone = build_report(load_run(write_run(tmp_path / "second", second)))
    assert code == 0 and data["run_id"] == "uid-second"
    assert (data["sessions"], data["rewound_steps"], data["steps"]) == (2, 35 - 30, second.steps)
    assert data["wall_s"] == pytest.approx(alone.wall_s) and len(data["recoveries"]) == 1
    assert [(w["run_id"], w["sessions"], w["steps"]) for w in data["earlier_workloads"]] == [("uid-first", 2, 40)]
    code, out, _ = cli("report", run_dir, "--no-png")
    assert code == 0 and out.startswith("this report is of run id uid-second") and "uid-first: 2 sessions" in out
    code, data = cli_json("report", write_run(tmp_path / "one", first), "--no-png")  # one workload: as before
    assert code == 0 and data["earlier_workloads"] == [] and data["sessions"] == 2


@pytest.mark.parametrize("command", ["report", "compare"])
def test_a_bad_output_format_is_read_with_the_other_flags(tmp_path, cli, command):
    # -o is one of the command's flags: its line comes with the others', not alone before them.
    run_dir = write_run(tmp_path / "run", ONE_KILL)
    other = ["--png", tmp_path / "r.png", "--no-png"] if command == "report" else [run_dir, "--rtol", "-1"]
    code, out, err = cli(command, run_dir, *other, "-o", "yaml")
    lines = err.strip().splitlines()
    assert code == 2 and out == "" and len(lines) == 2, err
    assert lines[0] == "error: -o/--output 'yaml': use text or json"
    assert not (tmp_path / "r.png").exists()


def test_a_skipped_checkpoint_is_named_beside_the_rewind_it_lengthened(tmp_path):
    """Checkpoint 20 was skipped before slice 1 was lost at step 27: the restore went back to 10, and the
    report says which save was missing and why, beside that recovery (and in its JSON)."""
    skipped = make_event("checkpoint_skipped", FakeRun().t0 + 1.0, 20, reason="the previous save still running")
    other = make_event("checkpoint_skipped", FakeRun().t0 + 1.5, 5, reason="before the restored step")
    spec = FakeRun(steps=40, failures=((27, 10),), extra_events=(skipped.to_json(), other.to_json()))
    run_dir = write_run(tmp_path / "run", spec)
    [recovery] = build_report(load_run(run_dir)).recoveries
    assert recovery.skipped == ((20, "the previous save still running"),)  # 5 is before the step restored
    assert "checkpoint 20 had been skipped (the previous save still running), so the rewind went back to step 10" \
        in recovery.describe()
    assert recovery.to_dict()["skipped_checkpoints"] == [{"step": 20, "reason": "the previous save still running"}]
    plain = write_run(tmp_path / "plain", FakeRun(steps=40, failures=((27, 20),)))
    assert build_report(load_run(plain)).recoveries[0].skipped == ()
