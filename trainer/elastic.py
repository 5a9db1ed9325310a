"""The elastic retry loop: one process (same PID) survives slice losses by restoring and retrying.

Semantics follow pathwaysutils' `Manager.elastic_retry` (elastic.md section 7), with its gaps closed:

- Before every attempt, wait for enough healthy slices: all of them (`elastic_min_slice_count` -1,
  pause-and-resume) or at least k (resize). The wait is bounded by `elastic_timeout_seconds` and
  predictive like pathwaysutils' (it never sleeps past the deadline); running out is fatal (`Timeout`).
- Classification, anchored on the status prefix of a `jax.errors.JaxRuntimeError`:
  `DATA_LOSS:` is a slice loss; `DEADLINE_EXCEEDED:`, `NOT_FOUND:` and `INTERNAL:` may be one and are
  retried with a warning, but only if a new checkpoint committed since the previous failure (the
  no-progress guard, so a deterministic bug is not retried until the budget runs out); anything else
  propagates at once, unchanged.
- `elastic_max_retries` counts attempts, as pathwaysutils does: 10 means the first attempt plus up to 9
  retries. A scale-up is not a failure and does not use the budget.
- Each failure is recorded with its class (the exit code it would end the run with: slice_lost, or
  stalled after the stall watchdog's recovery) and the step it reached. `elastic_stop_on_repeat` N > 0
  stops after N failures in a row of one class with no step past the first one's (a slice that dies at
  the same step every time), with that class's code, instead of spending the whole retry budget on it
  (NVIDIA's resiliency extension stops the same way when a root cause recurs without progress).
- A slice that comes back (lost, or left out of the previous attempt) passes a health check on its own
  devices before it receives the state (trainer.slice_health); one that fails is treated as still lost.
- Between attempts: the attempt joins its checkpoint writer, closes its manager and deletes its arrays
  (trainer.attempt); the compiled step is kept, so a same-mesh retry does not recompile.
"""

from __future__ import annotations

import gc
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from elxpk_contract.errors import Timeout, UsageError
from elxpk_contract.exit_codes import PREEMPTED, SLICE_LOST, STALLED, USER_ERROR, ExitCode, TrainerStopped
from elxpk_contract.settings import TrainerConfig
from trainer import ckpt_storage, live_recovery
from trainer.attempt import AttemptContext, AttemptRecovery, ResizeDoesNotFit, ScaleUpSignal, run_attempt
from trainer.clock import Clock, SystemClock
from trainer.faults import FaultSchedule
from trainer.metrics import RunRecorder
from trainer.progress import ProgressWriter
from trainer.slice_health import RejoinGate
from trainer.stalls import StallResponse
from trainer.watchdog import StallWatchdog

if TYPE_CHECKING:
    from trainer.data import DataSource
    from trainer.metrics import Observer
    from trainer.preemption import StopRequest
    from trainer.slices import SliceBackend

SLICE_DOWN = ("DATA_LOSS",)
MAYBE_SLICE_DOWN = ("DEADLINE_EXCEEDED", "NOT_FOUND", "INTERNAL")
_STATUS = re.compile(r"^\s*([A-Z_]+):")
_NO_FAILURE_YET = object()


@dataclass
class TrainResult:
    run_dir: str
    final_step: int
    losses: dict[int, str]  # step -> float.hex of its last execution's loss
    params: dict[str, Any]  # final parameters as host numpy arrays
    attempts: int
    recoveries: int
    compiles: int
    blocking_save_s: list[float]


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
    code: ExitCode | None = None  # the give-up's code when it is the failure's class (--elastic-stop-on-repeat)


