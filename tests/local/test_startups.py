"""`report`'s start-ups (elxpk/runs/startups.py): each process start's phases, from the trainer's `startup` events
as a run directory holds them; the trainer writing them is tests/trainer/test_executable_store.py's."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from elxpk.runs.report import build_report, render_text
from elxpk.runs.rundir import load_run
from elxpk.runs.startups import startups
from elxpk_contract.event_records import STARTUP_PHASES
from elxpk_contract.records import make_event

T0 = 1_800_000_000.0


def _start(t0: float, step: int, how: str, phases=STARTUP_PHASES, process: int = 0) -> list:
    """One process's startup events, phase i ending i + 1 seconds after the process's start at `t0`."""
    return [make_event("startup", t0 + i + 1, step, phase=phase, since_start_s=float(i + 1), process=process,
                       how=how if phase == "executable_ready" else "")
            for i, phase in enumerate(phases)]


def test_each_process_start_is_one_timeline_with_how_its_step_was_made():
    events = (*_start(T0, 0, "compiled"), make_event("checkpoint_committed", T0 + 9, 4),
              *_start(T0 + 20, 4, "deserialized"), *_start(T0 + 40, 4, "cache_hit", STARTUP_PHASES[:4]))
    first, second, killed = startups(events)
    assert first.phases == {p: float(i + 1) for i, p in enumerate(STARTUP_PHASES)}
    assert (first.executable, second.executable, killed.executable) == ("compiled", "deserialized", "")
    assert (second.step, killed.step) == (4, None)  # killed: before it restored
    assert second.first_step_s == 7.0 and second.after_restore_s == 2.0 and killed.first_step_s is None
    assert "step (deserialized) 6.00 s -> first step 7.00 s" in second.describe()


@given(st.lists(st.tuples(st.sampled_from(STARTUP_PHASES), st.integers(0, 1)), max_size=40))
def test_whatever_order_the_events_come_in_no_phase_is_lost_or_counted_twice(marks):
    events = tuple(make_event("startup", T0 + i, None, phase=phase, since_start_s=float(i), process=process)
                   for i, (phase, process) in enumerate(marks))
    found = startups(events)
    assert sum(len(t.phases) for t in found) == len(marks)
    for timeline in found:
        assert list(timeline.phases) == [p for p in STARTUP_PHASES if p in timeline.phases]  # in phase order


def test_report_shows_every_start_up_in_text_and_json(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    events = (make_event("run_started", T0, 0), *_start(T0, 0, "compiled"),
              make_event("run_started", T0 + 20, 0), *_start(T0 + 20, 2, "deserialized"))
    (run / "events.jsonl").write_text("".join(json.dumps(e.to_json()) + "\n" for e in events))
    (run / "metrics.jsonl").write_text("")
    report = build_report(load_run(run))
    text = render_text(report)
    at = text.index("start-ups: 2")
    assert text[at + 2].startswith("  2. process 0, resumed at step 2: imports 1.00 s -> devices 2.00 s")
    assert [t["executable"] for t in report.to_dict()["startups"]] == ["compiled", "deserialized"]


def test_the_progress_record_carries_the_start_up_and_its_reader_refuses_a_phase_it_does_not_know(tmp_path):
    from elxpk_contract.progress_record import PROGRESS_FILE, read_progress
    from elxpk_contract.record_fields import RecordError
    from tests.support.clock import ManualClock
    from trainer.elastic.progress import ProgressWriter

    writer = ProgressWriter(str(tmp_path), ManualClock(T0))
    writer.startup({"imports_done": 2.0, "executable_ready": 4.5}, "deserialized", T0 - 5)
    writer.phase("compiling")
    text = (tmp_path / PROGRESS_FILE).read_text()
    read = read_progress(text)
    assert (read.startup, read.startup_how, read.process_started_at) == (
        {"imports_done": 2.0, "executable_ready": 4.5}, "deserialized", T0 - 5)
    for field, bad in (("startup", {"warming_up": 1.0}), ("startup_how", "guessed")):
        data = json.loads(text)
        data[field] = bad
        with pytest.raises(RecordError, match="startup"):
            read_progress(json.dumps(data))


def test_two_processes_interleaved_are_two_timelines():
    zero, one = _start(T0, 4, "deserialized"), _start(T0, 4, "compiled", process=1)
    events = tuple(e for pair in zip(zero, one, strict=True) for e in pair)  # as two writers append them
    first, second = startups(events)
    assert (first.process, first.executable, second.process, second.executable) == (0, "deserialized", 1, "compiled")
    assert first.phases == second.phases == {p: float(i + 1) for i, p in enumerate(STARTUP_PHASES)}
