"""Elasticity settings: min slice count by mode, timeout, and a retry budget for the whole job."""

from __future__ import annotations

import json

import pytest

from elxpk.plan import model
from elxpk.plan.elastic import elastic_settings, poisson_quantile
from elxpk.plan.model import Costs

from .helpers import EXAMPLE, run_plan


@pytest.mark.parametrize("mean", [0.3, 4.0, 32.0, 250.0, 2000.0])
def test_poisson_quantile_matches_scipy(mean):
    from scipy.stats import poisson

    expected = int(poisson.ppf(0.999, mean))
    got = poisson_quantile(mean, 0.999)
    if mean <= 500:
        assert got == expected
    else:  # normal approximation
        assert got == pytest.approx(expected, abs=3)


def test_pause_resume_by_default_resize_when_replacements_are_slow():
    fast = Costs(32, 30 * 86400, 2.5, 20, 90, 100)
    slow = Costs(32, 30 * 86400, 2.5, 20, 90, 900)
    a = elastic_settings(fast, model.best_period_steps(fast, model.PAUSE_RESUME), 30 * 86400)
    b = elastic_settings(slow, model.best_period_steps(slow, model.PAUSE_RESUME), 30 * 86400)
    assert (a.mode, a.elastic_min_slice_count, a.elastic_timeout_seconds) == ("pause-resume", -1, 300)
    assert (b.mode, b.elastic_min_slice_count, b.elastic_timeout_seconds) == ("resize", 31, 2700)
    assert a.expected_failures == pytest.approx(32)
    assert a.elastic_max_retries == poisson_quantile(32, 0.999) + 1
    assert a.default_retries_last_s == pytest.approx(9 / fast.failure_rate)


def test_plan_warns_when_the_default_retry_budget_ends_before_the_job(capsys):
    code, out, _ = run_plan([*EXAMPLE, "-o", "json"], capsys)
    data = json.loads(out)
    assert code == 0 and data["elasticity"]["elastic_max_retries"] > 10
    assert any("elastic_max_retries" in w for w in data["warnings"])

    code, out, _ = run_plan([*EXAMPLE, "-o", "json", "--job-duration", "2d"], capsys)
    data = json.loads(out)
    assert data["elasticity"]["elastic_max_retries"] <= 10
    assert not any("elastic_max_retries" in w for w in data["warnings"])


def test_bad_job_duration(capsys):
    code, _, err = run_plan([*EXAMPLE, "--job-duration", "0d"], capsys)
    assert code == 2 and err.startswith("error: --job-duration")
