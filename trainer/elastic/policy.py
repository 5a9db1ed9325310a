"""Every decision of the elastic loop, from the settings and nothing else: how a failure is classified
(anchored on the status prefix of a `jax.errors.JaxRuntimeError`), whether a failed attempt is retried
(elastic at all, the retry budget, the no-progress guard), how many slices an attempt waits for and for
how long, and when a resized run scales back up. Tested without training."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from elxpk_contract.errors import Timeout

if TYPE_CHECKING:
    from elxpk_contract.settings import TrainerConfig
    from trainer.clock import Clock
    from trainer.elastic.slices import SliceBackend

SLICE_DOWN = ("DATA_LOSS",)
MAYBE_SLICE_DOWN = ("DEADLINE_EXCEEDED", "NOT_FOUND", "INTERNAL")
_STATUS = re.compile(r"^\s*([A-Z_]+):")
_NO_FAILURE_YET = object()


def classify(error: BaseException) -> str | None:
    """'slice_down', 'maybe_slice_down', or None (not an elastic event: propagate)."""
    import jax

    if not isinstance(error, jax.errors.JaxRuntimeError):
        return None
    match = _STATUS.match(str(error))
    code = match.group(1) if match else None
    if code in SLICE_DOWN:
        return "slice_down"
    if code in MAYBE_SLICE_DOWN:
        return "maybe_slice_down"
    return None


@dataclass(frozen=True)
class Verdict:
    """The policy's answer to a failed attempt."""

    kind: str | None  # classify()'s; None: not an elastic event, the error propagates unchanged
    give_up: str | None = None  # why the loop stops retrying (raised as TrainerStopped); None: retry
    deterministic: bool = False  # the give-up looks like the user's error (USER_ERROR), not the infra's


class ElasticPolicy:
    """Every decision of the elastic loop, from the settings: how many slices an attempt waits for (all of
    them, or at least k when resizing) and for how long, when a resized run scales back up, and whether a
    failed attempt is retried (elastic at all, retry budget, no-progress guard)."""

    def __init__(self, cfg: TrainerConfig, *, in_process_retry: bool = True) -> None:
        self.retries = cfg.elastic_enabled and in_process_retry
        self.min_slices = cfg.min_slices  # num_slices with -1 (pause and resume), else k (resize)
        self.resize = cfg.resize_enabled
        self.max_attempts = cfg.elastic_max_retries
        self.timeout_s = float(cfg.elastic_timeout_seconds)
        self.poll_s = cfg.elastic_poll_seconds
        self._committed_at_last_failure: object = _NO_FAILURE_YET

    def wait_for_slices(self, backend: SliceBackend, clock: Clock) -> tuple[list[int], float]:
        """The healthy slices once enough are healthy, and how long that took; Timeout when the wait would
        pass the deadline (predictive, like pathwaysutils': it never sleeps past it)."""
        return wait_for_slices(backend, self.min_slices, self.poll_s, self.timeout_s, clock)

    def scale_up_ready(self, backend: SliceBackend, active: Sequence[int]) -> list[int]:
        """Slices back while a resized run trains on fewer: the run should restart wider. Asks the backend
        only while degraded (on Pathways that is a probe)."""
        if not self.resize or len(active) >= backend.num_slices:
            return []
        return backend.revived(active)

    def judge(self, error: BaseException, attempt: int, latest_committed: int | None) -> Verdict:
        """Whether attempt number `attempt` (1-based), failed with `error`, is retried. A status that may or
        may not be a slice loss is retried only if a checkpoint committed since the previous failure, so a
        deterministic error is not retried until the budget runs out."""
        kind = classify(error) if self.retries else None
        if kind is None:
            return Verdict(None)
        progressed = latest_committed != self._committed_at_last_failure
        self._committed_at_last_failure = latest_committed
        line = first_line(error)
        if kind == "maybe_slice_down" and not progressed:
            return Verdict(kind, f"elastic: {line!r} again with no new checkpoint since the previous "
                                 "failure; not retrying what looks like a deterministic error", deterministic=True)
        if attempt >= self.max_attempts:
            return Verdict(kind, f"elastic: attempt {attempt} of {self.max_attempts} failed ({line}); "
                                 "retry budget exhausted (raise --elastic-max-retries)")
        return Verdict(kind)


def first_line(error: BaseException) -> str:
    return (str(error).splitlines() or [""])[0][:300]


def wait_for_slices(backend: SliceBackend, count: int, poll_s: float, timeout_s: float,
                    clock: Clock) -> tuple[list[int], float]:
    """Healthy slices once at least `count` are healthy, and how long that took."""
    start = clock.monotonic()
    while True:
        healthy = backend.healthy_slices()
        elapsed = clock.monotonic() - start
        if len(healthy) >= count:
            return healthy, elapsed
        if elapsed + poll_s >= timeout_s:
            raise Timeout(
                f"elastic: {len(healthy)} of {backend.num_slices} slices healthy {healthy} after "
                f"{elapsed:.1f}s, {count} needed; raise --elastic-timeout-seconds ({timeout_s:g}) or lower "
                "--elastic-min-slice-count"
            )
        clock.sleep(poll_s)