@dataclass(frozen=True)
class Failure:
    """One failed attempt as the retry budget sees it: its class and the step it reached."""

    cause: ExitCode  # SLICE_LOST, or STALLED when the stall watchdog turned a hang into the failure
    step: int
    error: str  # the first line of what was raised


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

    def wait_for_slices(self, backend: SliceBackend, clock: Clock, gate: Admission | None = None
                        ) -> tuple[list[int], float]:
        """The healthy slices once enough are healthy (and admitted by `gate`: returning slices pass their
        health check), and how long that took; Timeout when the wait would pass the deadline (predictive,
        like pathwaysutils': it never sleeps past it)."""
        return wait_for_slices(backend, self.min_slices, self.poll_s, self.timeout_s, clock, gate)

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
        first_line = _first_line(error)
        repeated = self._note(Failure(STALLED if stalled else SLICE_LOST, step, first_line))
        if kind == "maybe_slice_down" and not progressed:
            return Verdict(kind, f"elastic: {first_line!r} again with no new checkpoint since the previous "
                                 "failure; not retrying what looks like a deterministic error", deterministic=True)
        if repeated is not None:
            return Verdict(kind, repeated, code=self.repeats[-1].cause)
        if attempt >= self.max_attempts:
            return Verdict(kind, f"elastic: attempt {attempt} of {self.max_attempts} failed ({first_line}); "
                                 "retry budget exhausted (raise --elastic-max-retries)")
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
                f"past {max(f.step for f in run)}; the last: {failure.error}; stopping (--elastic-stop-on-repeat "
                f"{self.stop_on_repeat}) instead of retrying up to --elastic-max-retries {self.max_attempts}")


@dataclass
class Admission:
    """Which slices an attempt may use: those of the previous attempt that did not fail keep their place;
    a slice that returns (lost, or left out) is admitted only past the rejoin health check."""

    gate: RejoinGate
    previous: Sequence[int]
    lost: Sequence[int]
    step: int

    def __call__(self, healthy: Sequence[int]) -> list[int]:
        returning = [s for s in healthy if s not in self.previous or s in self.lost]
        kept = [s for s in healthy if s not in returning]
        return sorted(kept + self.gate.admit(returning, self.step))


def _first_line(error: BaseException) -> str:
    return (str(error).splitlines() or [""])[0][:300]


def wait_for_slices(backend: SliceBackend, count: int, poll_s: float, timeout_s: float,
                    clock: Clock, admit: Callable[[Sequence[int]], list[int]] | None = None) -> tuple[list[int], float]:
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
            refused = admit.gate.refused() if isinstance(admit, Admission) else {}
            sick = "".join(f"; slice {s} failed its rejoin health check: {why}" for s, why in sorted(refused.items()))
            raise Timeout(
                f"elastic: {len(healthy)} of {backend.num_slices} slices healthy {healthy} after "
                f"{elapsed:.1f}s, {count} needed{sick}; raise --elastic-timeout-seconds ({timeout_s:g}) or lower "
                "--elastic-min-slice-count"
            )
        clock.sleep(poll_s)


