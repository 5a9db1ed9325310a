"""`plan --simulate` is bounded: memory does not grow with the trials, and a simulation whose failures
(trials x slices x horizon / slice MTBF) exceed the stated bounds is refused up front with one line (exit 2)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elxpk.plan.model import Costs
from elxpk.plan.simulate import MAX_FAILURES, MAX_FAILURES_PER_TRIAL, _Moments, size_problem
from tests.planner.helpers import run_plan

BASE = ["--step-time", "2.5s", "--checkpoint-save", "5s", "--restore", "30s", "--replacement", "60s"]


def test_the_issue_case_is_refused_naming_the_flags_and_the_largest_that_fits(capsys):
    code, out, err = run_plan(["--num-slices", "10000", "--slice-mtbf", "10d", *BASE, "--simulate", "100000"], capsys)
    assert code == 2 and out == ""
    (line,) = err.strip().splitlines()
    assert line.startswith("error: --simulate 100000: about ") and "--num-slices 10000" in line
    assert line.endswith("use --simulate 713 or fewer")
    code, _, _ = run_plan(["--num-slices", "10000", "--slice-mtbf", "10d", *BASE, "--simulate", "713"], capsys)
    assert code == 0  # the figure it names does run


def test_one_trial_too_large_is_refused_naming_the_slices_and_mtbf(capsys):
    code, _, err = run_plan(["--num-slices", "10000", "--slice-mtbf", "1d", *BASE, "--simulate", "1"], capsys)
    assert code == 2 and "each trial would simulate about" in err and "--slice-mtbf" in err


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 100_000), st.floats(3600, 1e9), st.integers(0, 100_000))
def test_whatever_is_accepted_is_within_both_bounds(slices, mtbf, trials):
    costs = Costs(slices, mtbf, 2.5, 5, 30, 60)
    if size_problem(costs, trials) is None and trials:
        from elxpk.plan.simulate import horizon_s

        per_trial = slices * (horizon_s(costs) + 12 * costs.system_mtbf_s) / mtbf
        assert per_trial <= MAX_FAILURES_PER_TRIAL and per_trial * trials <= MAX_FAILURES


@given(st.lists(st.tuples(st.floats(0, 1e7), st.floats(1, 1e7)), min_size=2, max_size=60), st.integers(1, 7))
def test_streamed_moments_equal_the_whole_array_ones(pairs, chunk):
    w, t = np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])
    m = _Moments()
    for i in range(0, len(pairs), chunk):
        m.add(w[i:i + chunk], t[i:i + chunk])
    g, stderr = m.goodput_and_stderr()
    g_all = w.sum() / t.sum()
    resid = w - g_all * t
    assert np.isclose(g, g_all, rtol=1e-9)
    # The co-moment form cancels where work and time are almost exactly proportional: hold it to the scale
    # of the terms it subtracts, not to the (tiny) difference.
    scale = (w.std() + g_all * t.std()) / np.sqrt(len(w)) / t.mean()
    assert np.isclose(stderr, np.sqrt(resid.var(ddof=1) / len(w)) / t.mean(), rtol=1e-6, atol=1e-6 * scale + 1e-12)


# The fifth pass: extreme values of each flag alone and together, each one line (exit 2) or a plan.
REFUSED = [
    (["--weibull-shape", "1e-300"], "--weibull-shape"), (["--weibull-shape", "1e300"], "--weibull-shape"),
    (["--weibull-shape", "0.0001", "--simulate", "100"], "--weibull-shape"),
    (["--weibull-shape", "-1"], "--weibull-shape"), (["--weibull-shape", "nan"], "not a finite number"),
    (["--job-mtbf", "1ms"], "--job-mtbf"), (["--job-mtbf", "1e-300s"], "--job-mtbf"),
    (["--slice-mtbf", "1e-9s"], "--slice-mtbf"),
    (["--num-slices", "2147483647", "--simulate", "1"], "--num-slices"),
    (["--num-slices", "100000", "--slice-mtbf", "1s", "--simulate", "1"], "--slice-mtbf"),
]


def test_fifth_pass_extremes_are_one_line_each(capsys):
    for extra, names in REFUSED:
        given = {a for a in extra if a.startswith("--")}
        argv = [*(["--num-slices", "4"] if "--num-slices" not in given else []),
                *(["--slice-mtbf", "30d"] if "--slice-mtbf" not in given else []), *BASE, *extra]
        code, out, err = run_plan(argv, capsys)
        assert code == 2 and out == "", (extra, err)
        assert all(line.startswith("error: ") for line in err.strip().splitlines()), err
        assert names in err, (extra, err)


@pytest.mark.slow  # 100,000 slices simulated at Weibull shape 0.1: about 5 CPU s, mostly its lifetime draws
def test_fifth_pass_extremes_within_the_bounds_run(capsys):
    for extra in (["--num-slices", "100000", "--slice-mtbf", "30d", "--simulate", "10", "--weibull-shape", "0.1"],
                  ["--num-slices", "4", "--slice-mtbf", "30d", "--weibull-shape", "20", "--simulate", "1000"],
                  ["--num-slices", "4", "--slice-mtbf", "30d", "--job-mtbf", "6s", "--weibull-shape", "0.1",
                   "--simulate", "100"]):
        code, out, err = run_plan([*BASE, *extra], capsys)
        assert code == 0 and "checkpoint_period" in out, (extra, err)
