"""Elasticity settings that follow from the plan: min slice count, per-attempt timeout, retry budget.

- `elastic_min_slice_count`: -1 (pause-and-resume) or N-1 (resize), whichever the model rates higher.
- `elastic_timeout_seconds`: each attempt waits this long for slices; it must outlast a replacement.
- `elastic_max_retries` counts attempts over the whole job and never resets (pathwaysutils and the
  trainer alike), so it must cover every failure of a multi-week run, not a burst.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from elxpk.plan import model
from elxpk.plan.model import Costs
from elxpk_contract.settings import ALL_SLICES

MAXTEXT_DEFAULT_RETRIES = 10
MAXTEXT_DEFAULT_TIMEOUT_S = 300
# The retry budget should survive the job with this probability (Poisson failures).
RETRY_CONFIDENCE = 0.999
# An attempt's wait should cover a slow replacement, not just a typical one.
TIMEOUT_MARGIN = 3.0


@dataclass(frozen=True)
class ElasticSettings:
    mode: str
    elastic_min_slice_count: int
    elastic_timeout_seconds: int
    elastic_max_retries: int
    job_duration_s: float
    expected_failures: float
    default_retries_last_s: float  # mean time until the default budget of 10 attempts is spent


def poisson_quantile(mean: float, p: float) -> int:
    """Smallest k with P(Poisson(mean) <= k) >= p (a normal approximation above mean 500)."""
    if mean <= 0:
        return 0
    if mean > 500:
        z = 3.090232306167813 if p == 0.999 else math.sqrt(2) * _erfinv(2 * p - 1)
        return math.ceil(mean + z * math.sqrt(mean) + 0.5)
    k, term = 0, math.exp(-mean)
    total = term
    while total < p:
        k += 1
        term *= mean / k
        total += term
    return k


def _erfinv(y: float) -> float:
    # Bisection is plenty for a budget figure.
    lo, hi = -6.0, 6.0
    for _ in range(100):
        mid = (lo + hi) / 2
        if math.erf(mid) < y:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def elastic_settings(costs: Costs, period_steps: int, job_duration_s: float) -> ElasticSettings:
    tau = period_steps * costs.step_time_s
    mode = model.PAUSE_RESUME
    if model.RESIZE in model.available_modes(costs):
        resize = model.goodput(costs, model.RESIZE, tau)
        if resize > model.goodput(costs, model.PAUSE_RESUME, tau):
            mode = model.RESIZE
    expected = costs.failure_rate * job_duration_s
    timeout = max(MAXTEXT_DEFAULT_TIMEOUT_S, math.ceil(TIMEOUT_MARGIN * costs.replacement_s / 10) * 10)
    return ElasticSettings(
        mode=mode,
        elastic_min_slice_count=ALL_SLICES if mode == model.PAUSE_RESUME else costs.num_slices - 1,
        elastic_timeout_seconds=int(timeout),
        # The first attempt is not a retry: one more than the failures to survive.
        elastic_max_retries=poisson_quantile(expected, RETRY_CONFIDENCE) + 1,
        job_duration_s=job_duration_s,
        expected_failures=expected,
        default_retries_last_s=(MAXTEXT_DEFAULT_RETRIES - 1) / costs.failure_rate,
    )
