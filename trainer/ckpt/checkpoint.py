"""Validated orbax checkpoints: async saves, an on-device fingerprint, restore of the newest valid step.

One `CheckpointStore` lives for one attempt. It opens a fresh orbax CheckpointManager, so what it sees
is what is on storage, never an in-memory step cache left by a failed save (maxtext PR #5260).

Each step directory holds two orbax items saved as one unit: `state` (params + optimizer state) and
`meta` (step, data position, config fingerprint); plus `elxpk_digest.json`, written once orbax has
committed the step (elxpk_storage.digest). The fingerprint of every array (trainer.ckpt.fingerprint) is computed on
the devices when save() is called, so nothing is read back after a save; after a restore the restored
arrays are fingerprinted again, on the new mesh, and must match. Restore walks the steps newest first and
takes the first that is committed, lists its files at their sizes, reads and matches its fingerprint;
every step passed over is reported with its reason and moved aside (to `<checkpoint_dir>/elxpk-quarantine/`),
so a later save of the same step number cannot collide with it. Only the content is a reason to pass a step
over; a read that failed for a transient cause (out of memory, storage unavailable, access denied:
elxpk_contract.transient) is retried and then ends the process with 75, every step left in place
(trainer.ckpt.transient_retry).

The checkpoint directory may be local or `gs://...`: every file operation on it goes through
`elxpk_storage.checkpoint_files` and `elxpk_storage.digest` (etils.epath), as orbax's own do.
"""

from __future__ import annotations

import dataclasses
import gc
import sys
import threading
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

from elxpk_contract.errors import UsageError
from elxpk_contract.presets import EARLIER_DEFAULTS, SHAPE_SETTINGS, preset_value
from elxpk_contract.setting_rules import default, said
from elxpk_contract.settings import TrainerConfig
from elxpk_contract.step_names import canonical_step
from elxpk_contract.storage_full import storage_full_is_infrastructure, unwritable_is_usage
from elxpk_contract.transient import is_absence, transient_cause
from elxpk_storage import checkpoint_files as ckpt_storage
from elxpk_storage import digest
from trainer.ckpt.array_handler import state_handler
from trainer.ckpt.deadline import Deadline
from trainer.ckpt.fingerprint import Pending, fingerprint, mismatch
from trainer.ckpt.transient_retry import retry_transient
from trainer.clock import Clock

COMMIT_TIMEOUT_S = 600  # bounds every wait on the background writer
T = TypeVar("T")


