"""Monte Carlo of a checkpointed job under per-slice failures: the check on the closed form.

Each of N slice positions fails as its own renewal process: exponential (shape 1) or Weibull lifetimes
with the given mean, started in equilibrium so the job sees the long-run rate N/m from t = 0. A failed
slice's replacement starts a fresh lifetime at the failure. The job then runs from failure to failure:
every trial's every failure is evaluated at once (numpy, see _run), so a trial costs one pass over its
failures, not over its segments.

The recovery semantics are the model's (a recovery is a fixed phase that starts again on a failure);
what the simulation checks is everything else: the failure process, rework and the expectation algebra.
All periods and modes are evaluated on the same failure times (common random numbers), which makes
differences between periods far less noisy than the goodputs themselves.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from elxpk.plan.model import LIVE, Costs, available_modes, goodput, recovery

# Trials per chunk are chosen so one chunk's failure array stays near this many floats (memory bound).
_CHUNK_FLOATS = 4_000_000
# The work bounds (docs/planner.md): the cost is the failures simulated. One trial's failures are one
# chunk's minimum (its memory); all trials' together are the whole run's time. Beyond either, `plan`
# refuses before simulating (exit 2).
MAX_FAILURES_PER_TRIAL = 100_000
MAX_FAILURES = 20_000_000
# _end_state works on blocks of about this many failure times (1 MiB): its temporaries' bound.
_BLOCK_FLOATS = 1 << 17


def horizon_s(costs: Costs) -> float:
    """The simulated span of one trial: four weeks, or 50 system MTBFs when that is longer."""
    return max(28 * 86400.0, 50.0 * costs.system_mtbf_s)


def size_problem(costs: Costs, trials: int) -> str | None:
    """Why `--simulate trials` on `costs` is too large to run (one line naming the flags), or None.
    The failures are counted as the simulator generates them: N slices x (horizon + its tail) / slice MTBF."""
    if trials <= 0:
        return None
    span = horizon_s(costs) + 12.0 * costs.system_mtbf_s
    per_trial = costs.num_slices * span / costs.slice_mtbf_s
    total = per_trial * trials
    if per_trial > MAX_FAILURES_PER_TRIAL:
        return (f"--simulate: each trial would simulate about {per_trial:,.0f} failures (--num-slices "
                f"{costs.num_slices} x {span / 86400:,.1f} days / --slice-mtbf), above the bound of "
                f"{MAX_FAILURES_PER_TRIAL:,}; lower --num-slices or raise --slice-mtbf for the check, or drop --simulate")
    if total > MAX_FAILURES:
        fits = max(1, int(MAX_FAILURES // per_trial))
        return (f"--simulate {trials}: about {total:,.0f} failures to simulate (--simulate x --num-slices "
                f"{costs.num_slices} x {span / 86400:,.1f} days / --slice-mtbf), above the bound of {MAX_FAILURES:,}; "
                f"use --simulate {fits} or fewer")
    return None


class _Moments:
    """Running count, means and co-moments of (work, time) per trial, merged chunk by chunk (Chan et al.),
    so memory does not grow with the number of trials and no sum of squares cancels catastrophically."""

    def __init__(self) -> None:
        self.n, self.mw, self.mt, self.cww, self.ctt, self.cwt = 0, 0.0, 0.0, 0.0, 0.0, 0.0

    def add(self, w, t) -> None:
        n_b = len(w)
        if n_b == 0:
            return
        mw_b, mt_b = float(w.mean()), float(t.mean())
        dw, dt = w - mw_b, t - mt_b
        cww_b, ctt_b, cwt_b = float((dw * dw).sum()), float((dt * dt).sum()), float((dw * dt).sum())
        n = self.n + n_b
        delta_w, delta_t = mw_b - self.mw, mt_b - self.mt
        scale = self.n * n_b / n
        self.cww += cww_b + delta_w * delta_w * scale
        self.ctt += ctt_b + delta_t * delta_t * scale
        self.cwt += cwt_b + delta_w * delta_t * scale
        self.mw += delta_w * n_b / n
        self.mt += delta_t * n_b / n
        self.n = n

    def goodput_and_stderr(self) -> tuple[float, float]:
        g = self.mw / self.mt
        if self.n < 2:
            return g, math.nan
        # Ratio estimator, delta method: the variance of w - g t over trials.
        var = max(0.0, (self.cww - 2.0 * g * self.cwt + g * g * self.ctt) / (self.n - 1))
        return g, math.sqrt(var / self.n) / self.mt


@dataclass(frozen=True)
class SimResult:
    mode: str
    tau_s: float
    goodput: float
    stderr: float  # standard error of the goodput over trials
    trials: int
    failures: int  # failures simulated, all trials together


def _slot_failures(rng, trials: int, slots: int, mtbf: float, shape: float, horizon: float):
    """Sorted failure times of `trials` jobs with `slots` renewal processes each, inf beyond horizon."""
    import numpy as np

    if shape == 1.0:
        # Superposed exponential slots are one Poisson process of rate slots/mtbf (memoryless start).
        rate = slots / mtbf
        cols = int(rate * horizon + 6.0 * math.sqrt(rate * horizon) + 10)
        times = np.cumsum(rng.exponential(1.0 / rate, size=(trials, cols)), axis=1)
        while times[:, -1].min() < horizon:
            more = np.cumsum(rng.exponential(1.0 / rate, size=(trials, cols)), axis=1)
            times = np.concatenate([times, times[:, -1:] + more], axis=1)
    else:
        times, per_slot, scale = _weibull_start(rng, trials, slots, mtbf, shape, horizon)
        more = _extend_short_slots(rng, times, per_slot, scale, shape, horizon)
        times = np.sort(np.concatenate([times.reshape(trials, -1), more], axis=1), axis=1)
    times[times >= horizon] = np.inf
    keep = int(np.isfinite(times).sum(axis=1).max())
    return times[:, :keep]


def _weibull_start(rng, trials: int, slots: int, mtbf: float, shape: float, horizon: float):
    """Each slot's first failures, (trials, slots, per_slot + 1) cumulative times, with per_slot and the
    Weibull scale: enough for most slots to pass `horizon`."""
    import numpy as np

    scale = mtbf / math.gamma(1.0 + 1.0 / shape)
    per_slot = int(horizon / mtbf + 6.0 * math.sqrt(horizon / mtbf) + 4)
    # Equilibrium start: the lifetime in progress at t = 0 is length-biased, i.e.
    # ((X/scale)^shape ~ Gamma(1 + 1/shape)), and t = 0 falls uniformly inside it.
    first = scale * rng.gamma(1.0 + 1.0 / shape, size=(trials, slots, 1)) ** (1.0 / shape)
    first *= rng.random(size=(trials, slots, 1))
    rest = scale * rng.weibull(shape, size=(trials, slots, per_slot))
    return np.cumsum(np.concatenate([first, rest], axis=2), axis=2), per_slot, scale


def _extend_short_slots(rng, times, per_slot: int, scale: float, shape: float, horizon: float):
    """Per trial, the failures before `horizon` of the lifetimes drawn while any slot falls short of it
    (one row per trial, inf-padded).

    Every round draws lifetimes for every slot, as the random stream (and so every figure) was defined,
    but only the slots still short of the horizon are added up and kept: at a small shape a handful of
    slots need dozens of rounds, and the others' extra failures would all land beyond the horizon."""
    import numpy as np

    trials, slots, _ = times.shape
    found_trial, found_time = [], []
    last = times[:, :, -1].copy()
    short = np.nonzero(last < horizon)
    while len(short[0]):
        drawn = rng.weibull(shape, size=(trials, slots, per_slot))
        more = last[short][:, None] + np.cumsum(scale * drawn[short], axis=1)
        below = more < horizon
        found_trial.append(np.broadcast_to(short[0][:, None], more.shape)[below])
        found_time.append(more[below])
        last[short] = more[:, -1]
        short = tuple(axis[more[:, -1] < horizon] for axis in short)
    trial = np.concatenate([np.zeros(0, dtype=np.intp), *found_trial])
    counts = np.bincount(trial, minlength=trials)
    out = np.full((trials, int(counts.max())), np.inf)
    order = np.argsort(trial, kind="stable")
    trial = trial[order]
    out[trial, np.arange(len(trial)) - (np.cumsum(counts) - counts)[trial]] = np.concatenate([[], *found_time])[order]
    return out


