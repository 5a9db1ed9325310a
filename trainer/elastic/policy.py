"""Every decision of the elastic loop, from the settings and nothing else: how a failure is classified
(anchored on the status prefix of a `jax.errors.JaxRuntimeError`), whether a failed attempt is retried
(elastic at all, the retry budget, the no-progress guard, the repeat guard), how many slices an attempt
waits for and for how long, and when a resized run scales back up. Tested without training.

Each failure is recorded with its class (the exit code it would end the run with: slice_lost, or stalled
after the stall watchdog's recovery) and the step it reached. `elastic_stop_on_repeat` N > 0 stops after
N failures in a row of one class with no step past the first one's (a slice that dies at the same step
every time), with that class's code, instead of spending the whole retry budget on it (NVIDIA's
resiliency extension stops the same way when a root cause recurs without progress)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from elxpk_contract.errors import Timeout
from elxpk_contract.exit_codes import SLICE_LOST, STALLED, ExitCode
from elxpk_contract.failure_classes import ELASTIC_CLASSES, MAYBE_SLICE_DOWN, recognised
from elxpk_contract.setting_rules import said

if TYPE_CHECKING:
    from elxpk_contract.settings import TrainerConfig
    from trainer.clock import Clock
    from trainer.elastic.slices import SliceBackend

_NO_FAILURE_YET = object()


def classify(error: BaseException) -> str | None:
    """The name of the elastic event `error` is ('slice_down', 'maybe_slice_down': the rows of
    elxpk_contract.failure_classes.ELASTIC_CLASSES), or None (not an elastic event: propagate)."""
    row = recognised(error, ELASTIC_CLASSES)
    return None if row is None else row.name


@dataclass(frozen=True)
class Verdict:
    """The policy's answer to a failed attempt."""

    kind: str | None  # classify()'s; None: not an elastic event, the error propagates unchanged
    give_up: str | None = None  # why the loop stops retrying (raised as TrainerStopped); None: retry
    deterministic: bool = False  # the give-up looks like the user's error (USER_ERROR), not the infra's
    code: ExitCode | None = None  # the give-up's code when it is the failure's class (--elastic-stop-on-repeat)


@dataclass(frozen=True)
class Failure:
    """One failed attempt as the retry budget sees it: its class and the step it reached."""

    cause: ExitCode  # SLICE_LOST, or STALLED when the stall watchdog turned a hang into the failure
    step: int
    error: str  # the first line of what was raised


class Admit(Protocol):
    """Which of the healthy slices an attempt may use (trainer.elastic.slice_health.Admission), and the
    ones it refused with why (named when the wait for slices times out)."""

    def __call__(self, healthy: Sequence[int]) -> list[int]: ...

    def refused(self) -> dict[int, str]: ...


