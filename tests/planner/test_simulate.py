"""The Monte Carlo simulator against the closed form: goodput within 1%, optimum within 5%.

Seeded, vectorised; every configuration runs ~40,000 simulated failures in well under a second.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from elxpk.plan import model
from elxpk.plan.model import FULL_RESTART, PAUSE_RESUME, RESIZE, Costs
from elxpk.plan.simulate import _slot_failures, simulate, simulated_optimum

CONFIGS = {
    # the example: ~97.6% goodput
    "example": Costs(32, 30 * 86400, 2.5, 20, 90, 100),
    # a failure every 22 minutes: ~73% goodput, where first-order formulas are off by 5-13%
    "harsh": Costs(64, 86400, 1.0, 20, 60, 120),
    # slow replacements: resize wins
    "slow-replacement": Costs(16, 2 * 86400, 0.5, 10, 30, 200, 60, 120),
    # few slices, long saves
    "few-slices": Costs(4, 3 * 86400, 4.0, 120, 300, 600, 90, 300),
}
TRIALS = 2000


def _horizon(costs: Costs) -> float:
    return 20 * costs.system_mtbf_s  # ~40,000 failures over all trials


def _check(costs: Costs, shape: float, taus: tuple[float, ...]) -> None:
    points = [(mode, tau) for mode in model.available_modes(costs) for tau in taus]
    results = simulate(costs, points, trials=TRIALS, horizon_s=_horizon(costs), shape=shape, seed=7)
    assert results[0].failures > 30_000
    for (mode, tau), sim in zip(points, results, strict=True):
        analytic = model.goodput(costs, mode, tau)
        assert analytic == pytest.approx(sim.goodput, rel=0.01), (mode, tau, sim)
        if shape == 1.0:  # the model is exact in distribution here: also within 4 standard errors
            assert abs(analytic - sim.goodput) < 4 * sim.stderr + 1e-4, (mode, tau, sim)


@pytest.mark.parametrize("shape", [1.0, 1.5])
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_model_goodput_within_one_percent_of_simulation(name, shape):
    costs = CONFIGS[name]
    opt = model.optimal_tau(costs, PAUSE_RESUME)
    _check(costs, shape, (opt / 4, opt, opt * 4))


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_model_goodput_within_one_percent_at_the_optimum_for_infant_mortality(name):
    # Weibull shape 0.7: a fresh replacement is likelier to fail soon, so failures cluster. At the
    # recommended period the Poisson model still holds to 1%; far above it see the next test.
    costs = CONFIGS[name]
    _check(costs, 0.7, (model.optimal_tau(costs, PAUSE_RESUME),))


def test_model_is_conservative_when_failures_cluster():
    # Shape 0.5, frequent failures, long period: several failures land in one segment and cost one
    # rework, so the simulation beats the model (by ~4% here); the model never promises too much.
    costs = CONFIGS["harsh"]
    tau = 4 * model.optimal_tau(costs, PAUSE_RESUME)
    sim = simulate(costs, [(PAUSE_RESUME, tau)], trials=TRIALS, horizon_s=_horizon(costs), shape=0.5, seed=7)[0]
    assert model.goodput(costs, PAUSE_RESUME, tau) < sim.goodput * 0.98


@pytest.mark.parametrize(
    "name,mode,shape",
    [
        ("example", PAUSE_RESUME, 1.0),
        ("harsh", PAUSE_RESUME, 1.0),
        ("harsh", RESIZE, 1.0),
        ("slow-replacement", RESIZE, 1.0),
        ("few-slices", FULL_RESTART, 1.0),
        ("example", PAUSE_RESUME, 1.5),
        ("harsh", PAUSE_RESUME, 0.7),
    ],
)
def test_recommended_period_within_five_percent_of_simulated_optimum(name, mode, shape):
    costs = CONFIGS[name]
    # Searched around Young/Daly, not around the answer being checked.
    simulated = simulated_optimum(costs, mode, around_tau_s=model.young_daly_tau(costs), trials=TRIALS,
                                  horizon_s=_horizon(costs), shape=shape, seed=11)
    recommended = model.best_period_steps(costs, mode) * costs.step_time_s
    assert recommended == pytest.approx(simulated, rel=0.05)
    assert model.optimal_tau(costs, mode) == pytest.approx(simulated, rel=0.05)


def test_the_one_percent_check_rejects_a_first_order_model():
    # The check has teeth: Young's linearisation, a plausible wrong model, fails it where failures are frequent.
    costs = CONFIGS["harsh"]
    tau = model.optimal_tau(costs, PAUSE_RESUME)
    points = [(FULL_RESTART, tau), (PAUSE_RESUME, tau)]
    results = simulate(costs, points, trials=TRIALS, horizon_s=_horizon(costs), seed=7)
    for (mode, _), sim in zip(points, results, strict=True):
        assert model.first_order_goodput(costs, mode, tau) != pytest.approx(sim.goodput, rel=0.01)
        assert model.goodput(costs, mode, tau) == pytest.approx(sim.goodput, rel=0.01)


@pytest.mark.parametrize("shape", [0.5, 1.0, 2.0])
def test_failure_process_runs_at_the_long_run_rate_from_the_start(shape):
    # Equilibrium start: a fleet of fresh slices would show no failures early for shape > 1 (and a
    # burst for shape < 1); the count in the first tenth of the horizon must already match N/m.
    slices, mtbf, horizon, trials = 8, 1000.0, 5000.0, 4000
    times = _slot_failures(np.random.default_rng(3), trials, slices, mtbf, shape, horizon)
    rate = slices / mtbf
    total = np.isfinite(times).sum() / trials
    early = (times < horizon / 10).sum() / trials
    assert total == pytest.approx(rate * horizon, rel=0.02)
    assert early == pytest.approx(rate * horizon / 10, rel=0.05)
    finite = np.where(np.isfinite(times), times, horizon)
    assert np.all(np.diff(finite, axis=1) >= 0)


def test_simulation_is_reproducible_from_its_seed_and_reports_stderr():
    costs = CONFIGS["example"]
    a = simulate(costs, [(PAUSE_RESUME, 1800.0)], trials=300, horizon_s=1e6, seed=5)[0]
    b = simulate(costs, [(PAUSE_RESUME, 1800.0)], trials=300, horizon_s=1e6, seed=5)[0]
    c = simulate(costs, [(PAUSE_RESUME, 1800.0)], trials=300, horizon_s=1e6, seed=6)[0]
    assert a == b and a.goodput != c.goodput
    assert 0 < a.stderr < 0.01 and not math.isnan(a.stderr)
