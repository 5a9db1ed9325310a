"""The progress record's running totals of where the time went (trainer/elastic/badput_meter.py) are what
`elxpk report` computes from the run directory: on a real run with a lost slice, and across a restarted
process that carries them over. `workload status` splits chip-hours by them, and bills the same interval
as report (the record's started_at and last_record_at are the run records' own times)."""

from __future__ import annotations

import json
import re
import time

import pytest

from elxpk.runs.report import build_report
from elxpk.runs.rundir import load_run
from elxpk_contract.progress_record import PROGRESS_FILE, read_progress
from tests.cluster.conftest import run_cli
from tests.support.clock import ManualClock
from tests.support.runs import tiny_config
from trainer.elastic.badput_meter import KEYS, BadputMeter
from trainer.elastic.progress import ProgressWriter


@pytest.mark.slow  # a real run with a lost slice: two compiles
def test_a_faulted_run_publishes_the_reports_split_and_bills_what_report_bills(tmp_path, fake, k, capsys,
                                                                              monkeypatch):
    from trainer.elastic.loop import train

    cfg = tiny_config(tmp_path, steps=12, checkpoint_period=4, fault=("1@6",), revive_after=0.0)
    train(cfg)
    progress = read_progress((tmp_path / "checkpoints" / PROGRESS_FILE).read_text(encoding="utf-8"))
    run = load_run(tmp_path)
    report = build_report(run)
    b = report.badput
    assert set(progress.badput) == set(KEYS) and progress.since is not None
    assert report.executed > report.steps  # the lost slice rewound steps: the split has something to show
    expected = {"productive": report.productive_s, "rewound": b.rewound_s, "restore": b.restore_s,
                "compile": b.compile_s, "checkpoint": b.checkpoint_s, "waiting": b.waiting_s}
    for key, value in expected.items():
        assert progress.badput[key] == pytest.approx(value, abs=1e-6), key
    # A process's start-up phases are dated before its run_started and bound no session (elxpk/runs/report.py).
    times = [e.time for e in run.events if e.NAME != "startup"]
    assert (progress.started_at, progress.last_record_at) == (min(times), max(times))
    _status_report_and_alert_agree(tmp_path, progress.started_at, progress.last_record_at, fake, k, capsys,
                                   monkeypatch)


def _status_report_and_alert_agree(run_dir, started, ended, fake, k, capsys, monkeypatch) -> None:
    """The run as the captured `ops` workload's (2 slices of v5litepod-16, succeeded; tests/cluster/captured.py),
    created a minute before the trainer started and Completed half a minute after it ended: `status` (twice,
    a while apart), `report --accelerator v5litepod-16` and the `succeeded` alert state one figure, to the
    digit shown, billed from the trainer's first start to its end, the queueing and the wait for the JobSet's
    condition left out."""
    from tests.cluster.captured import KINDS, OPS, load_captured, with_checkpoint_dir
    from tests.support.webhook_server import webhook

    monkeypatch.setenv("COLUMNS", "250")
    jobset = with_checkpoint_dir(load_captured(fake, "succeeded"), run_dir / "checkpoints")["jobset"]
    jobset["metadata"]["creationTimestamp"] = _rfc3339(started - 60)
    for condition in jobset["status"]["conditions"]:
        condition["lastTransitionTime"] = _rfc3339(ended + 30)
    fake.store.put(KINDS["jobset"], jobset)
    figures, spent = [], []
    for argv in (("workload", "status", OPS, *k), ("report", str(run_dir), "--accelerator", "v5litepod-16",
                                                      "--no-png")):
        code, out, err = run_cli(capsys, *argv, "-o", "json")
        assert code == 0, err
        spent.append(json.loads(out)["chip_hours"])
        time.sleep(0.2)  # the second look is later: a finished run's figure does not grow
        code, out, err = run_cli(capsys, *argv)
        assert code == 0, err
        figures.append(re.search(r"chip-hours: ([\d.,]+) spent", out).group(1))
    with webhook(["200"]) as hook:
        code, out, err = run_cli(capsys, "workload", "events", OPS, "--watch", "--notify", hook.url,
                                 "--notify-format", "json", "--notify-on", "succeeded", *k)
    assert code == 0, err
    (body,) = [json.loads(b) for _, b in hook.bodies]
    figures.append(re.search(r"([\d.,]+) chip-hours spent \(2 slices x 16 chips of v5litepod-16, [\d.]+[dhms][\dhms]* from the "
                             r"trainer's start to its end\)", json.dumps(body)).group(1))
    assert figures[0] == figures[1] == figures[2], figures
    status_cost, report_cost = spent
    assert status_cost["wall_s"] == report_cost["wall_s"] == ended - started
    assert status_cost["spent"] == report_cost["spent"] and status_cost["money"]["spent"] == report_cost["money"]["spent"]
    assert status_cost["billed"] == report_cost["billed"] and "queueing not billed" in status_cost["billed"]


def _rfc3339(unix: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(unix))


def test_a_restarted_process_carries_the_totals_and_counts_redone_steps_as_rewound(tmp_path):
    clock = ManualClock()
    first_meter = BadputMeter()
    first = ProgressWriter(str(tmp_path), clock, meter=first_meter)
    first_meter.observe("event", {"event": "run_started", "time": clock.now + 1.5})
    for step in range(10):
        first_meter.observe("metric", {"step": step, "step_time_s": 2.0})
    first.step_done(10, at=clock.now, attempt=1)
    since = read_progress((tmp_path / PROGRESS_FILE).read_text()).since
    clock.now += 100
    second_meter = BadputMeter()
    second = ProgressWriter(str(tmp_path), clock, meter=second_meter)  # the pod restarted; steps 8, 9 redone
    for event in ({"event": "run_started", "time": clock.now + 2.0}, {"event": "restore_done", "time": clock.now + 9}):
        second_meter.observe("event", event)
    for step in range(8, 12):
        second_meter.observe("metric", {"step": step, "step_time_s": 2.0})
    second.step_done(12, at=clock.now, attempt=1)
    published = read_progress((tmp_path / PROGRESS_FILE).read_text())
    assert published.since == since  # the totals span both processes
    # the billed interval too: from the first process's run_started to the second's newest event
    assert (published.started_at, published.last_record_at) == (since + 1.5, clock.now + 9)
    second.finish("done", exit_code=0)
    clock.now += 3600  # a clean finish ends the billed stretch: the next process (more --steps) begins its own
    third_meter = BadputMeter()
    third = ProgressWriter(str(tmp_path), clock, meter=third_meter)
    third_meter.observe("event", {"event": "run_started", "time": clock.now + 0.5})
    third.step_done(13, at=clock.now + 1, attempt=1)
    published = read_progress((tmp_path / PROGRESS_FILE).read_text())
    assert (published.started_at, published.last_record_at) == (clock.now + 0.5, clock.now + 0.5)
    assert published.since == since and published.badput["productive"] == 12 * 2.0
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
