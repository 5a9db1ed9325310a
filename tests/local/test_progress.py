"""The live view's state and its two renderings, fed with records of a synthetic run."""

from __future__ import annotations

import io
import json

from rich.console import Console

from elxpk.local.progress import RunProgress
from elxpk.local.view import LiveView, PlainView, make_view
from tests.support.run_writer import FakeRun, write_run

SPEC = FakeRun(steps=40, failures=((23, 20),), wait_s=0.7, restore_s=0.3)


def replay(tmp_path, observe, spec: FakeRun = SPEC) -> None:
    """Feed the records in the order a trainer emits them: by time, metrics between events."""
    run_dir = write_run(tmp_path / "run", spec)
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    # The writer's metric of step s lands before the events with a later time; interleave by position.
    queue = iter(metrics)
    for e in events:
        if e["event"] in ("checkpoint_saved", "first_step_after_recovery", "run_finished"):
            target = e["step"] if e["event"] != "first_step_after_recovery" else e["step"] + 1
            while True:
                m = next(queue, None)
                if m is None:
                    break
                observe("metric", m)
                if m["step"] + 1 == target:
                    break
        observe("event", e)


def test_progress_lines_tell_the_recovery(tmp_path):
    now = [SPEC.t0 + 100.0]
    progress = RunProgress(total_steps=SPEC.steps, num_slices=2, clock=lambda: now[0])
    replay(tmp_path, progress.observe)
    failed, restored = SPEC.failures[0]
    assert f"slice 1 lost at step {failed}" in progress.lines
    assert f"restored step {restored} in {SPEC.restore_s:.1f} s" in progress.lines
    first = SPEC.wait_s + SPEC.restore_s + SPEC.step_time
    assert f"step {restored} reached {first:.1f} s after the failure" in progress.lines
    caught = [line for line in progress.lines if line.startswith(f"step {failed + 1} reached")]
    detected = next(e for e in progress.lines if "lost" in e)
    assert detected and len(caught) == 1  # measured on the injected clock
    assert progress.health == {0: "healthy", 1: "healthy"} and progress.finished
    assert progress.recoveries == 1 and progress.step == SPEC.steps - 1


def test_plain_view_prints_events_and_tenths(tmp_path):
    out = io.StringIO()
    view = make_view(RunProgress(total_steps=SPEC.steps, num_slices=2), live=None, out=out)
    assert isinstance(view, PlainView)  # a StringIO is not a terminal
    with view:
        replay(tmp_path, view.observe)
    text = out.getvalue()
    assert "slice 1 lost at step 23" in text and f"step {SPEC.steps}/{SPEC.steps} loss" in text
    assert sum(1 for line in text.splitlines() if line.startswith("step ") and "loss" in line) >= 10


def test_live_view_renders_bar_health_and_events(tmp_path):
    from rich.console import Console

    out = io.StringIO()
    progress = RunProgress(total_steps=SPEC.steps, num_slices=2)
    console = Console(file=out, force_terminal=True, width=100)
    view = LiveView(progress, console)
    lost_seen = []

    def observe(kind, record):
        view.observe(kind, record)
        if kind == "event" and record["event"] == "failure_detected":
            console.print(view)  # what the live display shows at that moment
            lost_seen.append(progress.health[1])

    with view:
        replay(tmp_path, observe)
    text = out.getvalue()
    assert lost_seen == ["lost"]
    assert "slice 1: lost" in text and "slice 0: healthy" in text and "loss" in text
    assert f"{SPEC.steps}/{SPEC.steps}" in text


def test_group_restart_marks_every_process_restarting():
    progress = RunProgress(total_steps=10, num_slices=2, clock=lambda: 0.0)
    progress.observe("event", {"event": "failure_detected", "time": 1.0, "step": 4, "slices_lost": [1],
                                       "source": "supervisor"})
    assert progress.health == {0: "restarting", 1: "lost"}
    progress.observe("event", {"event": "slices_ready", "time": 2.0, "step": None, "slices": [0, 1]})
    assert progress.health == {0: "healthy", 1: "healthy"}
    assert progress.lines == ["slice 1 lost at step 4", "slices ready 1.0 s after the failure"]