def train(cfg: TrainerConfig, *, faults: FaultSchedule | None = None, observer: Observer | None = None,
          dataset: DataSource | None = None, clock: Clock | None = None,
          backend: SliceBackend | None = None, stop: StopRequest | None = None) -> TrainResult:
    """Train `cfg.steps` steps, surviving slice losses (and stalls) when `cfg.elastic_enabled`; `stop`
    (set by SIGTERM in `python -m trainer`) ends the run at the next step boundary with TrainerStopped."""
    from trainer import step as steplib
    from trainer.checkpoint import refuse_other_configuration
    from trainer.data import open_dataset
    from trainer.model import ModelShape
    from trainer.precision import resolved
    from trainer.slices import make_backend

    clock = clock or SystemClock()
    schedule = faults if faults is not None else FaultSchedule.parse(cfg.fault, cfg.revive_after)
    problems = schedule.problems(cfg.num_slices, cfg.steps)
    if problems:
        raise UsageError(*problems)
    backend = backend or make_backend(cfg, schedule, clock)
    try:
        # Before anything is written: never manage the working directory or a folder of numbered folders.
        ckpt_storage.refuse_unsafe_checkpoints(cfg.checkpoint_path)
        cfg = resolved(fit_to_backend(cfg, backend))  # the compute dtype and the data's identity are part
        if dataset is None:  # of the checkpoint fingerprint: both resolved first
            cfg, dataset = open_dataset(cfg)
        refuse_other_configuration(cfg)  # a resume of another configuration writes nothing
        donate = live_recovery.step_donates(cfg, backend)
        memory = _memory_record(cfg, backend, donate)  # a step that cannot fit is refused before anything is written
    except UsageError:
        backend.close()
        raise
    recorder = RunRecorder(cfg.run_dir, clock, observer, enabled=backend.process_index == 0)
    policy = ElasticPolicy(cfg, in_process_retry=backend.in_process_retry)
    ctx = AttemptContext(cfg, backend, recorder, clock, dataset, steplib.StepCache(cfg, clock, donate=donate), policy,
                         stop=stop)
    ctx.progress = ProgressWriter(cfg.checkpoint_path, clock, enabled=backend.process_index == 0)
    ctx.rejoin = RejoinGate(backend, recorder, clock, recheck_s=policy.poll_s)
    response = StallResponse(ctx)
    ctx.watchdog = StallWatchdog(cfg.stall_timeout_seconds, clock, response, on_stuck=response.stuck)
    quiet = _QuietExpectedErrors()
    logging.getLogger("absl").addFilter(quiet)
    state = "failed"
    try:
        shape = ModelShape.from_config(cfg)
        recorder.write_run_json(cfg, {
            "model": {"params": shape.param_count(), "flops_per_example": shape.flops_per_example(),
                      "preset": cfg.model, "compute_dtype": cfg.compute_dtype, "attention": shape.attention or "xla"},
            "slice_backend": cfg.slice_backend,
            "topology": {"num_slices": backend.num_slices, "devices_per_slice": cfg.devices_per_slice,
                         "processes": _process_count(cfg)},
            "memory": memory,
        })
        recorder.event("run_started", 0, slices=list(range(cfg.num_slices)), backend=cfg.slice_backend)
        try:
            result = _retry_loop(ctx)
        except TrainerStopped as stopped:
            state = "preempted" if stopped.code is PREEMPTED else "failed"
            raise
        recorder.event("run_finished", result.final_step, attempts=result.attempts, recoveries=result.recoveries)
        state = "done"
        return result
    finally:
        if ctx.live_checks is not None:  # no thread may be compiling when the interpreter exits
            ctx.live_checks.close()
        ctx.watchdog.close()
        ctx.progress.finish(state)
        logging.getLogger("absl").removeFilter(quiet)
        recorder.close()
        backend.close()


def fit_to_backend(cfg: TrainerConfig, backend: SliceBackend) -> TrainerConfig:
    """The config on the backend's real topology. Pathways and a TPU cluster decide the devices per
    slice (not --devices-per-slice); the global batch is checked against them here, before anything is
    written."""
    from trainer.topology import devices_per_slice

    if not cfg.topology_from_hardware:
        return cfg
    where = "the Pathways backend" if cfg.slice_backend == "pathways" else "the TPU cluster"
    return cfg.on_hardware(backend.num_slices, devices_per_slice(backend.slice_devices()), where)


def _memory_record(cfg: TrainerConfig, backend: SliceBackend, donate: bool) -> dict:
    """The state's bytes in total and per device on the full mesh, after the memory check."""
    from trainer import mesh as meshlib
    from trainer import step as steplib
    from trainer.memory import memory_record

    mesh = meshlib.build_mesh(backend.slice_devices(), list(range(backend.num_slices)))
    record = memory_record(cfg, steplib.state_target(cfg, mesh), mesh, limit=backend.memory_limit(), donates=donate)
    # The cost of keeping the last completed step alive through a step (trainer.live_recovery): a step that
    # does not donate its input state holds the input and the output state at once, one state share more
    # per device than a donating step (bench/bench_local.py measures it from XLA's own memory analysis).
    # Zero where the step donates (--recovery checkpoint, multi-controller).
    record["live_recovery_bytes_per_device"] = 0 if donate else record["state_bytes_per_device"]
    return record