class CheckpointStore:
    """Saves and restores one run's checkpoints for the duration of one attempt."""

    def __init__(self, cfg: TrainerConfig, *, fault_hook: Callable[[str, int], None], recorder: Any, clock: Clock,
                 primary: bool = True, fence: Callable[[], None] | None = None,
                 keep_uncommitted: bool = False) -> None:
        self._cfg = cfg
        self._clock = clock
        self.directory = ckpt_storage.checkpoint_root(cfg.checkpoint_path, said("checkpoint_dir"))  # orbax (OCDBT) needs absolute paths
        self._fault_hook = fault_hook
        self._recorder = recorder
        self._primary = primary
        self._fence = fence  # raises when a newer attempt holds the directory's writer lease
        self._keep_uncommitted = keep_uncommitted  # a live predecessor may still be writing them
        self._pending: tuple[int, float] | None = None  # (step, when save() was called)
        self._arrays: Pending | None = None  # the pending step's fingerprint; the training thread's only
        self._lock = threading.Lock()
        self.latest_valid: int | None = None
        # The restored step's seconds in orbax's read (into the devices) and in the fingerprint check (the
        # restore_done event's read_s and verify_s): the restore's two phases, told apart.
        self.restore_seconds: tuple[float, float] | None = None
        self.blocking_s: list[float] = []
        self.save_s: list[float] = []  # each committed save, from save() to when its commit was seen
        if primary:
            with unwritable_is_usage(said("checkpoint_dir"), self.directory, creating=True):
                self.directory.mkdir(parents=True, exist_ok=True)
            # The first reads of the restore: one transient answer is retried here as in the restore itself.
            self._retried("listing the unfinished saves", self._remove_uncommitted)
            self._retried("listing the checkpoint steps for links", self._set_aside_linked)
        self._manager = self._open()

    def _open(self):
        import orbax.checkpoint as ocp

        options = ocp.CheckpointManagerOptions(
            max_to_keep=self._cfg.max_to_keep,
            enable_async_checkpointing=True,
            create=True,
            async_options=ocp.options.AsyncOptions(
                timeout_secs=COMMIT_TIMEOUT_S, post_finalization_callback=self._before_commit
            ),
        )
        handlers = {"state": state_handler(ocp), "meta": ocp.JsonCheckpointHandler()}
        return ocp.CheckpointManager(self.directory, item_names=("state", "meta"), item_handlers=handlers,
                                     options=options)

    def _before_commit(self) -> None:
        # Runs in orbax's writer thread after every file is written and before the rename that commits
        # the step: the point where a slice death leaves a written but uncommitted checkpoint.
        with self._lock:
            pending = self._pending
        if pending is not None:
            self._fault_hook("save", pending[0])
        if self._fence is not None:
            self._fence()

    def _remove_uncommitted(self) -> None:
        """Saves that never committed (tmp directories; on gs://, steps without orbax's commit marker):
        report them, then delete them."""
        for path, step in ckpt_storage.uncommitted(self.directory):
            if self._keep_uncommitted:
                print(f"warning: kept {path}: this run's previous attempt may still be writing it (fenced off: it "
                      "commits nothing now); a later start removes it", file=sys.stderr, flush=True)
                continue
            self._recorder.event("checkpoint_skipped", step,
                                 reason="never committed: the save was interrupted before its commit")
            ckpt_storage.remove_tree(path, ignore_errors=True)

    def _set_aside_linked(self) -> None:
        """Steps that are, or hold, a symbolic link or a special file, moved aside before orbax opens the
        directory: its listing reads every step's _CHECKPOINT_METADATA through whatever it is (a link to
        /dev/zero reads until memory runs out, a FIFO blocks the open), before restore could pass over it.
        An object store holds neither. Other processes of a multi-controller run open the directory at the
        same time: they are not protected by this (the primary alone may move steps)."""
        if ckpt_storage.is_object_store(self.directory):
            return
        for path in sorted(self.directory.iterdir()):
            step = canonical_step(path.name)
            if step is None or not (ckpt_storage.is_link(path) or path.is_dir()):
                continue
            try:
                ckpt_storage.files_under(path)
            except ckpt_storage.LinkInStep as exc:
                self._recorder.event("checkpoint_skipped", step, reason=str(exc))
                self._quarantine(step, str(exc))

    # ---- saving -------------------------------------------------------------------------------
    def save(self, step: int, state, data_state: dict) -> None:
        """Start an async save of `state` after `step` completed steps; returns once it is in flight."""
        import orbax.checkpoint as ocp

        self.poll(block=True)  # orbax would wait for the previous save anyway; finish its digest first
        with self._out_of_space_is_infrastructure(step), unwritable_is_usage(said("checkpoint_dir"), self.directory):
            self._start_save(step, state, data_state, ocp)

    def _start_save(self, step: int, state, data_state: dict, ocp: Any) -> None:
        meta = {"step": step, "data": data_state, "fingerprint": self._cfg.fingerprint(),
                "config": self._cfg.fingerprint_fields()}
        started = self._clock.monotonic()
        with self._lock:
            self._pending = (step, started)
        args = ocp.args.Composite(state=ocp.args.PyTreeSave(state), meta=ocp.args.JsonSave(meta))
        saved = self._manager.save(step, args=args)
        # Dispatched after orbax's copies to the host (they queue first on each device) and not awaited:
        # its 8 bytes per array are fetched when the step commits. The state is unchanged until the next
        # step, which queues behind it.
        self._arrays = Pending(state)
        blocking = self._clock.monotonic() - started
        if not saved:
            with self._lock:
                self._pending = None
            raise RuntimeError(f"orbax refused to save step {step}: it already lists that step")
        self.blocking_s.append(blocking)
        self._recorder.event("checkpoint_saved", step, blocking_s=round(blocking, 6))

    def _out_of_space_is_infrastructure(self, step: int):
        """A save of `step` that ran out of space (orbax's files, its async commit, the digest) ends the run
        with StorageFull (exit 74, retryable), never as the user's error: the torn save is orbax's uncommitted
        `<step>.orbax-checkpoint-tmp` (or a step without a digest), which the next start removes or restore
        passes over, and the previous checkpoint is intact."""
        previous = self.latest_valid
        then = (f"step {previous}, the previous checkpoint, is intact" if previous is not None
                else "no earlier checkpoint of this run")
        return storage_full_is_infrastructure(f"--checkpoint-dir {self.directory}: saving step {step}", then=then)

    def poll(self, block: bool = False) -> None:
        """Digest the pending save if it has committed (or, with block=True, once it has)."""
        with self._lock:
            pending = self._pending
        if pending is None:
            return
        with self._out_of_space_is_infrastructure(pending[0]), unwritable_is_usage(said("checkpoint_dir"), self.directory):
            self._poll(pending, block)

    def _poll(self, pending: tuple[int, float], block: bool) -> None:
        if block:
            self._manager.wait_until_finished()
        elif self._manager.is_saving_in_progress():
            return
        self._manager.check_for_errors()  # a failed commit surfaces here, e.g. DATA_LOSS mid-save
        step, started = pending
        arrays, self._arrays = self._arrays, None
        with self._lock:
            self._pending = None
        if (self.directory / str(step)).is_dir():
            if self._primary:
                assert arrays is not None
                digest.write_digest(self.directory / str(step), step, self._cfg.fingerprint(), arrays.result())
            self.latest_valid = step
            self.save_s.append(self._clock.monotonic() - started)
            self._recorder.event("checkpoint_committed", step, commit_s=round(self.save_s[-1], 6))

    def has(self, step: int) -> bool:
        with self._lock:
            pending = self._pending
        return self.latest_valid == step or (pending is not None and pending[0] == step)

    def close(self, *, raise_errors: bool) -> None:
        """Join the writer, digest what committed, close the manager. Errors only if asked to."""
        try:
            self.poll(block=True)
        except Exception:
            self._arrays = None
            with self._lock:
                self._pending = None
            if raise_errors:
                self._close_manager_after_failure()
                raise
        if raise_errors:
            self._manager.close()
        else:
            self._close_manager_after_failure()

    def _close_manager_after_failure(self) -> None:
        """Close the manager of an attempt that already failed; its own error is dropped, so the attempt's
        error is the one reported. A save whose background thread could not start (no memory for its stack:
        "can't start new thread") leaves orbax holding that unstarted thread, and its close then raises
        "cannot join thread before it is started": that line used to replace the cause (exit 1, an internal
        error), and the run's threads still waiting for the save kept the process from exiting."""
        try:
            self._manager.close()
        except Exception as exc:  # noqa: BLE001 - the attempt's own error is already on its way out
            print(f"warning: closing the checkpoint manager after a failure: {type(exc).__name__}: "
                  f"{str(exc)[:200]}", file=sys.stderr)

    # ---- restoring ----------------------------------------------------------------------------
    def restore_latest(self, target, deadline: Deadline | None = None):
        """(step, state, data_state) of the newest valid checkpoint, or None when there is none. Bounded by
        `deadline` (--restore-timeout-seconds, 1800 by default, then exit 76): the stall watchdog is not armed
        during a restore."""
        import orbax.checkpoint as ocp

        with deadline or Deadline("the checkpoint restore", self._cfg.restore_timeout_seconds):
            # Numbered folders that appeared since the start are not steps: refuse rather than move them.
            self._retried("listing the checkpoint directory", partial(
                ckpt_storage.refuse_unsafe_checkpoints, self._cfg.checkpoint_path, said("checkpoint_dir")))
            try:
                return self._restore_newest_valid(target, ocp)
            finally:
                self._forget_quarantined()

    def _restore_newest_valid(self, target: Any, ocp: Any) -> tuple[int, Any, dict] | None:
        steps = self._retried("listing the checkpoint steps", lambda: sorted(self._manager.all_steps(), reverse=True))
        for step in steps:
            restored, reason = self._retried(f"reading step {step}", partial(self._try_step, step, target, ocp))
            if restored is not None:
                self._fault_hook("restore", step)
                self.latest_valid = step
                return step, restored["state"], restored["meta"]["data"]
            self._recorder.event("checkpoint_skipped", step, reason=reason)
            self._retried(f"setting step {step} aside", partial(self._quarantine, step, reason))
        return None

    def _retried(self, what: str, attempt: Callable[[], Any]) -> Any:
        return retried_read(what, attempt, self._clock)

    def _try_step(self, step: int, target: Any, ocp: Any) -> tuple[dict | None, str]:
        """(the restored items, "") or (None, what is wrong with the step's content). Every read of the step
        (its listing, digest and arrays) is in here, so a transient failure of any of them retries it whole."""
        step_dir = self.directory / str(step)
        record, reason = digest.checked(step_dir, step)  # the record read once: a second read could differ
        if record is None:
            return None, reason or ""
        self._check_fingerprint(step, record)
        return self._restore_step(step, target, ocp, record["arrays"])

    def _restore_step(self, step: int, target: Any, ocp: Any, arrays: dict) -> tuple[dict | None, str]:
        """(the restored items, "") or (None, why the step's content cannot be resumed). A transient
        failure (elxpk_contract.transient) raises: it says nothing about the step. Nor does one read that
        answered "not found" while a fresh listing still shows every file the digest lists
        (digest.confirm_absence raises UnconfirmedAbsence, retried like an outage)."""
        restore_args = ocp.checkpoint_utils.construct_restore_args(target)
        args = ocp.args.Composite(state=ocp.args.PyTreeRestore(item=target, restore_args=restore_args),
                                  meta=ocp.args.JsonRestore())
        began = self._clock.monotonic()
        try:
            restored = self._manager.restore(step, args=args)
        except Exception as exc:  # noqa: BLE001 - classified: transient raises, anything else is the content's
            self._manager.close()
            self._manager = self._open()  # a failed restore can poison the manager
            if transient_cause(exc) is not None:
                raise
            if is_absence(exc):
                return None, digest.confirm_absence(self.directory / str(step), step, exc)
            return None, f"orbax could not read it: {(str(exc).splitlines() or [''])[0][:200]}"
        read = self._clock.monotonic()
        try:
            problem = _meta_problem(restored["meta"], step)
            if problem is None:
                # Recomputed on the restored arrays, on this attempt's mesh: the sum does not depend on sharding.
                problem = mismatch(arrays, fingerprint(restored["state"]))
        except Exception:
            _delete_arrays(restored["state"])  # e.g. out of memory while fingerprinting: free before a retry
            raise
        if problem is None:
            self.restore_seconds = (read - began, self._clock.monotonic() - read)
            return restored, ""
        _delete_arrays(restored["state"])
        return None, problem

    def _check_fingerprint(self, step: int, found: dict) -> None:
        _refuse_fingerprint(self._cfg, self.directory, step, found)

    def _quarantine(self, step: int, reason: str) -> None:
        if not self._primary:
            return
        ckpt_storage.quarantine(self.directory, step, reason, now_ms=int(self._clock.time() * 1000))

    def _forget_quarantined(self) -> None:
        """Every process re-lists the steps once the primary has moved the bad ones away; a process
        that still listed a moved step would refuse to save it again and stall the others' save."""
        import jax

        if jax.process_count() > 1:
            from jax.experimental import multihost_utils

            multihost_utils.sync_global_devices("elxpk-checkpoint-quarantine")
        self._manager.reload()


