"""The simulator's whole-array `_run` gives bitwise the figures of the failure-by-failure loop it replaced.

`reference_run` below is that loop, kept verbatim as the specification (bench/bench_simulate.py times
one against the other). Hypothesis draws failure arrays with inf tails, ties, failures inside the
recovery before them (f < ready), horizons on, before and after every failure, single trials and
empty rows, in one block of rows or several; a second property feeds both the simulator's own failure
arrays from injected seeds.
"""

from __future__ import annotations

import json
import subprocess
import sys
from contextlib import contextmanager

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from elxpk.plan import simulate as simulate_module
from elxpk.plan.model import Costs
from elxpk.plan.simulate import _run, _slot_failures, _weibull_start, check_plan


def reference_run(failures, horizon: float, end: float, tau: float, save: float, rec_len: float, credit: float):
    """The loop `_run` replaced: the whole vector of trials advances one failure (column) at a time."""
    trials = failures.shape[0]
    seg = tau + save
    ready = np.zeros(trials)
    work = np.zeros(trials)
    pending = np.zeros(trials)
    done = np.zeros(trials, dtype=bool)
    b_time = np.zeros(trials)
    b_work = np.zeros(trials)
    for j in range(failures.shape[1]):
        f = failures[:, j]
        live = np.isfinite(f) & ~done
        if not live.any():
            break
        ran = live & (f >= ready)
        finish = ran & (ready >= horizon)
        b_time = np.where(finish, ready, b_time)
        b_work = np.where(finish, work + pending * credit, b_work)
        done |= finish
        live &= ~finish
        ran &= ~finish
        whole = np.floor((f - ready) / seg)
        work += np.where(ran, whole * tau + pending * credit, 0.0)
        pending = np.where(live, 1.0, pending)
        ready = np.where(live, f + rec_len, ready)
    tail = ~done
    elapsed = np.where(tail & (ready < horizon), end - ready, 0.0)
    whole = np.floor(elapsed / seg)
    b_work = np.where(tail, work + pending * credit + whole * tau + np.minimum(elapsed - whole * seg, tau), b_work)
    b_time = np.where(tail, np.where(ready < horizon, end, ready), b_time)
    return b_work, b_time


def reference_slot_failures(rng, trials: int, slots: int, mtbf: float, shape: float, horizon: float):
    """The Weibull branch `_slot_failures` replaced: every slot extended while any falls short, then one sort.
    (Its first draws did not change: _weibull_start.)"""
    times, per_slot, scale = _weibull_start(rng, trials, slots, mtbf, shape, horizon)
    while times[:, :, -1].min() < horizon:
        more = np.cumsum(scale * rng.weibull(shape, size=(trials, slots, per_slot)), axis=2)
        times = np.concatenate([times, times[:, :, -1:] + more], axis=2)
    times = np.sort(times.reshape(trials, -1), axis=1)
    times[times >= horizon] = np.inf
    keep = int(np.isfinite(times).sum(axis=1).max())
    return times[:, :keep]


@contextmanager
def reference_simulator():
    """The simulator as it was: the loop and the extend-everything Weibull draw (the exponential draw
    did not change). For the differential checks here and bench/bench_simulate.py."""
    new_run, new_failures = simulate_module._run, simulate_module._slot_failures

    def failures(rng, trials, slots, mtbf, shape, horizon):
        fn = new_failures if shape == 1.0 else reference_slot_failures
        return fn(rng, trials, slots, mtbf, shape, horizon)

    simulate_module._run, simulate_module._slot_failures = reference_run, failures
    try:
        yield
    finally:
        simulate_module._run, simulate_module._slot_failures = new_run, new_failures


def assert_bitwise_equal(got, want) -> None:
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype == np.float64 and g.shape == w.shape, (g.shape, w.shape)
        assert g.tobytes() == w.tobytes(), (g, w)


# Small integers make ties, f == ready and horizon == ready common; the fractions make rounding matter.
_TIME = st.one_of(st.integers(0, 40).map(float), st.floats(0, 40, allow_nan=False, allow_infinity=False))


@st.composite
def failure_arrays(draw):
    trials = draw(st.integers(1, 5))
    cols = draw(st.integers(0, 10))
    rows = []
    for _ in range(trials):
        finite = draw(st.lists(_TIME, max_size=cols))
        if draw(st.booleans()):
            finite.sort()  # the simulator's rows are sorted; unsorted ones only make f < ready likelier
        rows.append(finite + [np.inf] * (cols - len(finite)))
    return np.array(rows, dtype=np.float64).reshape(trials, cols)


