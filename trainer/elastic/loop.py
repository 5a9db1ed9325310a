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
- Between attempts: the attempt joins its checkpoint writer, closes its manager and deletes its arrays
  (trainer.elastic.attempt); the compiled step is kept, so a same-mesh retry does not recompile.
- Each failure carries its class and the step it reached (`--elastic-stop-on-repeat`, trainer.elastic.policy).
- A slice that comes back (lost, or left out of the previous attempt) passes a health check on its own
  devices before it receives the state (trainer.elastic.slice_health); one that fails is still lost.
"""

from __future__ import annotations

import gc
import logging
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, TextIO

from elxpk_contract.errors import UsageError
from elxpk_contract.exit_codes import PREEMPTED, SLICE_LOST, STALLED, USER_ERROR, TrainerStopped
from elxpk_contract.faults import FaultSchedule
from elxpk_contract.setting_rules import said
from elxpk_contract.settings import TrainerConfig
from elxpk_contract.storage_full import no_space_errno
from elxpk_storage import checkpoint_files as ckpt_storage
from elxpk_storage import gcs_auth
from trainer import startup
from trainer.clock import Clock, SystemClock
from trainer.core.executable_store import ExecutableStore, store_dir
from trainer.core.precision import resolved
from trainer.core.topology import devices_per_slice
from trainer.elastic import drain, live_recovery
from trainer.elastic.attempt import run_attempt
from trainer.elastic.attempt_history import AttemptHistory
from trainer.elastic.badput_meter import BadputMeter
from trainer.elastic.context import AttemptContext, AttemptRecovery, ResizeDoesNotFit, ScaleUpSignal
from trainer.elastic.outcome import exit_code_for, is_peer_gone
from trainer.elastic.policy import ElasticPolicy, classify, first_line
from trainer.elastic.progress import ProgressWriter
from trainer.elastic.slice_health import Admission, RejoinGate
from trainer.elastic.slices import make_backend
from trainer.elastic.stalls import StallResponse
from trainer.elastic.watchdog import StallWatchdog
from trainer.elastic.writer_lease import WriterLease
from trainer.metrics import RunRecorder
from trainer.profile_capture import ProfileCapture
from trainer.speed_log import SpeedLog, device_kind, speed_basis
from trainer.startup import StartupTimeline

if TYPE_CHECKING:
    from trainer.data.data import DataSource
    from trainer.elastic.preemption import StopRequest
    from trainer.elastic.slices import SliceBackend
    from trainer.metrics import Observer

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


def train(cfg: TrainerConfig, *, faults: FaultSchedule | None = None, observer: Observer | None = None,
          dataset: DataSource | None = None, clock: Clock | None = None,
          backend: SliceBackend | None = None, stop: StopRequest | None = None,
          speed_out: TextIO | None = None, process_start: float | None = None) -> TrainResult:
    """Train `cfg.steps` steps, surviving slice losses (and stalls) when `cfg.elastic_enabled`; `stop`
    (set by SIGTERM in `python -m trainer`) ends the run at the next step boundary with TrainerStopped;
    `speed_out` (the program's stdout) gets the speed line every --log-period steps and the profile's line.
    `process_start`: the unix time the start-up timeline counts from (trainer/startup.py): the process's
    start by default, the injected clock's now when a clock is given without it."""
    from trainer.ckpt.checkpoint import refuse_other_configuration, retried_read
    from trainer.core import step as steplib
    from trainer.core.model import ModelShape
    from trainer.data.data import open_dataset

    if process_start is None:
        process_start = startup.PROCESS_START if clock is None else clock.time()
    clock = clock or SystemClock()
    timeline = StartupTimeline(clock, process_start)
    timeline.mark("imports_done")  # what the process imported before it could train (jax, orbax, the trainer)
    schedule = faults if faults is not None else FaultSchedule.parse(cfg.fault, cfg.revive_after)
    problems = schedule.problems(cfg.num_slices, cfg.steps)
    if problems:
        raise UsageError(*problems)
    if gcs_auth.is_gcs(cfg.run_dir):  # before the backend reads RUN_DIR/.faults-fired there, and sets up gcsfs
        gcs_auth.require_credentials(f"{said('run_dir')} {cfg.run_dir:.200}")
        # Before that read, epath's first gs:// path, builds the gcsfs the process keeps: with its listing cache
        # on, a process other than 0 still listed a step process 0 had set aside at a restore, refused to save it
        # again and stalled the group's save (a second restart under load, a run with --fault).
        ckpt_storage.prepare_object_store()
        gcs_auth.require_bucket(f"{said('run_dir')} {cfg.run_dir:.200}", cfg.run_dir)  # exit 2, not 1 at a write
    backend = backend or make_backend(cfg, schedule, clock)
    timeline.mark("devices_open")
    try:
        # Before anything is written: never manage the working directory or a folder of numbered folders.
        retried_read("listing the checkpoint directory", partial(
            ckpt_storage.refuse_unsafe_checkpoints, cfg.checkpoint_path, said("checkpoint_dir")), clock)
        ckpt_storage.refuse_file_in_path(said("run_dir"), cfg.run_dir)
        cfg = resolved(fit_to_backend(cfg, backend))  # the compute dtype and the data's identity are part
        if dataset is None:  # of the checkpoint fingerprint: both resolved first
            cfg, dataset = open_dataset(cfg)
        retried_read("reading the newest digest", partial(refuse_other_configuration, cfg), clock)  # a resume
        # of another configuration writes nothing
        donate = live_recovery.step_donates(cfg, backend)
        cfg = _remat_resolved(cfg, backend, donate)
        memory = _memory_record(cfg, backend, donate)  # a step that cannot fit is refused before anything is written
        lease = (WriterLease(cfg.checkpoint_path, cfg.run_id or "", clock,
                             flag=said(cfg.checkpoint_flag))
                 if backend.process_index == 0 else None)
        if lease is not None:  # one run writes a checkpoint directory: before anything is written or removed
            lease.acquire()
    except UsageError:
        backend.close()
        raise
    meter = BadputMeter()  # the report's time split as running totals, for the progress record
    shape = ModelShape.from_config(cfg)
    basis = speed_basis(cfg, device_kind(backend.slice_devices()), shape.flops_per_example())
    speed_out = speed_out if backend.process_index == 0 else None  # the records' process speaks for the run
    speed = SpeedLog(basis, cfg.log_period, speed_out)
    profile = (ProfileCapture(cfg.run_dir, cfg.skip_first_n_steps_for_profiler, cfg.profiler_steps, cfg.steps,
                              speed_out)
               if cfg.profiler == "xplane" else None)
    recorder = RunRecorder(cfg.run_dir, clock, _observing(observer, meter.observe, speed.observe,
                                                          profile.observe if profile is not None else None),
                           enabled=backend.process_index == 0, process=backend.process_index,
                           flush_s=cfg.record_flush_seconds)
    policy = ElasticPolicy(cfg, in_process_retry=backend.in_process_retry)
    steps = steplib.StepCache(cfg, clock, donate=donate, store=_executable_store(cfg))
    ctx = AttemptContext(cfg, backend, recorder, clock, dataset, steps, policy, stop=stop, timeline=timeline,
                         lease=lease)
    ctx.progress = ProgressWriter(cfg.checkpoint_path, clock, enabled=backend.process_index == 0, meter=meter,
                                  speed=speed.recent)
    # Every process writes its own start-up (a restart whose process 1 compiles while process 0 loads must show
    # it); every other record is process 0's alone.
    startup_recorder = recorder if backend.process_index == 0 else RunRecorder(
        cfg.run_dir, clock, process=backend.process_index, flush_s=cfg.record_flush_seconds)
    timeline.attach(startup_recorder, backend.process_index, ctx.progress.startup)
    if not backend.in_process_retry:  # each retry is a new process: the attempts are counted on disk
        ctx.history = AttemptHistory(cfg.checkpoint_path, cfg.elastic_stop_on_repeat,
                                     primary=backend.process_index == 0, share=_from_process_0, run_id=cfg.run_id)
    ctx.rejoin = RejoinGate(backend, recorder, clock, recheck_s=policy.poll_s)
    response = StallResponse(ctx)
    ctx.watchdog = StallWatchdog(cfg.stall_timeout_seconds, clock, response, on_stuck=response.stuck)
    quiet_expected_errors()
    _quiet_abandoned_save_callbacks()
    state, stopped_why, exit_code = "failed", "", None
    peer_gone = False
    try:
        recorder.write_run_json(cfg, {
            "model": {"params": shape.param_count(), "flops_per_example": shape.flops_per_example(),
                      "preset": cfg.model, "compute_dtype": cfg.compute_dtype, "attention": shape.attention,
                      "remat_policy": shape.remat_policy},
            "slice_backend": cfg.slice_backend,
            "topology": {"num_slices": backend.num_slices, "devices_per_slice": cfg.devices_per_slice,
                         "processes": _process_count(cfg)},
            "memory": memory,
        })
        recorder.event("run_started", 0, slices=list(range(cfg.num_slices)), backend=cfg.slice_backend,
                       run_id=cfg.run_id or "", **basis._asdict())
        try:
            result = _retry_loop(ctx)
        except Exception as error:
            # The record says how this process ends, so a reader tells a stop the group restart retries (a lost
            # slice, a stall) from one for good (--elastic-stop-on-repeat, a user error): the code decides.
            state, stopped_why, exit_code = stop_record(error)
            peer_gone = is_peer_gone(error)
            raise
        recorder.event("run_finished", result.final_step, attempts=result.attempts, recoveries=result.recoveries)
        state, exit_code = "done", 0
        return result
    finally:
        if ctx.live_checks is not None:  # no thread may be compiling when the interpreter exits
            ctx.live_checks.close()
        ctx.watchdog.close()
        if profile is not None:
            profile.close()
        ctx.progress.finish(state, stopped_why, exit_code, ctx.drain)
        recorder.close()
        startup_recorder.close()  # process 0's is `recorder`: closing it twice is a no-op
        if lease is not None:
            lease.release()
        backend.close(peer_gone=peer_gone)


def _executable_store(cfg: TrainerConfig) -> ExecutableStore | None:
    """The run's serialized steps (trainer.core.executable_store), or None where it keeps none."""
    where = store_dir(cfg.compilation_cache_dir, cfg.checkpoint_path, os.environ)
    return None if where is None else ExecutableStore(where)


def stop_record(error: Exception) -> tuple[str, str, int]:
    """(state, why, exit code) of the progress record for a run that ends with `error`."""
    code = exit_code_for(error)
    state = {PREEMPTED.code: "preempted", STALLED.code: "stalled"}.get(code.code, "failed")
    why = str(error) if isinstance(error, TrainerStopped) else ""  # a preemption names who heard it
    return state, why, code.code


def _from_process_0(value: int) -> int:
    """Process 0's `value` on every process of the group (a collective: every process calls it)."""
    import numpy as np
    from jax.experimental import multihost_utils

    return int(multihost_utils.broadcast_one_to_all(np.int32(value)))


def _observing(*observers: Observer | None) -> Observer:
    """Every observer given of the records, in order (the local run's live view, if any, first)."""
    chosen = [o for o in observers if o is not None]

    def each(kind: str, record: dict) -> None:
        for observe in chosen:
            observe(kind, record)

    return each


def fit_to_backend(cfg: TrainerConfig, backend: SliceBackend) -> TrainerConfig:
    """The config on the backend's real topology. Pathways and a TPU cluster decide the devices per
    slice (not --devices-per-slice); the global batch is checked against them here, before anything is
    written."""

    if not cfg.topology_from_hardware:
        return cfg
    where = "the Pathways backend" if cfg.slice_backend == "pathways" else "the TPU cluster"
    return cfg.on_hardware(backend.num_slices, devices_per_slice(backend.slice_devices()), where)


def _remat_resolved(cfg: TrainerConfig, backend: SliceBackend, donate: bool) -> TrainerConfig:
    """`cfg` with --remat-policy auto resolved for the full mesh's device (trainer.core.memory.choose_remat)."""
    if cfg.remat_policy != "auto":
        return cfg

    from trainer.core import mesh as meshlib
    from trainer.core import state as core_state
    from trainer.core.memory import device_limit, with_remat_resolved

    mesh = meshlib.build_mesh(backend.slice_devices(), list(range(backend.num_slices)))
    limit = backend.memory_limit()
    limit = device_limit(mesh.devices.flat[0]) if limit is None else limit
    return with_remat_resolved(cfg, core_state.state_target(cfg, mesh), mesh, limit, donates=donate)


def _memory_record(cfg: TrainerConfig, backend: SliceBackend, donate: bool) -> dict:
    """The state's bytes in total and per device on the full mesh, after the memory check."""
    from trainer.core import mesh as meshlib
    from trainer.core import state as core_state
    from trainer.core.memory import memory_record

    mesh = meshlib.build_mesh(backend.slice_devices(), list(range(backend.num_slices)))
    record = memory_record(cfg, core_state.state_target(cfg, mesh), mesh, limit=backend.memory_limit(), donates=donate)
    # The cost of keeping the last completed step alive through a step (trainer.elastic.live_recovery): a step that
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
            ctx.drain = drain.outcome(ctx.current_step, ctx.latest_committed, False,
                                      "between attempts: no state to save")
            rec.event("preempted", ctx.current_step, signal=ctx.stop.requested, checkpoint_step=ctx.latest_committed,
                      drain_steps_lost=ctx.drain.steps_lost, save_skipped=ctx.drain.save_skipped,
                      heard_by=backend.process_index, heard_slice=getattr(backend, "slice_index", None))
            raise TrainerStopped(PREEMPTED, f"preempted ({ctx.stop.requested}) between attempts at step "
                                            f"{ctx.current_step}; newest checkpoint: step {ctx.latest_committed}")
        admit = None
        if previous is not None and ctx.rejoin is not None:
            admit = Admission(ctx.rejoin, previous, recovery.lost if recovery is not None else (), ctx.current_step)
        active, waited = policy.wait_for_slices(backend, clock, admit)
        previous = active
        rec.event("slices_ready", ctx.current_step, slices=active, wait_s=round(waited, 6), attempt=attempt)
        if ctx.timeline is not None:
            ctx.timeline.mark("slices_joined", ctx.current_step)
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
            details: dict[str, Any] = {"error": first_line(error), "kind": verdict.kind, "attempt": attempt,
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
    an expected, handled event (reported in events.jsonl), and for a save that ran out of space (the one
    StorageFull line says it), so drop those records."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None and (classify(exc) is not None or no_space_errno(exc) is not None):
            return False
        return "DATA_LOSS" not in record.getMessage()


def quiet_expected_errors() -> None:
    """`_QuietExpectedErrors` on absl's and asyncio's loggers, once per process and never removed, as each
    drops only the expected errors: a failed save's gathered future is collected after train() returns, and
    asyncio logs its traceback then ("exception was never retrieved"); a save's other writer threads (orbax's
    _SignalingThread) log theirs through absl when their write fails too, after the run's one error line
    (seen on a file-size limit: a second EFBIG's traceback after the 74 line)."""
    for name in ("absl", "asyncio"):
        logger = logging.getLogger(name)
        if _QuietExpectedErrors not in {type(f) for f in logger.filters}:
            logger.addFilter(_QuietExpectedErrors())


class _QuietClosedLoop:
    """An unraisable hook that drops "Event loop is closed" and hands every other unraisable exception to
    `previous`, the hook it replaced."""

    def __init__(self, previous: Callable[[Any], object]) -> None:
        self.previous = previous

    def __call__(self, unraisable: Any) -> None:
        exc = unraisable.exc_value
        if not (isinstance(exc, RuntimeError) and str(exc) == "Event loop is closed"):
            self.previous(unraisable)


def _quiet_abandoned_save_callbacks() -> None:
    """After a failed save (a full disk, a lost slice) orbax closes the event loop of its writer while
    tensorstore still holds callbacks for it; each one then reports "Event loop is closed" as an unraisable
    exception, a traceback on stderr after the one-line error. The save is already reported and abandoned,
    so drop exactly those; every other unraisable exception reaches the previous hook. Installed once per
    process: the callbacks may fire after train() has returned."""
    if not isinstance(sys.unraisablehook, _QuietClosedLoop):
        sys.unraisablehook = _QuietClosedLoop(sys.unraisablehook)
