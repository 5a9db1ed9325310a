"""One attempt: build the mesh, restore the newest valid checkpoint (or initialise), train to the end.

This is the only code path into training. The elastic loop calls it again after a slice loss in the
same process, and a cold start after a group restart calls it once: both restore the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from elxpk_contract.exit_codes import PREEMPTED, SLICE_LOST, TrainerStopped
from trainer.ckpt.checkpoint import CheckpointStore
from trainer.ckpt.fingerprint import prepare as prepare_fingerprint
from trainer.core import mesh as meshlib
from trainer.core import state as core_state
from trainer.core import step as steplib
from trainer.core.optim import learning_rate
from trainer.core.sharding import host_copy
from trainer.elastic import drain, live_recovery
from trainer.elastic.context import (
    AttemptContext,
    AttemptRecovery,
    AttemptResult,
    ResizeDoesNotFit,
    ScaleUpSignal,
)
from trainer.elastic.starting_state import restore_seconds, starting_state
from trainer.elastic.step_ahead import StepAhead
from trainer.metrics import loss_hex

if TYPE_CHECKING:
    from trainer.elastic.group_stop import GroupStop


def _scalar(value: int, mesh: Any) -> Any:
    import jax

    arr = np.int32(value)
    return jax.make_array_from_callback((), meshlib.replicated(mesh), lambda _: arr)


def run_attempt(ctx: AttemptContext, active: list[int], recovery: AttemptRecovery | None) -> AttemptResult:
    """Train on the mesh of `active` from the state a restore finds to the last step, in named phases.
    Raises ScaleUpSignal (a slice is back), ResizeDoesNotFit, TrainerStopped (preemption) or the error
    of a failed step; whatever happens, `close` joins the writer and frees the attempt's arrays."""
    attempt = _Attempt(ctx, active, recovery)
    ok = False
    try:
        if ctx.progress is not None:
            ctx.progress.phase("restoring")
        attempt.start_step()  # loaded or compiled beside the restore (trainer/elastic/step_ahead.py)
        restored = attempt.restore()
        prepare_s = attempt.start_live_checks(restored.source)
        if ctx.progress is not None:
            ctx.progress.phase("compiling")
        attempt.compile()
        ctx.backend.after_compile()
        attempt.record_restore(restored, prepare_s)
        attempt.arm_watchdog()
        for step in range(attempt.start, ctx.cfg.steps):
            attempt.before_step(step)
            attempt.after_step(step, *attempt.run_step(step))
        result = attempt.finish()
        ok = True
        return result
    finally:
        attempt.close(ok)


@dataclass(frozen=True)
class _Restored:
    source: str  # "live", "checkpoint" or "init"
    fallback: str  # why live recovery was not used ("" when it was, or was not wanted)
    at: float  # unix seconds when the state was ready (restore_done's time)
    rebuild_s: float  # restore_started to the state being ready