def _run(failures, horizon: float, end: float, tau: float, save: float, rec_len: float, credit: float,
         block_floats: int = _BLOCK_FLOATS):
    """Per trial: (work, time) up to the end of the cycle in progress at `horizon`.

    A cycle runs from one restart at full speed to the next. Cutting the run at a fixed time would bias
    the estimate by the fresh start at t = 0 (~1/horizon); ending instead at the first cycle boundary
    at or after `horizon` makes the number of cycles a stopping time, so sum(work) / sum(time) is the
    renewal-reward estimate of the long-run goodput. Failures are generated up to `end` > horizon.
    """
    import numpy as np

    seg = tau + save
    done, ready, work, pending = _end_state(failures, horizon, tau, seg, rec_len, credit, block_floats)
    # No failure after the last restart before `end`: its recovery completed, so `ready` is the boundary.
    # (When `ready` < horizon the trial ran failure-free to `end`; count that run as one long cycle.)
    tail = ~done
    elapsed = np.where(tail & (ready < horizon), end - ready, 0.0)
    whole = np.floor(elapsed / seg)
    b_work = np.where(tail, work + pending * credit + whole * tau + np.minimum(elapsed - whole * seg, tau),
                      work + pending * credit)
    b_time = np.where(tail, np.where(ready < horizon, end, ready), ready)
    return b_work, b_time


