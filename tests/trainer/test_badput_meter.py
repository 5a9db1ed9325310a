"""The progress record's running totals of where the time went (trainer/elastic/badput_meter.py) are what
`elxpk report` computes from the run directory: on a real run with a lost slice, and across a restarted
process that carries them over. `workload status` splits chip-hours by them."""

from __future__ import annotations

import pytest

from elxpk.runs.report import build_report
from elxpk.runs.rundir import load_run
from elxpk_contract.progress_record import PROGRESS_FILE, read_progress
from tests.support.clock import ManualClock
from tests.support.runs import tiny_config
from trainer.elastic.badput_meter import KEYS, BadputMeter
from trainer.elastic.progress import ProgressWriter


@pytest.mark.slow  # a real run with a lost slice: two compiles
def test_a_faulted_run_publishes_the_reports_split(tmp_path):
    from trainer.elastic.loop import train

    cfg = tiny_config(tmp_path, steps=12, checkpoint_period=4, fault=("1@6",), revive_after=0.0)
    train(cfg)
    progress = read_progress((tmp_path / "checkpoints" / PROGRESS_FILE).read_text(encoding="utf-8"))
    report = build_report(load_run(tmp_path))
    b = report.badput
    assert set(progress.badput) == set(KEYS) and progress.since is not None
    assert report.executed > report.steps  # the lost slice rewound steps: the split has something to show
    expected = {"productive": report.productive_s, "rewound": b.rewound_s, "restore": b.restore_s,
                "compile": b.compile_s, "checkpoint": b.checkpoint_s, "waiting": b.waiting_s}
    for key, value in expected.items():
        assert progress.badput[key] == pytest.approx(value, abs=1e-6), key


def test_a_restarted_process_carries_the_totals_and_counts_redone_steps_as_rewound(tmp_path):
    clock = ManualClock()
    first_meter = BadputMeter()
    first = ProgressWriter(str(tmp_path), clock, meter=first_meter)
    for step in range(10):
        first_meter.observe("metric", {"step": step, "step_time_s": 2.0})
    first.step_done(10, at=clock.now, attempt=1)
    since = read_progress((tmp_path / PROGRESS_FILE).read_text()).since
    clock.now += 100
    second_meter = BadputMeter()
    second = ProgressWriter(str(tmp_path), clock, meter=second_meter)  # the pod restarted; steps 8, 9 redone
    for step in range(8, 12):
        second_meter.observe("metric", {"step": step, "step_time_s": 2.0})
    second.step_done(12, at=clock.now, attempt=1)
    published = read_progress((tmp_path / PROGRESS_FILE).read_text())
    assert published.since == since  # the totals span both processes
    assert published.badput["productive"] == 12 * 2.0 and published.badput["rewound"] == 2 * 2.0


def test_a_record_with_foreign_totals_is_not_carried(tmp_path):
    (tmp_path / PROGRESS_FILE).write_text('{"version": 1, "steps_done": 3, "step_time": null, "checkpoint_step": '
                                          'null, "checkpoint_time": null, "updated_at": 5.0, "since": 1.0, '
                                          '"badput": {"productive": "lots"}}')
    clock = ManualClock()
    meter = BadputMeter()
    writer = ProgressWriter(str(tmp_path), clock, meter=meter)
    writer.finish("done")
    published = read_progress((tmp_path / PROGRESS_FILE).read_text())
    assert published.badput == dict.fromkeys(KEYS, 0.0) and published.since == clock.now
