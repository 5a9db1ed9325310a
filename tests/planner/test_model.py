"""The closed form: its optimum against independent solvers, its limits, storage arithmetic."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elxpk.plan import model
from elxpk.plan.model import FULL_RESTART, PAUSE_RESUME, RESIZE, Costs
from elxpk.plan.storage import GIB, storage

EXAMPLE = Costs(num_slices=32, slice_mtbf_s=30 * 86400, step_time_s=2.5, save_s=20, restore_s=90, replacement_s=100)
HARSH = Costs(num_slices=64, slice_mtbf_s=86400, step_time_s=1.0, save_s=20, restore_s=60, replacement_s=120)
CONFIGS = [EXAMPLE, HARSH, Costs(4, 7 * 86400, 0.2, 3, 10, 300, 30, 45), Costs(1, 86400, 5, 600, 60, 60)]


def lambert_w0(x: float) -> float:
    """Principal branch of Lambert W on [-1/e, 0) by Halley's iteration (independent of scipy)."""
    w = -0.5 if x > -0.3 else -1.0 + math.sqrt(2 * (1 + math.e * x))
    for _ in range(100):
        ew = math.exp(w)
        f = w * ew - x
        w_next = w - f / (ew * (w + 1) - (w + 2) * f / (2 * w + 2))
        if abs(w_next - w) < 1e-15:
            break
        w = w_next
    return w


@pytest.mark.parametrize("costs", CONFIGS)
def test_exact_optimum_matches_the_lambert_w_closed_form(costs):
    # d/dtau [tau / (e^(lam (tau + C)) - 1)] = 0  <=>  tau = (1 + W0(-e^(-1 - lam C))) / lam; R plays no part.
    lam = costs.failure_rate
    closed = (1 + lambert_w0(-math.exp(-1 - lam * costs.save_s))) / lam
    for mode in (PAUSE_RESUME, FULL_RESTART):
        assert model.optimal_tau(costs, mode) == pytest.approx(closed, rel=1e-6)


@pytest.mark.parametrize("costs", [c for c in CONFIGS if c.num_slices > 1])
def test_resize_optimum_matches_scipy_bounded_minimisation(costs):
    from scipy.optimize import minimize_scalar

    young = model.young_daly_tau(costs)
    res = minimize_scalar(lambda x: -model.goodput(costs, RESIZE, math.exp(x)),
                          bounds=(math.log(young / 20), math.log(young * 20)), method="bounded",
                          options={"xatol": 1e-9})
    assert model.optimal_tau(costs, RESIZE) == pytest.approx(math.exp(res.x), rel=1e-4)


def test_goodput_is_dalys_expected_wall_time_without_degraded_work():
    # Daly (2006), exponential failures: T_wall = M e^(R/M) (e^((tau+C)/M) - 1) * T_solve / tau.
    for costs in CONFIGS:
        m = costs.system_mtbf_s
        for mode in (PAUSE_RESUME, FULL_RESTART):
            r = model.recovery(costs, mode).length_s
            for tau in (30.0, 600.0, 5000.0):
                wall_per_work = m * math.exp(r / m) * math.expm1((tau + costs.save_s) / m) / tau
                assert model.goodput(costs, mode, tau) == pytest.approx(1 / wall_per_work, rel=1e-12)


def test_young_daly_is_the_small_save_limit_of_the_exact_optimum():
    tiny = Costs(8, 365 * 86400, 1.0, 0.5, 10, 10)
    assert model.optimal_tau(tiny, PAUSE_RESUME) == pytest.approx(model.young_daly_tau(tiny), rel=1e-3)
    # With a save that is a sizeable share of the MTBF, first order overshoots (Daly 2006, fig. 3).
    assert model.optimal_tau(HARSH, PAUSE_RESUME) < 0.99 * model.young_daly_tau(HARSH)


@pytest.mark.parametrize("costs", CONFIGS)
def test_best_period_steps_is_the_best_whole_number(costs):
    best = model.best_period_steps(costs, PAUSE_RESUME)
    exact = model.optimal_tau(costs, PAUSE_RESUME) / costs.step_time_s
    scan = range(max(1, int(exact * 0.8)), int(exact * 1.25) + 2)
    brute = max(scan, key=lambda p: model.goodput(costs, PAUSE_RESUME, p * costs.step_time_s))
    assert best == brute