def test_plain_view_prints_each_tenth_once_across_a_rewind(tmp_path):
    # Killed at step 26 with a checkpoint at 20: steps 20..25 run twice, and the tenth mark "step 24/40"
    # falls inside them; it is printed once.
    spec = FakeRun(steps=40, failures=((26, 20),))
    out = io.StringIO()
    with PlainView(RunProgress(total_steps=spec.steps, num_slices=2), out) as view:
        replay(tmp_path, view.observe, spec)
    lines = out.getvalue().splitlines()
    marks = [line.split()[1] for line in lines if line.startswith("step ") and " loss " in line]
    assert len(marks) == len(set(marks)) == 10
    assert len(lines) == len(set(lines))  # no progress line twice


def test_finished_line_and_report_say_the_same_step_count(tmp_path):
    from elxpk.runs.report import build_report, render_text
    from elxpk.runs.rundir import load_run

    progress = RunProgress(total_steps=SPEC.steps, num_slices=2)
    replay(tmp_path, progress.observe)
    report_line = render_text(build_report(load_run(tmp_path / "run")))[0]
    assert progress.lines[-1] == f"run finished: {SPEC.steps} steps done"
    assert f": {SPEC.steps} steps done," in report_line and "last" not in report_line


def test_the_views_say_when_the_trainer_restores_and_compiles(tmp_path):
    """From restore_started to restore_done no step runs: the trainer restores and compiles its step (restore_done
    is written once the compile is done). Both views say so, and stop saying it once steps run."""
    run_dir = write_run(tmp_path / "run", SPEC)
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    started = next(e for e in events if e["event"] == "restore_started")
    done = next(e for e in events if e["event"] == "restore_done")
    metric = json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[0])
    progress = RunProgress(total_steps=SPEC.steps, num_slices=2)
    live = LiveView(progress, console=Console(file=io.StringIO(), width=120))
    live.observe("event", started)
    assert progress.status_line() == f"step -/{SPEC.steps} loss - (restoring the state and compiling the step)"
    shown = io.StringIO()
    Console(file=shown, width=120).print(live)
    assert "restoring the state and compiling the step ..." in shown.getvalue()
    live.observe("event", done)
    assert progress.phase is None
    live.observe("event", started)
    live.observe("metric", metric)  # a step ran: no longer compiling
    assert progress.phase is None and "compiling" not in progress.status_line()


def test_the_live_view_gives_the_speed_of_the_latest_steps_from_the_trainer_s_basis():
    """run_started's basis (elxpk_contract/speed.py) turns each step into tokens/s and MFU; a CPU has no peak
    and says `no MFU`; a session without a basis (an older trainer's) shows no speed at all."""
    from rich.console import Console

    from elxpk_contract.records import make_event
    from elxpk_contract.speed import SpeedBasis

    def step(i: int, seconds: float) -> dict:
        return {"step": i, "loss": (1.5).hex(), "lr": 0.1, "step_time_s": seconds, "examples": [4 * i, 4 * i + 4],
                "slices": [0, 1], "time": 10.0 + i}

    for kind, peak, shown in (("cpu", None, "no MFU"), ("TPU v5 lite", 197.0, "MFU 50.0%")):
        progress = RunProgress(total_steps=40, num_slices=2)
        # 4 examples a step on 2 slices x 2 devices in 0.25 s: 4 F per device-second, half the peak for this F
        basis = SpeedBasis(128, 197e12 * 0.5 / 4, 2, kind, peak)
        progress.observe("event", make_event("run_started", 1.0, 0, **basis._asdict()).to_json())
        progress.observe("metric", step(0, 9.0))  # the first step's slow start leaves with its window
        for i in range(1, 21):
            progress.observe("metric", step(i, 0.25))
        assert progress.status_line() == f"step 21/40 loss 1.5000 2,048 tokens/s, {shown}"
        out = io.StringIO()
        view = LiveView(progress, console=Console(file=out, width=200))
        view.observe("metric", step(21, 0.25))
        with view:
            pass
        assert f"2,048 tokens/s, {shown}" in out.getvalue()
    older = RunProgress(total_steps=40, num_slices=2)
    older.observe("event", make_event("run_started", 1.0, 0).to_json())
    older.observe("metric", step(0, 0.25))
    assert older.status_line() == "step 1/40 loss 1.5000"