class _Attempt:
    """One attempt's mesh, checkpoint store and current state, and its phases in the order they run."""

    def __init__(self, ctx: AttemptContext, active: list[int], recovery: AttemptRecovery | None) -> None:
        self.ctx, self.active, self.recovery = ctx, active, recovery
        backend = ctx.backend
        self.mesh = meshlib.build_mesh(backend.slice_devices(), active)

        def fault_hook(point: str, step: int) -> None:
            backend.fault_point(point, step, active)

        lease = ctx.lease
        self.store = CheckpointStore(ctx.cfg, fault_hook=fault_hook, recorder=ctx.recorder, clock=ctx.clock,
                                     primary=backend.process_index == 0,
                                     fence=lease.check_held if lease is not None else None,
                                     keep_uncommitted=lease is not None and lease.took_over is not None)
        self.keep_live = live_recovery.unavailable(ctx.cfg, backend) is None
        self.state: Any = None
        self.tokens: Any = None
        self.start = 0
        self.compiled: steplib.Compiled | None = None
        self.was_compiled = False
        self.last_step_s = 0.0  # the last step's seconds: the drain's rule reckons with one more
        self.drain_verdict: drain.SaveVerdict | None = None  # decided once, at the first boundary after SIGTERM
        self.step_ahead: StepAhead | None = None

    def start_step(self) -> None:
        """Start making the step for this mesh (StepCache.get: reused, loaded or compiled) in the background."""
        self.step_ahead = StepAhead(lambda: self.ctx.steps.get(self.mesh), self.ctx.clock)

    def restore(self) -> _Restored:
        """The starting state: the survivors' live copy, the newest valid checkpoint, or a fresh one, while the
        step is made beside it (start_step); a checkpoint of another configuration was refused before the
        attempt (trainer.ckpt.checkpoint.refuse_other_configuration)."""
        ctx = self.ctx
        ctx.recorder.event("restore_started", ctx.current_step, slices=list(self.active))
        if ctx.timeline is not None:
            ctx.timeline.mark("restore_started", ctx.current_step)
        began = ctx.clock.monotonic()
        start, self.state, data_state, source, fallback = starting_state(ctx, self.store, self.mesh, self.active,
                                                                          self.recovery)
        ctx.dataset.set_state(data_state)
        ctx.current_step = self.start = start
        if ctx.history is not None:  # a group restart that repeats its predecessors' failure stops here
            ctx.history.started(start, ctx.progress.previous_state if ctx.progress is not None else None)
        restored = _Restored(source, fallback, ctx.clock.time(), ctx.clock.monotonic() - began)
        if ctx.timeline is not None:
            ctx.timeline.mark("restore_done", start, at=restored.at)
        if self.keep_live and ctx.live is None:
            ctx.live = live_recovery.keep(start, self.state, data_state, self.active)
        return restored

    def start_live_checks(self, source: str) -> float:
        """The live checks compile in the background from the session's first attempt, beside the step's
        compile; their seconds are reported once, with the first live recovery (returned here, else 0)."""
        ctx = self.ctx
        prepare_s = 0.0
        if source == "live" and ctx.live_checks is not None:
            prepare_s, ctx.live_checks = ctx.live_checks.seconds or 0.0, None
        if self.keep_live and not ctx.live_checks_started:
            ctx.live_checks_started = True
            ctx.live_checks = live_recovery.Preparation(lambda m: core_state.state_target(ctx.cfg, m),
                                                        ctx.backend.slice_devices(),
                                                        list(range(ctx.backend.num_slices)), ctx.clock)
        return prepare_s

    def compile(self) -> None:
        """The step for this mesh (compiled, or reused), checked against device memory; every compile happens
        before the watchdog is armed, the state's fingerprint program included (the saves use it)."""
        if self.step_ahead is None:
            self.start_step()
        assert self.step_ahead is not None
        self.compiled, self.was_compiled = self.step_ahead.result()
        if self.ctx.timeline is not None:  # when it was ready, which may be before the restore was done
            self.ctx.timeline.mark("executable_ready", self.start, at=self.step_ahead.ready_at,
                                   how=self.executable_source)
        _check_fits(self.ctx, self.compiled, self.mesh, self.active)
        prepare_fingerprint(self.state)

    def _compile_wait(self, restored: _Restored) -> float:
        """The seconds the attempt waited for its step after the restore: the step is made beside the restore
        (step_ahead), so only this part delayed the first step (what report and status count as compile)."""
        assert self.step_ahead is not None and self.step_ahead.ready_at is not None
        return max(0.0, self.step_ahead.ready_at - restored.at)

    @property
    def executable_source(self) -> str:
        """How this attempt's step was made (elxpk_contract.event_records.EXECUTABLE_SOURCES)."""
        assert self.compiled is not None
        return self.compiled.how if self.was_compiled else "reused"

    def record_restore(self, restored: _Restored, prepare_s: float) -> None:
        """restore_done, written once the step is compiled so it carries the compile time; its `time` is
        still the restore's end."""
        ctx, compiled, was = self.ctx, self.compiled, self.was_compiled
        assert compiled is not None
        source = restored.source
        ctx.recorder.event("restore_done", self.start, at=restored.at, from_checkpoint=source == "checkpoint",
                           slices=list(self.active), compile_needed=was,
                           compile_s=round(self._compile_wait(restored), 6) if was else 0.0,
                           compiled_bytes_per_device=compiled.bytes_per_device if was else None,
                           state_source=source, live_fallback=restored.fallback,
                           rebuild_s=round(restored.rebuild_s, 6) if source == "live" else None,
                           live_prepare_s=round(prepare_s, 6), executable=self.executable_source,
                           executable_store=compiled.store if was else "",
                           **restore_seconds(self.store if source == "checkpoint" else None))
        if source == "checkpoint" and ctx.progress is not None:
            ctx.progress.checkpoint(self.start, restored.at)

    def arm_watchdog(self) -> None:
        if self.ctx.watchdog is not None:  # from here on steps should complete; restore and compile are done
            self.ctx.watchdog.arm(self.start, self.active)

    def before_step(self, step: int) -> None:
        """Preemption, the injected faults of the step, and a returning slice (which ends the attempt)."""
        ctx, active = self.ctx, self.active
        ctx.current_step = step
        # Under multi-controller an injected fault is the host's death (the process exits 137), and a dead
        # host honours no SIGTERM: it strikes first. Otherwise a group whose peer died first could leave
        # this process preempted by the group restart's SIGTERM, and the attempt history would read the
        # lost group as a preemption (the trainer's own record cannot tell them apart; docs/trainer.md).
        # A single controller's slice loss is recovered in process, so a pending SIGTERM saves first there.
        dies_first = not ctx.backend.in_process_retry
        if dies_first:
            ctx.backend.fault_point("step", step, active)
        group_stop = None
        if ctx.stop is not None:
            heard = ctx.stop.requested
            if heard is not None and self.drain_verdict is None:
                self.drain_verdict = drain.verdict(ctx.cfg.termination_grace_seconds, ctx.stop.seconds_since(),
                                                   self.last_step_s,
                                                   drain.expected_save_s(self.store.save_s, self.state))
            group_stop = ctx.backend.stop_at(step, heard, self.drain_verdict is not None and self.drain_verdict.save)
        if group_stop is not None:
            _stop_for_preemption(self.store, step, self.state, ctx, group_stop, self.drain_verdict)
        if not dies_first:
            ctx.backend.fault_point("step", step, active)
        returning = ctx.policy.scale_up_ready(ctx.backend, active)
        if returning and ctx.rejoin is not None:  # a returning slice that fails its check is still lost
            returning = ctx.rejoin.admit(returning, step)
        if returning:
            if not self.keep_live:  # live: the returning slices get the state from a survivor instead
                _checkpoint_now(self.store, step, self.state, ctx)
            ctx.recorder.event("scale_up", step, slices=list(active), returning=returning)
            raise ScaleUpSignal()

    def run_step(self, step: int) -> tuple[Any, float, float]:
        """One step on the devices: (its batch, its loss, its seconds)."""
        ctx = self.ctx
        assert self.compiled is not None
        batch = ctx.dataset.next_batch()
        ctx.backend.fault_point("data", step, self.active)
        self.tokens = meshlib.put_batch(batch.tokens, self.mesh)
        started = ctx.clock.monotonic()
        self.state, loss = self.compiled.executable(self.state, self.tokens, _scalar(step, self.mesh))
        # A slice lost while the step runs surfaces here, at the wait for its result: `state` is already
        # the step's (unusable) output, and its input is gone where the step donates it.
        ctx.backend.fault_point("mid", step, self.active)
        # Sync on every step: unsynced CPU collectives can deadlock (testing notes 2b).
        value = float(loss.addressable_data(0))
        self.last_step_s = ctx.clock.monotonic() - started
        return batch, value, self.last_step_s

    def after_step(self, step: int, batch: Any, loss: float, elapsed: float) -> None:
        """The step's metric, the live state, the watchdog and progress, and the save cadence."""
        ctx, cfg = self.ctx, self.ctx.cfg
        record: dict[str, Any] = {
            "step": step,
            "loss": loss_hex(loss),
            "lr": learning_rate(step, cfg.learning_rate, cfg.warmup_steps, cfg.decay_steps),
            "step_time_s": round(elapsed, 6),
            "examples": [batch.first, batch.end],
            "slices": list(self.active),
            "time": ctx.clock.time(),  # when the step ended: the report times recoveries with it
        }
        ctx.recorder.metric(record)
        ctx.last_losses[step] = record["loss"]
        if ctx.timeline is not None:
            ctx.timeline.mark("first_step_done", step, at=record["time"])
        if self.keep_live:  # the step did not donate its input; from here the new state is the one to keep
            ctx.live = live_recovery.keep(step + 1, self.state, ctx.dataset.get_state(), self.active)
        if ctx.watchdog is not None:
            ctx.watchdog.beat(step + 1)
        if ctx.progress is not None:
            ctx.progress.step_done(step + 1, record["time"], ctx.attempt)
        if self.recovery is not None:
            ctx.recorder.event("first_step_after_recovery", step, reason=self.recovery.reason,
                               recompiled=self.was_compiled,
                               recovery_s=round(ctx.clock.monotonic() - self.recovery.detected_at, 6))
            self.recovery = None
        self.store.poll()
        _note_commit(self.store, ctx)
        done = step + 1
        if done % cfg.checkpoint_period == 0 or done == cfg.steps:
            self.store.save(done, self.state, ctx.dataset.get_state())

    def finish(self) -> AttemptResult:
        """Every step ran: wait for the last commit (bounded by orbax's timeout, not the watchdog) and copy
        the parameters to the host (FSDP: assembled from this process's shards)."""
        import jax

        ctx = self.ctx
        ctx.current_step = ctx.cfg.steps
        if ctx.watchdog is not None:
            ctx.watchdog.disarm()
        self.store.poll(block=True)
        _note_commit(self.store, ctx)
        return AttemptResult(ctx.cfg.steps, jax.tree.map(host_copy, self.state["params"]))

    def close(self, ok: bool) -> None:
        """Cleanup between attempts: join the writer, close the manager, drop this attempt's arrays. The live
        state survives a failed attempt (the next one rebuilds from it); a finished one frees it."""
        import jax

        ctx = self.ctx
        if ctx.watchdog is not None:
            ctx.watchdog.disarm()
        if self.step_ahead is not None:  # an attempt that failed in its restore: never leave XLA compiling
            self.step_ahead.join()
        try:
            self.store.close(raise_errors=ok)
        finally:
            _note_commit(self.store, ctx)
            ctx.blocking_s.extend(self.store.blocking_s)
            if ok:
                ctx.live = None
            kept = ctx.live.leaf_ids() if ctx.live is not None else set()
            for leaf in jax.tree.leaves((self.state, self.tokens)):
                if id(leaf) not in kept and not leaf.is_deleted():
                    leaf.delete()