def retried_read(what: str, attempt: Callable[[], T], clock: Clock) -> T:
    """`attempt()`, one of the reads a restore makes (a listing, a digest, metadata, arrays, and those of the
    start-up checks before it), with a transient failure (out of memory, storage unavailable, access denied,
    a "not found" a listing contradicts) retried and then ended with exit 75 (trainer.ckpt.transient_retry):
    such a failure never sets a step aside."""
    return retry_transient(what, attempt, free=_collect, sleep=clock.sleep)


def donatable(state: Any) -> Any:
    """The restored arrays re-made as XLA's own buffers, leaf by leaf (one leaf's copy at most at a time):
    what the attempt passes to a donating step after `restore_latest` (outside it, so that a restore's reads
    are the checkpoint's alone, not the copies' compiles).

    Arrays orbax restores can silently fail to donate (jax#18617): the step then keeps its input state
    beside its output, one state share more, and the first step after a resume runs out of memory where
    a fresh start's did not (goodfire-ai/spd#932). A copy under jit, donating its input, gives every leaf
    an ordinary buffer (aliased where the donation takes, copied where it does not)."""
    import jax

    return jax.tree.map(lambda leaf: _own_buffer(leaf.sharding)(leaf), state)


_OWN_BUFFERS: dict[Any, Any] = {}


