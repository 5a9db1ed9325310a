"""Where an attempt's starting state comes from, and what its restore cost: the survivors' live copy, the
newest valid checkpoint (its fingerprint check compiled beside orbax's read), or a fresh initialisation."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

from trainer.ckpt.checkpoint import CheckpointStore, donatable
from trainer.ckpt.fingerprint import prepare as prepare_fingerprint
from trainer.core import state as core_state
from trainer.elastic import live_recovery
from trainer.elastic.step_ahead import StepAhead

if TYPE_CHECKING:
    from trainer.elastic.context import AttemptContext, AttemptRecovery


def starting_state(ctx: AttemptContext, store: CheckpointStore, mesh: Any, active: list[int],
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
    target = core_state.state_target(cfg, mesh)
    # The fingerprint check's reduction compiles from the target's shapes beside orbax's read, not after it (on
    # a chip, a compile of seconds); a failure here is the check's own to raise again.
    verifier = StepAhead(partial(prepare_fingerprint, target), ctx.clock, name="elxpk-fingerprint-ahead")
    try:
        restored = store.restore_latest(target)
    finally:
        verifier.join()
    if restored is None:
        return 0, ctx.steps.init_state(mesh), {"global_next_index": 0}, "init", fallback if recovery else ""
    start, state, data_state = restored
    return start, donatable(state), data_state, "checkpoint", fallback


def restore_seconds(store: CheckpointStore | None) -> dict[str, float]:
    """restore_done's read_s and verify_s, when the state was read from a checkpoint."""
    if store is None or store.restore_seconds is None:
        return {}
    read_s, verify_s = store.restore_seconds
    return {"read_s": round(read_s, 6), "verify_s": round(verify_s, 6)}