@st.composite
def run_args(draw, failures):
    finite = failures[np.isfinite(failures)]
    rec_len = draw(st.one_of(st.just(0.0), _TIME))
    # The horizon on, just before and just after a failure or a restart, or anywhere.
    marks = sorted({0.0, *finite.tolist(), *(finite + rec_len).tolist()})
    mark = draw(st.sampled_from(marks))
    horizon = draw(st.one_of(st.just(mark), st.just(np.nextafter(mark, -np.inf)), st.just(np.nextafter(mark, np.inf)),
                             _TIME, st.just(1e6)))
    end = horizon + draw(st.floats(0, 100, allow_nan=False))
    tau = draw(st.one_of(st.integers(1, 10).map(float), st.floats(1e-3, 20)))
    save = draw(st.one_of(st.just(0.0), st.integers(0, 5).map(float), st.floats(0, 5)))
    credit = draw(st.one_of(st.just(0.0), _TIME))
    return horizon, end, tau, save, rec_len, credit


@settings(max_examples=500, deadline=None)
@given(st.data())
def test_whole_array_run_is_bitwise_the_loop(data):
    failures = data.draw(failure_arrays())
    args = data.draw(run_args(failures))
    block = data.draw(st.sampled_from([1 << 17, 1, 7, 16]))  # one block, or a few rows at a time
    assert_bitwise_equal(_run(failures, *args, block_floats=block), reference_run(failures, *args))


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), trials=st.integers(1, 40), slots=st.integers(1, 64),
       shape=st.sampled_from([1.0, 0.5, 2.0]), tau=st.floats(10, 5000), rec_len=st.floats(0, 2000))
def test_on_the_simulators_own_failures_it_is_bitwise_the_loop(seed, trials, slots, shape, tau, rec_len):
    mtbf = 86400.0
    horizon = 20 * mtbf / slots
    end = horizon + 12 * mtbf / slots + 3 * rec_len
    failures = _slot_failures(np.random.default_rng(seed), trials, slots, mtbf, shape, end)
    for credit, block in ((0.0, 1 << 17), (0.3 * rec_len, 100)):
        args = (horizon, end, tau, 30.0, rec_len, credit)
        assert_bitwise_equal(_run(failures, *args, block_floats=block), reference_run(failures, *args))


def test_cumsum_adds_in_column_order_like_the_loop():
    """The claim the whole-array form rests on: np.cumsum along a row is the loop's in-order `+=`
    (numpy's pairwise summation applies to reductions like np.sum, not to accumulations)."""
    rng = np.random.default_rng(3)
    values = rng.standard_normal((7, 5000)) * 10.0 ** rng.integers(-8, 9, size=(7, 5000))
    acc = np.zeros(7)
    for j in range(values.shape[1]):
        acc += values[:, j]
    got = np.cumsum(values, axis=1)
    assert got[:, -1].tobytes() == acc.tobytes()
    assert got[:, -1].tobytes() != values.sum(axis=1).tobytes()  # pairwise summation does differ here


@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), trials=st.integers(1, 12), slots=st.integers(1, 300),
       shape=st.sampled_from([0.1, 0.3, 0.7, 1.5, 20.0]), horizon_mtbfs=st.floats(0.01, 5))
def test_weibull_failures_are_bitwise_the_extend_everything_then_sort_ones(seed, trials, slots, shape, horizon_mtbfs):
    mtbf = 1000.0
    args = (trials, slots, mtbf, shape, horizon_mtbfs * mtbf)
    ours, theirs = np.random.default_rng(seed), np.random.default_rng(seed)
    assert_bitwise_equal([_slot_failures(ours, *args)], [reference_slot_failures(theirs, *args)])
    assert ours.random() == theirs.random()  # the stream is left where the next chunk expects it


def test_plan_simulate_prints_the_reference_simulators_figures():
    """`elxpk plan --simulate` as a user runs it (a real process, rows of ~9,000 Weibull failures at shape
    0.3, three chunks of trials), against check_plan on the old simulator in this process: the same
    figures, bit for bit."""
    argv = ["--num-slices", "1000", "--slice-mtbf", "3d", "--step-time", "2.5s", "--checkpoint-save", "5s",
            "--restore", "30s", "--replacement", "60s", "--weibull-shape", "0.3", "--simulate", "130", "--seed", "9"]
    proc = subprocess.run([sys.executable, "-m", "elxpk.cli.main", "plan", *argv, "-o", "json"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    printed = json.loads(proc.stdout)["simulation"]
    with reference_simulator():
        want = check_plan(Costs(1000, 3 * 86400.0, 2.5, 5.0, 30.0, 60.0), printed["points"][0]["checkpoint_period"],
                          trials=130, shape=0.3, seed=9)
    assert printed["failures"] == want["failures"] > 130 * 5_000
    for got, expected in zip(printed["points"], want["points"], strict=True):
        assert got["mode"] == expected["mode"]
        assert got["simulated_goodput"].hex() == expected["simulated_goodput"].hex()  # JSON floats round-trip
        assert got["stderr"].hex() == expected["stderr"].hex()