def _own_buffer(sharding: Any) -> Any:
    import jax
    import jax.numpy as jnp

    if sharding not in _OWN_BUFFERS:
        # jnp.copy, not the identity: jit forwards an argument returned unchanged without running anything.
        _OWN_BUFFERS[sharding] = jax.jit(jnp.copy, out_shardings=sharding, donate_argnums=0)
    return _OWN_BUFFERS[sharding]


def refuse_other_configuration(cfg: TrainerConfig) -> None:
    """UsageError before anything is written when the newest step with a readable digest was written by a
    different configuration: the restore would refuse it anyway, but only after the run had rewritten
    run.json, appended events and marked its progress record failed."""
    root = ckpt_storage.checkpoint_root(cfg.checkpoint_path, said("checkpoint_dir"))
    if not root.is_dir():
        return
    steps = sorted((int(p.name) for p in ckpt_storage.children(root) if ckpt_storage.is_step_dir(p)),
                   reverse=True)
    for step in steps:
        record = digest.read_digest(root / str(step))
        if record is not None:
            _refuse_fingerprint(cfg, root, step, record)
            return


def _refuse_fingerprint(cfg: TrainerConfig, directory: Any, step: int, found: dict) -> None:
    want = cfg.fingerprint()
    if found.get("fingerprint") != want:
        earlier = earlier_default(cfg, found.get("fingerprint"))
        if earlier is not None:
            why, flags = earlier
            raise UsageError(
                f"{said('checkpoint_dir')} {directory}: step {step} was written under an earlier default ({why}; "
                f"the presets' heads are now 128 wide and the logits leave their matmul in the compute dtype, "
                f"which a TPU's matrix unit runs faster); to resume it keep that with {flags}, or use a new "
                f"{said('checkpoint_dir')}")
        raise UsageError(
            f"{said('checkpoint_dir')} {directory}: step {step} was written by a different configuration "
            f"(fingerprint {str(found.get('fingerprint'))[:40]}, this run {want}: model, batch, seed, data or "
            f"optimiser settings differ); use the original settings or a new {said('checkpoint_dir')}"
        )


