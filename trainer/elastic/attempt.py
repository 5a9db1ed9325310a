"""One attempt: build the mesh, restore the newest valid checkpoint (or initialise), train to the end.

This is the only code path into training. The elastic loop calls it again after a slice loss in the
same process, and a cold start after a group restart calls it once: both restore the same way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from trainer.ckpt.checkpoint import CheckpointStore
from trainer.ckpt.fingerprint import prepare as prepare_fingerprint
from trainer.core import mesh as meshlib
from trainer.core import state as core_state
from trainer.core import step as steplib
from trainer.core.optim import learning_rate
from trainer.core.sharding import host_copy
from trainer.elastic import live_recovery
from trainer.elastic.context import (
    AttemptContext,
    AttemptRecovery,
    AttemptResult,
    ResizeDoesNotFit,
    ScaleUpSignal,
)
from trainer.metrics import loss_hex

if TYPE_CHECKING:
    pass


def _scalar(value: int, mesh: Any) -> Any:
    import jax

    arr = np.int32(value)
    return jax.make_array_from_callback((), meshlib.replicated(mesh), lambda _: arr)


def run_attempt(ctx: AttemptContext, active: list[int], recovery: AttemptRecovery | None) -> AttemptResult:
    import jax

    cfg, backend, rec = ctx.cfg, ctx.backend, ctx.recorder
    mesh = meshlib.build_mesh(backend.slice_devices(), active)

    def fault_hook(point: str, step: int) -> None:
        backend.fault_point(point, step, active)

    store = CheckpointStore(cfg, fault_hook=fault_hook, recorder=rec, clock=ctx.clock,
                            primary=backend.process_index == 0)
    state = tokens = None
    ok = False
    keep_live = live_recovery.unavailable(cfg, backend) is None
    try:
        rec.event("restore_started", ctx.current_step, slices=list(active))
        began = ctx.clock.monotonic()
        start, state, data_state, source, fallback = _starting_state(ctx, store, mesh, active, recovery)
        ctx.dataset.set_state(data_state)
        ctx.current_step = start
        restored_at, rebuild_s = ctx.clock.time(), ctx.clock.monotonic() - began
        if keep_live and ctx.live is None:
            ctx.live = live_recovery.keep(start, state, data_state, active)
        # Restore before compiling: a checkpoint of another configuration fails fast. The event is written
        # once the step is compiled, so it can carry the compile time; its `time` is still the restore's end.
        prepare_s = 0.0
        if source == "live" and ctx.live_checks is not None:  # reported once, with the first live recovery
            prepare_s, ctx.live_checks = ctx.live_checks.seconds or 0.0, None
        if keep_live and not ctx.live_checks_started:  # compiles beside the step's compile, then the steps
            ctx.live_checks_started = True
            ctx.live_checks = live_recovery.Preparation(lambda m: core_state.state_target(cfg, m),
                                                        backend.slice_devices(), list(range(backend.num_slices)),
                                                        ctx.clock)
        compiled, was_compiled = ctx.steps.get(mesh)
        _check_fits(ctx, compiled, mesh, active)
        # Every compile before the watchdog is armed: the saves inside the step loop fingerprint the state.
        prepare_fingerprint(state)
        rec.event("restore_done", start, at=restored_at, from_checkpoint=source == "checkpoint", slices=list(active),
                  compile_needed=was_compiled, compile_s=round(compiled.compile_s, 6) if was_compiled else 0.0,
                  compiled_bytes_per_device=compiled.bytes_per_device if was_compiled else None,
                  state_source=source, live_fallback=fallback,
                  rebuild_s=round(rebuild_s, 6) if source == "live" else None, live_prepare_s=round(prepare_s, 6))
        if source == "checkpoint" and ctx.progress is not None:
            ctx.progress.checkpoint(start, restored_at)
        if ctx.watchdog is not None:  # from here on steps should complete; restore and compile are done
            ctx.watchdog.arm(start, active)

        for step in range(start, cfg.steps):
            ctx.current_step = step
            if ctx.stop is not None and ctx.stop.requested:
                _stop_for_preemption(store, step, state, ctx)
            backend.fault_point("step", step, active)
            returning = ctx.policy.scale_up_ready(backend, active)
            if returning:
                if not keep_live:  # live: the returning slices get the state from a survivor instead
                    _checkpoint_now(store, step, state, ctx)
                rec.event("scale_up", step, slices=list(active), returning=returning)
                raise ScaleUpSignal()
            batch = ctx.dataset.next_batch()
            backend.fault_point("data", step, active)
            tokens = meshlib.put_batch(batch.tokens, mesh)
            started = ctx.clock.monotonic()
            state, loss = compiled.executable(state, tokens, _scalar(step, mesh))
            # A slice lost while the step runs surfaces here, at the wait for its result: `state` is already
            # the step's (unusable) output, and its input is gone where the step donates it.
            backend.fault_point("mid", step, active)
            # Sync on every step: unsynced CPU collectives can deadlock (testing notes 2b).
            loss = float(loss.addressable_data(0))
            elapsed = ctx.clock.monotonic() - started
            record: dict[str, Any] = {
                "step": step,
                "loss": loss_hex(loss),
                "lr": learning_rate(step, cfg.learning_rate, cfg.warmup_steps, cfg.decay_steps),
                "step_time_s": round(elapsed, 6),
                "examples": [batch.first, batch.end],
                "slices": list(active),
                "time": ctx.clock.time(),  # when the step ended: the report times recoveries with it
            }
            rec.metric(record)
            ctx.last_losses[step] = record["loss"]
            if keep_live:  # the step did not donate its input; from here the new state is the one to keep
                ctx.live = live_recovery.keep(step + 1, state, ctx.dataset.get_state(), active)
            if ctx.watchdog is not None:
                ctx.watchdog.beat(step + 1)
            if ctx.progress is not None:
                ctx.progress.step_done(step + 1, record["time"], ctx.attempt)
            if recovery is not None:
                rec.event("first_step_after_recovery", step, reason=recovery.reason, recompiled=was_compiled,
                          recovery_s=round(ctx.clock.monotonic() - recovery.detected_at, 6))
                recovery = None
            store.poll()
            _note_commit(store, ctx)
            done = step + 1
            if done % cfg.checkpoint_period == 0 or done == cfg.steps:
                store.save(done, state, ctx.dataset.get_state())
        ctx.current_step = cfg.steps
        if ctx.watchdog is not None:  # the final commit wait is bounded by orbax's timeout instead
            ctx.watchdog.disarm()
        store.poll(block=True)
        _note_commit(store, ctx)
        params = jax.tree.map(host_copy, state["params"])  # FSDP: assembled from this process's shards
        ok = True
        return AttemptResult(cfg.steps, params)
    finally:
        if ctx.watchdog is not None:
            ctx.watchdog.disarm()
        # Cleanup between attempts: join the writer, close the manager, drop this attempt's arrays.
        try:
            store.close(raise_errors=ok)
        finally:
            _note_commit(store, ctx)
            ctx.blocking_s.extend(store.blocking_s)
            # The live state survives a failed attempt (the next one rebuilds from it); a finished one frees it.
            if ok:
                ctx.live = None
            kept = ctx.live.leaf_ids() if ctx.live is not None else set()
            for leaf in jax.tree.leaves((state, tokens)):
                if id(leaf) not in kept and not leaf.is_deleted():
                    leaf.delete()


def _starting_state(ctx: AttemptContext, store: CheckpointStore, mesh: Any, active: list[int],
                    recovery: AttemptRecovery | None) -> tuple[int, Any, dict, str, str]:
    """(step, state, data position, "live" | "checkpoint" | "init", why live was not used or "").

    After a failure or a scale-up, the state comes from the live replicas when it can; otherwise (and at
    the start of a session) from the newest valid checkpoint, or a fresh initialisation."""
    cfg, backend = ctx.cfg, ctx.backend
    fallback = ""
    kept, ctx.live = ctx.live, None
    why_not = live_recovery.unavailable(cfg, backend)
    if kept is not None and why_not is None and recovery is not None:
        if ctx.live_checks is not None:
            ctx.live_checks.wait()  # compiled in the background: do not compile the same checks twice
        survivors = live_recovery.survivors_of(kept, recovery.lost, active)
        state, problem = live_recovery.rebuild(kept, backend.slice_devices(), survivors, active)
        if state is not None:
            ctx.live = live_recovery.LiveState(kept.step, state, kept.data_state, tuple(active))
            # `K@restore` strikes the next restore of the state, whichever the source: here, the survivors'.
            backend.fault_point("restore", kept.step, active)
            return kept.step, state, dict(kept.data_state), "live", ""
        fallback = problem or "the live state could not be rebuilt"
    elif recovery is not None and why_not is None:
        fallback = "no live state was kept (the attempt failed before its state existed)"
    elif cfg.recovery == "live" and why_not is not None:
        fallback = why_not  # multi-controller: every restart is a cold start from storage
    del kept  # the old mesh's arrays: their buffers are freed once no rebuilt array shares them
    restored = store.restore_latest(core_state.state_target(cfg, mesh))
    if restored is None:
        return 0, ctx.steps.init_state(mesh), {"global_next_index": 0}, "init", fallback if recovery else ""
    start, state, data_state = restored
    return start, state, data_state, "checkpoint", fallback


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


def _stop_for_preemption(store: CheckpointStore, step: int, state: Any, ctx: AttemptContext) -> None:
    """SIGTERM arrived: commit the current step if this process can save alone, then stop with PREEMPTED.

    A single controller (simulated, Pathways) saves by itself. Under multi-controller every process takes
    part in a save, and a preemption usually signals only some of them, so a save could block until the
    grace period ends in SIGKILL: there the trainer stops at once and the group restart rewinds to the
    newest committed checkpoint."""
    from elxpk_contract.exit_codes import PREEMPTED, TrainerStopped

    saved = False
    if ctx.backend.in_process_retry and step > 0:
        if ctx.watchdog is not None:
            ctx.watchdog.disarm()  # the save has the grace period as its bound
        _checkpoint_now(store, step, state, ctx)
        saved = True
    assert ctx.stop is not None
    ctx.recorder.event("preempted", step, signal=ctx.stop.requested, checkpoint_step=ctx.latest_committed,
                       saved=saved)
    raise TrainerStopped(PREEMPTED, f"preempted ({ctx.stop.requested}) at step {step}; newest checkpoint: step "
                                    f"{ctx.latest_committed}" + (" (saved on the way out)" if saved else ""))


def _checkpoint_now(store: CheckpointStore, step: int, state: Any, ctx: AttemptContext) -> None:
    """Commit the current step (before restarting wider, or stopping), so the restart rewinds nothing."""
    if not store.has(step):
        store.save(step, state, ctx.dataset.get_state())
    store.poll(block=True)
    _note_commit(store, ctx)