class ElasticPolicy:
    """Every decision of the elastic loop, from the settings: how many slices an attempt waits for (all of
    them, or at least k when resizing) and for how long, when a resized run scales back up, and whether a
    failed attempt is retried (elastic at all, retry budget, no-progress guard)."""

    def __init__(self, cfg: TrainerConfig, *, in_process_retry: bool = True) -> None:
        self.retries = cfg.elastic_enabled and in_process_retry
        self.min_slices = cfg.min_slices  # num_slices with -1 (pause and resume), else k (resize)
        self.resize = cfg.resize_enabled
        self.max_attempts = cfg.elastic_max_retries
        self.stop_on_repeat = cfg.elastic_stop_on_repeat
        self.repeats: list[Failure] = []  # the current run of failures of one class with no new step
        self.timeout_s = float(cfg.elastic_timeout_seconds)
        self.poll_s = cfg.elastic_poll_seconds
        self._committed_at_last_failure: object = _NO_FAILURE_YET

    def wait_for_slices(self, backend: SliceBackend, clock: Clock, admit: Admit | None = None
                        ) -> tuple[list[int], float]:
        """The healthy slices once enough are healthy (and admitted: a returning slice passes its health
        check), and how long that took; Timeout when the wait would pass the deadline (predictive, like
        pathwaysutils': it never sleeps past it)."""
        return wait_for_slices(backend, self.min_slices, self.poll_s, self.timeout_s, clock, admit)

    def scale_up_ready(self, backend: SliceBackend, active: Sequence[int]) -> list[int]:
        """Slices back while a resized run trains on fewer: the run should restart wider. Asks the backend
        only while degraded (on Pathways that is a probe)."""
        if not self.resize or len(active) >= backend.num_slices:
            return []
        return backend.revived(active)

    def judge(self, error: BaseException, attempt: int, latest_committed: int | None, *, step: int = 0,
              stalled: bool = False) -> Verdict:
        """Whether attempt number `attempt` (1-based), failed with `error` at step `step`, is retried. A
        status that may or may not be a slice loss is retried only if a checkpoint committed since the
        previous failure, so a deterministic error is not retried until the budget runs out; with
        --elastic-stop-on-repeat N, neither is any class of failure that recurs N times without a new step."""
        kind = classify(error) if self.retries else None
        if kind is None:
            return Verdict(None)
        progressed = latest_committed != self._committed_at_last_failure
        self._committed_at_last_failure = latest_committed
        line = first_line(error)
        repeated = self._note(Failure(STALLED if stalled else SLICE_LOST, step, line))
        if kind == MAYBE_SLICE_DOWN.name and not progressed:
            return Verdict(kind, f"elastic: {line!r} again with no new checkpoint since the previous "
                                 "failure; not retrying what looks like a deterministic error", deterministic=True)
        if repeated is not None:
            return Verdict(kind, repeated, code=self.repeats[-1].cause)
        if attempt >= self.max_attempts:
            return Verdict(kind, f"elastic: attempt {attempt} of {self.max_attempts} failed ({line}); "
                                 f"retry budget exhausted (raise {said('elastic_max_retries')})")
        return Verdict(kind)

    def _note(self, failure: Failure) -> str | None:
        """Add `failure` to the current run of repeats (a new class or a step past the run's highest
        starts a new one); why to stop once the run is --elastic-stop-on-repeat long, else None."""
        run = self.repeats
        if run and (failure.cause != run[0].cause or failure.step > max(f.step for f in run)):
            run.clear()
        run.append(failure)
        if not self.stop_on_repeat or len(run) < self.stop_on_repeat:
            return None
        cause = failure.cause
        return (f"elastic: {len(run)} failures in a row of class {cause.name} (exit {cause.code}) with no step "
                f"past {max(f.step for f in run)}; the last: {failure.error}; stopping ({said('elastic_stop_on_repeat')} "
                f"{self.stop_on_repeat}) instead of retrying up to {said('elastic_max_retries')} {self.max_attempts}")


def first_line(error: BaseException) -> str:
    return (str(error).splitlines() or [""])[0][:300]


def wait_for_slices(backend: SliceBackend, count: int, poll_s: float, timeout_s: float,
                    clock: Clock, admit: Admit | None = None) -> tuple[list[int], float]:
    """Healthy slices (those `admit` lets in, when given) once at least `count` are, and how long that took."""
    start = clock.monotonic()
    while True:
        healthy = backend.healthy_slices()
        if admit is not None:
            healthy = admit(healthy)
        elapsed = clock.monotonic() - start
        if len(healthy) >= count:
            return healthy, elapsed
        if elapsed + poll_s >= timeout_s:
            refused = admit.refused() if admit is not None else {}
            sick = "".join(f"; slice {s} failed its rejoin health check: {why}" for s, why in sorted(refused.items()))
            raise Timeout(
                f"elastic: {len(healthy)} of {backend.num_slices} slices healthy {healthy} after "
                f"{elapsed:.1f}s, {count} needed{sick}; raise {said('elastic_timeout_seconds')} ({timeout_s:g}) or "
                f"lower {said('elastic_min_slice_count')}"
            )
        clock.sleep(poll_s)