def earlier_default(cfg: TrainerConfig, fingerprint: object) -> tuple[str, str] | None:
    """(what the default was, the flags that keep it) when `fingerprint` is this configuration's under one of
    the earlier defaults (elxpk_contract.presets.EARLIER_DEFAULTS) that apply to it, or under all of them
    together; else None. Only a setting the run left at its default is swapped: one given was the user's."""
    def left_at_default(name: str) -> bool:
        now = getattr(cfg, name)
        return now == (preset_value(cfg.model, name) if name in SHAPE_SETTINGS else default(name))

    applying = [(why, overrides) for why, model, overrides in EARLIER_DEFAULTS
                if model in (None, cfg.model) and all(left_at_default(name) for name in overrides)]
    together = ("; ".join(why for why, _ in applying), {k: v for _, o in applying for k, v in o.items()})
    for why, overrides in [*applying, together] if len(applying) > 1 else applying:
        earlier: dict[str, Any] = dict(overrides)  # each value has its setting's type (the table's rows)
        if dataclasses.replace(cfg, **earlier).fingerprint() == fingerprint:
            return why, " ".join(f"{said(name)} {value}" for name, value in overrides.items())
    return None


def _meta_problem(meta: object, step: int) -> str | None:
    """Why the restored `meta` item cannot resume step `step`: it must be the record save() wrote for it.

    A step directory that was renamed or copied under another number (digest rewritten to match) still
    records its own step; resuming it would train from the wrong step with the wrong data position."""
    if not isinstance(meta, dict) or not isinstance(meta.get("data"), dict):
        return "its metadata item has the wrong shape (no data position)"
    recorded = meta.get("step")
    if recorded != step or isinstance(recorded, bool):
        return f"it records step {recorded!r:.40} but sits in directory {step} (renamed or copied)"
    return None


def _collect() -> None:
    """Free what a failed try left: its frames hold the partly restored arrays in a cycle with the exception."""
    gc.collect()


def _delete_arrays(state: Any) -> None:
    """Free the restored arrays on the devices now, not when a cycle is collected."""
    import jax

    for leaf in jax.tree.leaves(state):
        if isinstance(leaf, jax.Array) and not leaf.is_deleted():
            leaf.delete()