def _process_count(cfg: TrainerConfig) -> int:
    if cfg.slice_backend != "multi-controller":
        return 1
    import jax

    return jax.process_count()


def _retry_loop(ctx: AttemptContext) -> TrainResult:
    cfg, backend, rec, clock, policy = ctx.cfg, ctx.backend, ctx.recorder, ctx.clock, ctx.policy
    attempt, recoveries = 1, 0
    recovery: AttemptRecovery | None = None
    previous: list[int] | None = None  # the slices of the previous attempt; None before the first
    while True:
        if recovery is not None:
            # The failed attempt's frames sit in a cycle with its exception; free their arrays now,
            # before the next attempt allocates (pathwaysutils leaves this to the caller).
            gc.collect()
        if ctx.stop is not None and ctx.stop.requested:  # between attempts: nothing to save
            rec.event("preempted", ctx.current_step, signal=ctx.stop.requested, checkpoint_step=ctx.latest_committed)
            raise TrainerStopped(PREEMPTED, f"preempted ({ctx.stop.requested}) between attempts at step "
                                            f"{ctx.current_step}; newest checkpoint: step {ctx.latest_committed}")
        gate = None
        if previous is not None and ctx.rejoin is not None:
            gate = Admission(ctx.rejoin, previous, recovery.lost if recovery is not None else (), ctx.current_step)
        active, waited = policy.wait_for_slices(backend, clock, gate)
        previous = active
        rec.event("slices_ready", ctx.current_step, slices=active, wait_s=round(waited, 6), attempt=attempt)
        try:
            result = run_attempt(ctx, active, recovery)
            return TrainResult(cfg.run_dir, result.final_step, dict(ctx.last_losses), result.params, attempt,
                               recoveries, ctx.steps.compiles, list(ctx.blocking_s))
        except ScaleUpSignal:
            recovery = AttemptRecovery("scale_up", clock.monotonic())
            recoveries += 1
            continue
        except ResizeDoesNotFit as refused:
            # Not a failure (no retry is spent, the recovery in progress goes on): from now on the run waits
            # for one slice more than this, since the need per device only grows as slices drop out.
            policy.min_slices = len(refused.slices) + 1
            rec.event("resize_refused", ctx.current_step, slices=refused.slices, needed_bytes=refused.needed_bytes,
                      limit_bytes=refused.limit_bytes, min_slices=policy.min_slices)
            continue
        except Exception as error:
            stalled, ctx.stalled = ctx.stalled, False
            verdict = policy.judge(error, attempt, ctx.latest_committed, step=ctx.current_step, stalled=stalled)
            if verdict.kind is None:
                raise
            detected, detected_at = clock.monotonic(), clock.time()
            details: dict[str, Any] = {"error": _first_line(error), "kind": verdict.kind, "attempt": attempt,
                                       "cause": policy.repeats[-1].cause.name, "stopped": verdict.give_up or ""}
            if verdict.kind == "maybe_slice_down":
                details["warning"] = "this status may or may not mean a slice is down"
            # Which slices: on Pathways this probes them, so the event keeps the time of the detection.
            lost = backend.lost_slices(active)
            rec.event("failure_detected", ctx.current_step, at=detected_at, slices_lost=lost, **details)
            if verdict.give_up is not None:
                code = verdict.code or (USER_ERROR if verdict.deterministic else SLICE_LOST)
                raise TrainerStopped(code, verdict.give_up) from error
            attempt += 1
            ctx.attempt = attempt
            recoveries += 1
            recovery = AttemptRecovery("failure", detected, tuple(lost))


class _QuietExpectedErrors(logging.Filter):
    """Orbax logs a traceback when a save's commit fails in its writer thread. For a slice loss that is
    an expected, handled event (reported in events.jsonl), so drop those records."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None and classify(exc) is not None:
            return False
        return "DATA_LOSS" not in record.getMessage()
