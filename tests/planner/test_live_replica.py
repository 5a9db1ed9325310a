"""`elxpk plan --job-mtbf`: the live-replica mode, where a slice failure rewinds nothing and only
whole-job failures set the checkpoint period (issue 11 item 4)."""

from __future__ import annotations

import json
import math

from elxpk.plan import model
from tests.planner.helpers import run_plan

BASE = ["--num-slices", "4", "--slice-mtbf", "30d", "--step-time", "2.5s", "--checkpoint-save", "20s",
        "--restore", "90s", "--checkpoint-size", "120GiB"]


def _costs(**overrides) -> model.Costs:
    values = dict(num_slices=4, slice_mtbf_s=30 * 86400.0, step_time_s=2.5, save_s=20.0, restore_s=90.0,
                  replacement_s=100.0, job_mtbf_s=180 * 86400.0, reshard_s=10.0)
    values.update(overrides)
    return model.Costs(**values)


def test_live_goodput_is_daly_over_job_failures_times_slice_downtime():
    costs = _costs()
    tau = 3600.0
    lam_job, lam = 1 / costs.job_mtbf_s, 4 / costs.slice_mtbf_s
    restart = costs.replacement_s + costs.image_pull_s + costs.compile_s + costs.restore_s
    daly = lam_job * tau / math.expm1(lam_job * (tau + costs.save_s)) * math.exp(-lam_job * restart)
    expected = daly * math.exp(-lam * (costs.replacement_s + costs.reshard_s))
    assert model.goodput(costs, model.LIVE, tau) == expected
    assert model.recovery(costs, model.LIVE).length_s == costs.replacement_s + costs.reshard_s


def test_slice_failures_do_not_move_the_live_optimum_but_cost_downtime():
    rare, often = _costs(slice_mtbf_s=300 * 86400.0), _costs(slice_mtbf_s=3 * 86400.0)
    assert model.best_period_steps(rare, model.LIVE) == model.best_period_steps(often, model.LIVE)
    tau = model.best_period_steps(rare, model.LIVE) * 2.5
    assert model.goodput(often, model.LIVE, tau) < model.goodput(rare, model.LIVE, tau)
    # Against rewinding recoveries the live period is longer: sqrt(M_job / M_sys) in first order.
    ratio = model.optimal_tau(rare, model.LIVE) / model.optimal_tau(rare, model.PAUSE_RESUME)
    assert ratio > 1


def test_no_job_mtbf_no_live_mode():
    assert model.LIVE not in model.available_modes(_costs(job_mtbf_s=None))
    assert model.planning_mode(_costs(job_mtbf_s=None)) == model.PAUSE_RESUME
    assert model.LIVE not in model.available_modes(_costs(num_slices=1))


def test_plan_recommends_the_live_period_and_shows_the_storage_saved(capsys):
    code, out, err = run_plan([*BASE, "--job-mtbf", "180d", "-o", "json"], capsys)
    assert code == 0, err
    data = json.loads(out)
    costs = _costs()
    assert data["recommended"]["checkpoint_period"] == model.best_period_steps(costs, model.LIVE)
    live = next(m for m in data["modes"] if m["mode"] == model.LIVE)
    assert live["downtime_s"] == 110.0
    saved = data["storage_saved"]
    assert saved["live_checkpoint_period"] == data["recommended"]["checkpoint_period"]
    assert saved["pause_resume_checkpoint_period"] == model.best_period_steps(costs, model.PAUSE_RESUME)
    per_day = saved["saves_per_day"]
    assert saved["written_gib_per_day_saved"] == (per_day["pause_resume"] - per_day["live"]) * 120
    assert saved["written_gib_per_day_saved"] > 0

    code, text, _ = run_plan([*BASE, "--job-mtbf", "180d"], capsys)
    assert code == 0 and "live-replica (no rewind)" in text and "whole-job failures only" in text
    assert "GiB less written/day" in text


def test_bad_job_mtbf_is_one_line_exit_2(capsys):
    code, out, err = run_plan([*BASE, "--job-mtbf", "0s"], capsys)
    assert code == 2 and "--job-mtbf" in err and "Traceback" not in out + err