def _check_fits(ctx: AttemptContext, compiled: steplib.Compiled, mesh: Any, active: list[int]) -> None:
    """Before the first step allocates anything: XLA's own figure for this mesh against the device's limit.
    The full width is refused with one line (the pre-compile estimate let it through); a narrower mesh
    (a resize: each survivor carries more shards) makes the run wait for more slices instead."""
    from trainer.core.memory import compiled_refusal

    limit = ctx.backend.memory_limit()
    refusal = compiled_refusal(ctx.cfg, compiled.bytes_per_device, mesh, limit)
    if refusal is None:
        return
    if len(active) < ctx.backend.num_slices:
        assert compiled.bytes_per_device is not None and limit is not None
        raise ResizeDoesNotFit(list(active), compiled.bytes_per_device, limit)
    raise refusal


def _note_commit(store: CheckpointStore, ctx: AttemptContext) -> None:
    if store.latest_valid is not None and (ctx.latest_committed is None or store.latest_valid > ctx.latest_committed):
        ctx.latest_committed = store.latest_valid
        if ctx.progress is not None:
            ctx.progress.checkpoint(store.latest_valid, ctx.clock.time())


def _stop_for_preemption(store: CheckpointStore, step: int, state: Any, ctx: AttemptContext, stop: GroupStop,
                         verdict: drain.SaveVerdict | None) -> None:
    """SIGTERM arrived here or at a peer (`stop`): commit the current step where the group agreed to save
    (trainer.elastic.drain: the grace period left covers the save), then stop, with PREEMPTED where this
    process heard the signal.

    A single controller (simulated, Pathways) decides and saves by itself. Under multi-controller every
    process takes part in the save of the sharded state, and a preemption usually signals only some of
    them: the group stops together at the step it agreed on (trainer.elastic.group_stop), and every process
    saves it, or none, as the announcer decided. A process stopped by a peer's signal lost that peer: it
    ends as a lost slice (SLICE_LOST, counted, as when the peer dies), and its record names the peer."""

    assert ctx.stop is not None
    # Only a signal heard by this boundary counts as this process's own. Waiting for one would mislabel a lost
    # peer: its pod's failure makes the JobSet restart the group, whose SIGTERM reaches the survivors within a
    # second, and the run's lost slice would then read as a preemption, with no recovery in the report.
    heard = ctx.stop.requested
    saving = stop.save and step > 0
    if saving:
        if ctx.watchdog is not None:
            ctx.watchdog.disarm()  # the save has the grace period as its bound
        _checkpoint_now(store, step, state, ctx)
    else:  # a periodic save under way commits first (every process waits for it): the restart starts there
        store.poll(block=True)
        _note_commit(store, ctx)
    if step == 0:
        skipped = "no step was done yet: nothing to save"
    elif verdict is not None and stop.process == ctx.backend.process_index:
        skipped = f"too little grace left to save: {verdict.why}"
    else:
        skipped = f"too little grace left to save, as process {stop.process} (which heard the signal) reckoned"
    out = ctx.drain = drain.outcome(step, ctx.latest_committed, saving, skipped)
    fields: dict[str, Any] = {"drain_steps_lost": out.steps_lost, "save_skipped": out.save_skipped}
    said = (f"saved step {step} on the way out" if saving else out.save_skipped) + (
        f"; the restart rewinds {out.steps_lost} step{'' if out.steps_lost == 1 else 's'}" if out.steps_lost
        else "; the restart rewinds nothing")
    if heard is None:
        why = (f"process {stop.process}" + ("" if stop.slice is None else f" (slice {stop.slice})") +
               f" was preempted ({stop.signal}); the group stopped together at step {step}")
        ctx.recorder.event("failure_detected", step, slices_lost=[] if stop.slice is None else [stop.slice],
                           error=why, kind="peer_preempted", attempt=ctx.attempt, cause=SLICE_LOST.name,
                           stopped=why, heard_by=stop.process, saved=saving, **fields)
        raise TrainerStopped(SLICE_LOST, f"{why}; {said}; newest checkpoint: step {ctx.latest_committed}")
    heard_slice = getattr(ctx.backend, "slice_index", None)
    ctx.recorder.event("preempted", step, signal=heard, checkpoint_step=ctx.latest_committed, saved=saving,
                       heard_by=ctx.backend.process_index, heard_slice=heard_slice, **fields)
    # Which process heard it, in the words the progress record keeps: once the JobSet restart has deleted the
    # pods, `status --why` has the victim from this line alone (the records' writer is process 0, so its own
    # SIGTERM, slice 0's, is told as a peer's is, issue 52)
    me = "" if heard_slice is None else f"process {ctx.backend.process_index} (slice {heard_slice}) was "
    raise TrainerStopped(PREEMPTED, f"{me}preempted ({heard}) at step {step}; {said}; newest checkpoint: step "
                                    f"{ctx.latest_committed}")


def _checkpoint_now(store: CheckpointStore, step: int, state: Any, ctx: AttemptContext) -> None:
    """Commit the current step (before restarting wider, or stopping), so the restart rewinds nothing."""
    if not store.has(step):
        store.save(step, state, ctx.dataset.get_state())
    store.poll(block=True)
    _note_commit(store, ctx)
