"""Closed-form expected goodput of a checkpointed job under slice failures, for three recovery modes.

The model (docs/planner.md derives it):
- N slices each fail with mean time between failures m; the job sees failures at rate lam = N/m
  (a Poisson process: exact for exponential slices, the many-slice limit otherwise).
- The job alternates a compute segment of tau = checkpoint_period x step_time seconds with a blocking
  save of C seconds. A failure anywhere in the segment or the save loses the whole segment.
- A failure starts a recovery of fixed length R. A failure during the recovery starts it again
  (a second slice lost while waiting has to be replaced too). A resize recovery also runs degraded
  on N-1 slices part of the time; that work counts only once the recovery completes.

Renewal-reward over one cycle (fresh start -> failure -> recovery complete) gives, exactly:
    goodput = lam * (tau / (exp(lam*(tau+C)) - 1) + W_rec) * exp(-lam*R)
with W_rec the work the recovery itself does (0 except for resize). For W_rec = 0 this is Daly's
(2006) exact expected wall time M e^(R/M) (e^((tau+C)/M) - 1) / tau per unit of work.

Live-replica recovery (trainer/elastic/live_recovery.py, `--recovery live`) splits the failures in two. A slice
failure (rate lam = N/m) rewinds nothing: it costs only its recovery, the wait for the replacement slice
plus the reshard (R_s), as pure downtime, so it scales goodput by exp(-lam*R_s) whatever the checkpoint
period. A whole-job failure (every slice, or the controller; rate 1/M_job, the separate --job-mtbf) still
costs a full restart and the rewind, so it alone sets the checkpoint period:
    goodput_live = daly(1/M_job, tau, C, R_job) * exp(-lam*R_s)
with daly() the formula above (W_rec = 0) and R_job the full restart. The two processes are taken as
independent (a slice failure during a job restart is not counted twice: that overlap is second order).

Pure Python (math only): `elxpk workload create` imports this through hint.py at start-up.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

PAUSE_RESUME = "pause-resume"
RESIZE = "resize"
FULL_RESTART = "full-restart"
LIVE = "live-replica"
MODES = (PAUSE_RESUME, RESIZE, FULL_RESTART)

MODE_TITLES = {
    PAUSE_RESUME: "elastic pause-and-resume",
    RESIZE: "elastic resize",
    FULL_RESTART: "non-elastic full restart",
    LIVE: "live-replica (no rewind)",
}


@dataclass(frozen=True)
class Costs:
    """What one failure and one checkpoint cost, and how often failures come. All times in seconds."""

    num_slices: int
    slice_mtbf_s: float
    step_time_s: float
    save_s: float
    restore_s: float
    replacement_s: float
    image_pull_s: float = 60.0
    compile_s: float = 120.0
    job_mtbf_s: float | None = None  # whole-job failures (live-replica mode only; None: that mode is not shown)
    reshard_s: float = 10.0  # live-replica: rebuilding the state from the survivors onto the new mesh

    @property
    def job_failure_rate(self) -> float:
        return 0.0 if self.job_mtbf_s is None else 1.0 / self.job_mtbf_s

    @property
    def failure_rate(self) -> float:
        """Failures per second of the whole job (N slices)."""
        return self.num_slices / self.slice_mtbf_s

    @property
    def system_mtbf_s(self) -> float:
        return self.slice_mtbf_s / self.num_slices


@dataclass(frozen=True)
class RecoveryCosts:
    """One recovery: `length_s` until full-speed training resumes; `degraded_s` of it on N-1 slices."""

    mode: str
    length_s: float
    degraded_s: float = 0.0
    degraded_rate: float = 0.0

    def credited_work_s(self, tau_s: float, save_s: float) -> float:
        """Full-speed seconds of work the degraded phase contributes (its periodic saves still block)."""
        if self.degraded_s <= 0.0:
            return 0.0
        return self.degraded_rate * self.degraded_s * tau_s / (tau_s + save_s)


def recovery(costs: Costs, mode: str) -> RecoveryCosts:
    """The recovery of each mode, as fixed phases.

    Every attempt compiles its step for its mesh (or loads it from the executable store or jax's cache)
    ahead of its first step, after its restore (the run's `restore_done` `compile_s` is the part that
    outlasts the restore): `compile_s` is paid by each restart, not by the full restart alone.

    - pause-resume: wait for the replacement slice, then restore and compile in the same process.
    - resize: restore and compile at once onto N-1 slices, run degraded until the replacement arrives, then
      scale up: one save at the current step, one restore and compile onto N slices.
    - full-restart: the JobSet restarts every pod: replacement scheduling, image pull, compile, restore.
    """
    start = costs.restore_s + costs.compile_s  # an attempt's restore, then its compile, to its first step
    if mode == PAUSE_RESUME:
        return RecoveryCosts(mode, costs.replacement_s + start)
    if mode == RESIZE:
        if costs.num_slices < 2:
            raise ValueError("resize needs at least 2 slices")
        degraded = max(0.0, costs.replacement_s - start)
        length = start + degraded + costs.save_s + start
        return RecoveryCosts(mode, length, degraded, (costs.num_slices - 1) / costs.num_slices)
    if mode == FULL_RESTART:
        return RecoveryCosts(
            mode, costs.replacement_s + costs.image_pull_s + costs.compile_s + costs.restore_s
        )
    if mode == LIVE:  # a slice failure: wait for the slice, reshard; no restore, no rewind, and no compile:
        # the same process trains on the same mesh again, so its step is reused (docs/planner.md)
        return RecoveryCosts(mode, costs.replacement_s + costs.reshard_s)
    raise ValueError(f"unknown mode {mode!r}")


def available_modes(costs: Costs) -> tuple[str, ...]:
    modes = MODES if costs.num_slices >= 2 else (PAUSE_RESUME, FULL_RESTART)
    return (*modes, LIVE) if costs.job_mtbf_s is not None and costs.num_slices >= 2 else modes


def planning_mode(costs: Costs) -> str:
    """The mode the recommended checkpoint_period is for: live-replica when a job MTBF is given (then the
    period guards only whole-job failures), else pause-and-resume."""
    return LIVE if LIVE in available_modes(costs) else PAUSE_RESUME


def goodput(costs: Costs, mode: str, tau_s: float) -> float:
    """Long-run fraction of wall time that becomes committed training progress, at full speed."""
    if mode == LIVE:
        return _live_goodput(costs, tau_s)
    lam = costs.failure_rate
    rec = recovery(costs, mode)
    x = lam * (tau_s + costs.save_s)
    if x > 700.0 or lam * rec.length_s > 700.0:
        return 0.0
    work = tau_s / math.expm1(x) + rec.credited_work_s(tau_s, costs.save_s)
    return lam * work * math.exp(-lam * rec.length_s)


def _live_goodput(costs: Costs, tau_s: float) -> float:
    lam_job, lam = costs.job_failure_rate, costs.failure_rate
    slices = math.exp(-lam * recovery(costs, LIVE).length_s) if lam * recovery(costs, LIVE).length_s < 700 else 0.0
    if lam_job == 0.0:
        return slices * tau_s / (tau_s + costs.save_s)
    restart = recovery(costs, FULL_RESTART).length_s
    x = lam_job * (tau_s + costs.save_s)
    if x > 700.0 or lam_job * restart > 700.0:
        return 0.0
    return lam_job * tau_s / math.expm1(x) * math.exp(-lam_job * restart) * slices


def first_order_goodput(costs: Costs, mode: str, tau_s: float) -> float:
    """Young's linearisation 1 - C/(tau+C) - lam*(tau/2 + R): shown for contrast, not used to plan."""
    lam = costs.failure_rate
    rec = recovery(costs, mode)
    lost = costs.save_s / (tau_s + costs.save_s) + lam * ((tau_s + costs.save_s) / 2 + rec.length_s)
    lost -= lam * rec.credited_work_s(tau_s, costs.save_s)
    return max(0.0, 1.0 - lost)


def young_daly_tau(costs: Costs, mode: str = PAUSE_RESUME) -> float:
    """Young/Daly first-order optimal compute time between saves: sqrt(2 C M), M the MTBF of the failures
    that rewind (every slice failure; in live-replica mode only whole-job failures)."""
    mtbf = costs.job_mtbf_s if mode == LIVE and costs.job_mtbf_s is not None else costs.system_mtbf_s
    return math.sqrt(2.0 * costs.save_s * mtbf)


def optimal_tau(costs: Costs, mode: str) -> float:
    """The exact optimum of `goodput` over tau (continuous), by a log-spaced scan and golden section.

    The scan brackets the maximum even where the curve is flat; the golden-section search then refines
    it to ~1e-9 relative in ln(tau).
    """
    young = young_daly_tau(costs, mode)
    lo, hi = math.log(max(young, 1e-9) / 1e3), math.log(max(young, 1e-9) * 1e3)
    n = 241
    grid = [lo + (hi - lo) * i / (n - 1) for i in range(n)]
    values = [goodput(costs, mode, math.exp(x)) for x in grid]
    best = max(range(n), key=values.__getitem__)
    a, b = grid[max(best - 1, 0)], grid[min(best + 1, n - 1)]
    ratio = (math.sqrt(5.0) - 1.0) / 2.0
    c, d = b - ratio * (b - a), a + ratio * (b - a)
    fc, fd = goodput(costs, mode, math.exp(c)), goodput(costs, mode, math.exp(d))
    while b - a > 1e-10:
        if fc >= fd:
            b, d, fd = d, c, fc
            c = b - ratio * (b - a)
            fc = goodput(costs, mode, math.exp(c))
        else:
            a, c, fc = c, d, fd
            d = a + ratio * (b - a)
            fd = goodput(costs, mode, math.exp(d))
    return math.exp((a + b) / 2.0)


def best_period_steps(costs: Costs, mode: str) -> int:
    """The whole number of steps with the highest model goodput (checkpoint_period is an integer)."""
    exact = optimal_tau(costs, mode) / costs.step_time_s
    below = max(1, math.floor(exact))
    candidates = {below, below + 1}
    return max(sorted(candidates), key=lambda p: goodput(costs, mode, p * costs.step_time_s))


def failures_per_week(costs: Costs) -> float:
    return costs.failure_rate * 7 * 86400.0