def _end_state(failures, horizon: float, tau: float, seg: float, rec_len: float, credit: float, block_floats: int):
    """Per trial: whether a cycle boundary at or after `horizon` ended it (done), and at that boundary, or
    else after its last failure, the last restart (ready), the work committed before it, and whether the
    recovery ending there has its own work to credit (pending, 0 or 1).

    Each row holds a trial's failures, finite ones first, then an inf tail (what _slot_failures gives).
    Every failure restarts the recovery, so before failure j the job was last (re)started at
    ready_j = f_{j-1} + rec_len (0 before the first), with the recovery's work pending from j = 1: every
    column's state is known without walking the row, and the whole (trials x columns) array is evaluated
    at once. The work is summed along the row with np.cumsum, which adds in column order, so the figures
    are bitwise those of a failure-by-failure loop (tests/planner/test_simulate_vectorized.py keeps it).
    Memory: one float and a few boolean temporaries of a block's size."""
    import numpy as np

    trials, cols = failures.shape
    state = np.zeros(trials, dtype=bool), np.zeros(trials), np.zeros(trials), np.zeros(trials)
    if cols == 0:
        return state
    # A block of rows at a time: the temporaries stay a block's size whatever the chunk's, and a block's
    # dozen passes run within the core's cache.
    rows = max(1, block_floats // cols)
    for r in range(0, trials, rows):
        for out, value in zip(state, _block_end_state(failures[r:r + rows], horizon, tau, seg, rec_len, credit),
                              strict=True):
            out[r:r + rows] = value
    return state


def _block_end_state(failures, horizon: float, tau: float, seg: float, rec_len: float, credit: float):
    """_end_state of one block of rows."""
    import numpy as np

    trials = failures.shape[0]
    live = np.isfinite(failures)
    n_live = live.sum(axis=1)
    step = np.empty_like(failures)  # ready_j first, then the work each failure credits, then their sums
    step[:, 0] = 0.0
    np.add(failures[:, :-1], rec_len, out=step[:, 1:])
    ran = live & (failures >= step)  # the recovery before completed: ready_j is a cycle boundary
    del live
    finish = ran & (step >= horizon)  # the first such boundary at or after the horizon ends the trial
    ran &= ~finish
    rows = np.arange(trials)
    first = finish.argmax(axis=1)
    done = finish[rows, first]
    del finish
    with np.errstate(invalid="ignore"):  # inf - inf past a row's last failure; masked out below
        np.subtract(failures, step, out=step)
    step /= seg
    np.floor(step, out=step)
    step *= tau
    step[:, 0] += 0.0 * credit  # the loop's pending * credit: 0 * credit first, then 1.0 * credit == credit
    step[:, 1:] += credit
    step[~ran] = 0.0
    del ran
    step[:, 0] += 0.0  # the loop's sum starts from +0.0
    np.cumsum(step, axis=1, out=step)
    # Failures seen before the state: those before the finishing one, or all. The finishing column
    # credits nothing, so the sum through it is the sum before it.
    seen = np.where(done, first, n_live)
    work = np.where(seen > 0, step[rows, np.maximum(np.where(done, first, n_live - 1), 0)], 0.0)
    ready = np.where(seen > 0, failures[rows, np.maximum(seen - 1, 0)] + rec_len, 0.0)
    pending = np.where(seen > 0, 1.0, 0.0)
    return done, ready, work, pending


def simulate(
    costs: Costs,
    points: list[tuple[str, float]],
    *,
    trials: int,
    horizon_s: float,
    shape: float = 1.0,
    seed: int = 0,
) -> list[SimResult]:
    """Simulated goodput at each (mode, tau_s) point, all on the same failure times."""
    import numpy as np

    rng = np.random.default_rng(seed)
    recs = {mode: recovery(costs, mode) for mode in {m for m, _ in points}}
    # Room for the cycle in progress at the horizon to end: a failure (12 MTBFs leave e^-12 per trial
    # without one), then its recovery.
    end = horizon_s + 12.0 * costs.system_mtbf_s + 3.0 * max(r.length_s for r in recs.values())
    if shape == 1.0:
        width = costs.failure_rate * end + 6.0 * math.sqrt(costs.failure_rate * end) + 10
    else:
        per_slot = end / costs.slice_mtbf_s + 6.0 * math.sqrt(end / costs.slice_mtbf_s) + 5
        width = 2 * costs.num_slices * per_slot  # the unsorted array and its sorted copy
    chunk = max(1, min(trials, int(_CHUNK_FLOATS / width)))
    moments = [_Moments() for _ in points]
    n_failures = 0
    done = 0
    while done < trials:
        size = min(chunk, trials - done)
        failures = _slot_failures(rng, size, costs.num_slices, costs.slice_mtbf_s, shape, end)
        n_failures += int((failures < horizon_s).sum())
        for i, (mode, tau) in enumerate(points):
            rec = recs[mode]
            credit = rec.credited_work_s(tau, costs.save_s)
            w, t = _run(failures, horizon_s, end, tau, costs.save_s, rec.length_s, credit)
            moments[i].add(w, t)
        done += size
    out = []
    for (mode, tau), m in zip(points, moments, strict=True):
        g, stderr = m.goodput_and_stderr()
        out.append(SimResult(mode, tau, g, stderr, trials, n_failures))
    return out


def simulated_optimum(
    costs: Costs,
    mode: str,
    *,
    around_tau_s: float,
    trials: int,
    horizon_s: float,
    shape: float = 1.0,
    seed: int = 0,
    points: int = 13,
    span: float = 3.0,
) -> float:
    """The tau with the highest simulated goodput: a log grid over [around/span, around*span], then
    a quadratic fit in ln(tau) through the best grid point and its neighbours (the curve is flat near
    the top, so the raw argmax alone is only as fine as the grid)."""
    import numpy as np

    grid = np.exp(np.linspace(math.log(around_tau_s / span), math.log(around_tau_s * span), points))
    results = simulate(costs, [(mode, float(t)) for t in grid], trials=trials, horizon_s=horizon_s,
                       shape=shape, seed=seed)
    g = np.array([r.goodput for r in results])
    best = int(np.argmax(g))
    lo, hi = max(0, best - 3), min(points, best + 4)
    x = np.log(grid[lo:hi])
    a, b, _ = np.polyfit(x, g[lo:hi], 2)
    if a >= 0:  # no curvature to fit: fall back to the grid point
        return float(grid[best])
    vertex = -b / (2 * a)
    return float(math.exp(min(max(vertex, x[0]), x[-1])))


def check_plan(costs: Costs, period_steps: int, *, trials: int, shape: float, seed: int) -> dict:
    """`elxpk plan --simulate`: the model's goodput beside the simulated one, at `period_steps`."""

    horizon = horizon_s(costs)
    tau = period_steps * costs.step_time_s
    modes = tuple(m for m in available_modes(costs) if m != LIVE)  # the simulator rewinds every failure
    results = simulate(costs, [(m, tau) for m in modes], trials=trials, horizon_s=horizon, shape=shape, seed=seed)
    points = []
    for r in results:
        analytic = goodput(costs, r.mode, tau)
        points.append({
            "mode": r.mode,
            "checkpoint_period": period_steps,
            "model_goodput": analytic,
            "simulated_goodput": r.goodput,
            "stderr": r.stderr,
            "relative_difference": (analytic - r.goodput) / r.goodput if r.goodput else None,
        })
    return {
        "trials": trials,
        "horizon_s": horizon,
        "distribution": "exponential" if shape == 1.0 else f"Weibull shape {shape:g}",
        "seed": seed,
        "failures": results[0].failures if results else 0,
        "points": points,
    }