def test_resize_pays_off_only_when_replacement_outlasts_restore_plus_a_save():
    # Per failure, resize trades (replacement + restore) idle for 2 restores + 1 save idle plus
    # (replacement - restore) at 1/N less throughput.
    slow_replacement = Costs(16, 2 * 86400, 0.5, 10, 30, 600)
    fast_replacement = Costs(16, 2 * 86400, 0.5, 10, 30, 40)
    for costs, resize_wins in ((slow_replacement, True), (fast_replacement, False)):
        tau = model.optimal_tau(costs, PAUSE_RESUME)
        assert (model.goodput(costs, RESIZE, tau) > model.goodput(costs, PAUSE_RESUME, tau)) is resize_wins


def test_full_restart_costs_the_image_pull_on_top():
    """Both restarts compile (every attempt does, before its first step); only the full restart pulls the image."""
    pr, fr = model.recovery(EXAMPLE, PAUSE_RESUME), model.recovery(EXAMPLE, FULL_RESTART)
    assert fr.length_s - pr.length_s == EXAMPLE.image_pull_s
    assert model.available_modes(Costs(1, 86400, 1, 1, 1, 1)) == (PAUSE_RESUME, FULL_RESTART)


@settings(max_examples=60, deadline=None)
@given(
    slices=st.integers(1, 4096),
    mtbf_h=st.floats(1, 1e5),
    save=st.floats(0.1, 300),
    restore=st.floats(0, 1000),
    tau=st.floats(1, 1e5),
)
def test_goodput_is_a_fraction_that_falls_with_failure_rate_and_recovery(slices, mtbf_h, save, restore, tau):
    costs = Costs(slices, mtbf_h * 3600, 1.0, save, restore, 100)
    g = model.goodput(costs, PAUSE_RESUME, tau)
    assert 0.0 <= g < 1.0
    worse = Costs(slices, mtbf_h * 3600 / 2, 1.0, save, restore + 10, 100)
    assert model.goodput(worse, PAUSE_RESUME, tau) <= g


def test_storage_is_bounded_by_max_to_keep_and_ttl():
    size = 120 * GIB
    by_count = storage(size_bytes=size, save_interval_s=1800, max_to_keep=5, ttl_s=None, price_per_gib_month=0.02)
    assert (by_count.checkpoints_kept, by_count.gib_kept, by_count.monthly_cost) == (5, 600, 12.0)
    assert by_count.written_gib_per_day == pytest.approx(120 * 48)
    by_ttl = storage(size_bytes=size, save_interval_s=1800, max_to_keep=5, ttl_s=3600, price_per_gib_month=0.02)
    assert by_ttl.checkpoints_kept == 2 and not by_ttl.ttl_can_delete_newest
    keep_all = storage(size_bytes=size, save_interval_s=1800, max_to_keep=0, ttl_s=86400, price_per_gib_month=0.02)
    assert keep_all.checkpoints_kept == 48
    risky = storage(size_bytes=size, save_interval_s=1800, max_to_keep=5, ttl_s=600, price_per_gib_month=0.02)
    assert risky.checkpoints_kept == 1 and risky.ttl_can_delete_newest
    with pytest.raises(ValueError):
        storage(size_bytes=size, save_interval_s=1800, max_to_keep=0, ttl_s=None, price_per_gib_month=0.02)


@settings(max_examples=50, deadline=None)
@given(st.floats(1.0, 900.0), st.floats(0.0, 600.0), st.floats(1.0, 600.0), st.floats(1.0, 1200.0))
def test_every_restart_pays_its_compile_before_its_first_step(compile_s, restore_s, replacement_s, save_s):
    """Each attempt compiles (or loads) its step after its restore, before its first step (the trainer's
    `restore_done` `compile_s`): a pause-and-resume pays it once per failure, a resize twice (onto N-1
    slices, then onto N), as the full restart always did; a longer compile costs goodput in every mode."""
    base = Costs(num_slices=4, slice_mtbf_s=86400.0, step_time_s=1.0, save_s=save_s, restore_s=restore_s,
                 replacement_s=replacement_s, compile_s=0.0)
    slow = Costs(**{**base.__dict__, "compile_s": compile_s})
    assert model.recovery(slow, PAUSE_RESUME).length_s == pytest.approx(
        model.recovery(base, PAUSE_RESUME).length_s + compile_s)
    started = restore_s + compile_s
    assert model.recovery(slow, RESIZE).length_s == pytest.approx(
        2 * started + max(0.0, replacement_s - started) + save_s)
    for mode in (PAUSE_RESUME, RESIZE, FULL_RESTART):
        assert model.goodput(slow, mode, 600.0) < model.goodput(base, mode, 600.0)
