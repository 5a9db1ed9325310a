"""Slice backends: which devices form which slice, which slices are healthy, and where faults strike.

- `SimulatedSlices`: CPU devices grouped into slices; a fault injector kills and revives them and
  raises `jax.errors.JaxRuntimeError("DATA_LOSS: ...")`, as the Pathways client does.
- `PathwaysSlices`: slices from `device.slice_index`, health from pathwaysutils' per-slice probe.
- `MultiControllerSlices`: jax.distributed, one controller per host. Locally (explicit --coordinator) one
  slice per process; on a TPU cluster (no --coordinator) slices by `device.slice_index`, several processes
  per slice on multi-VM slices (how the process joins the cluster: trainer/elastic/cluster_join.py). A fault
  kills the processes of its slice (the supervisor or JobSet restarts the group, and the cold start restores).

Every backend answers the same four questions; the elastic loop never asks which one it talks to.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any

from etils import epath

from elxpk_contract.errors import UsageError
from elxpk_contract.faults import Fault, FaultSchedule
from elxpk_contract.setting_rules import said
from elxpk_contract.settings import TrainerConfig
from elxpk_contract.stall import STALL_FLOOR_S
from trainer.clock import Clock
from trainer.core.topology import TopologyError, group_slices, slice_of_process
from trainer.elastic import gke_gpu_env
from trainer.elastic.cluster_join import join_cluster
from trainer.elastic.group_stop import GroupStop, GroupStopBoard
from trainer.elastic.slice_health import run_checks


class SliceBackend:
    num_slices: int
    process_index: int = 0
    in_process_retry = True  # False where a slice loss ends the process (multi-controller)

    def slice_devices(self) -> dict[int, list[Any]]:
        raise NotImplementedError

    def healthy_slices(self) -> list[int]:
        raise NotImplementedError

    def memory_limit(self) -> int | None:
        """Bytes one device may use (its allocator's limit), or None where the device does not say (CPU)."""
        from trainer.core.memory import device_limit

        return device_limit(next(iter(self.slice_devices().values()))[0])

    def fault_point(self, point: str, step: int, active: Sequence[int]) -> None:
        """Called at each injection point; raises a slice-down error if an active slice is down."""

    def revived(self, active: Sequence[int]) -> list[int]:
        """Healthy slices that are not in `active`: a scale-up is possible."""
        return sorted(set(self.healthy_slices()) - set(active))

    def lost_slices(self, active: Sequence[int]) -> list[int]:
        """After a slice-down error: which active slices it took down (probed, as pathwaysutils does)."""
        return sorted(set(active) - set(self.healthy_slices()))

    def health_check(self, slice_index: int) -> str | None:
        """The check a returning slice passes before it receives the state (trainer.elastic.slice_health):
        None when healthy, else why not. The caller bounds it with a timeout."""

        return run_checks(self.slice_devices()[slice_index])

    # A stall (trainer/elastic/stalls.py): only a backend that injected the hang knows which slice hangs and can
    # unblock it; a real hung collective cannot be interrupted from Python, so the process exits instead.
    def stalled_slices(self) -> list[int]:
        return []

    def can_interrupt_stall(self) -> bool:
        return False

    def interrupt_stall(self, why: str) -> None:
        """Mark the stalled slice lost and make the hung step raise a slice-down error."""

    def after_compile(self) -> None:
        """Every process of the group has its step compiled (one process: nothing to wait for)."""

    def stop_at(self, step: int, heard: str | None, save: bool) -> GroupStop | None:
        """Whether to stop at `step`'s boundary: where one process runs the whole group, at once on its own
        signal (`heard`), saving where `save`. A group of processes agrees on one step and on whether to save
        (trainer.elastic.group_stop)."""
        return GroupStop(step, self.process_index, None, heard, save) if heard is not None else None

    def close(self, peer_gone: bool = False) -> None:
        """End the backend; `peer_gone`: the run ended because another process of the group died."""


def _probe(devices: Sequence[Any]) -> bool:
    """pathwaysutils' health check: x + 1 on every device of the slice must give 100."""
    import jax
    import numpy as np

    values = [jax.device_put(np.float32(99.0), d) + 1 for d in devices]
    return all(float(v) == 100.0 for v in values)


def slice_down_error(message: str) -> Exception:
    import jax

    return jax.errors.JaxRuntimeError(f"DATA_LOSS: {message}")


class SimulatedSlices(SliceBackend):
    """CPU virtual devices in `num_slices` groups, with scheduled deaths and revivals."""

    def __init__(self, num_slices: int, devices_per_slice: int, faults: FaultSchedule, clock: Clock, *,
                 memory_limit_bytes: int | None = None) -> None:
        """`memory_limit_bytes`: what each simulated device may use (CPU devices report no limit)."""
        import jax

        devices = jax.devices()
        need = num_slices * devices_per_slice
        if len(devices) < need:
            raise UsageError(f"{said('num_slices')} x {said('devices_per_slice')} needs {need} devices, jax has {len(devices)}; "
                             f"set XLA_FLAGS=--xla_force_host_platform_device_count={need} before jax starts")
        self.num_slices = num_slices
        self._devices = {s: devices[s * devices_per_slice:(s + 1) * devices_per_slice] for s in range(num_slices)}
        self._faults = faults
        self._clock = clock
        self._fired: set[int] = set()
        self._down: dict[int, tuple[float | None, int | None]] = {}  # slice -> (revive time, revive step)
        self._lock = threading.Lock()  # the save point fires in orbax's writer thread
        self.kills: list[tuple[int, str]] = []
        self._last_lost: list[int] = []
        self._hang: Fault | None = None  # the injected hang now blocking the step
        self._sick: set[int] = set()  # slices a `K@sick:S` fault took down: they come back failing the health check
        self._release = threading.Event()
        self._release_reason = ""
        self._memory_limit = memory_limit_bytes

    def slice_devices(self) -> dict[int, list[Any]]:
        return dict(self._devices)

    def memory_limit(self) -> int | None:
        return self._memory_limit if self._memory_limit is not None else super().memory_limit()

    def _revive_due(self, step: int | None) -> None:
        now = self._clock.monotonic()
        for s, (at_time, at_step) in list(self._down.items()):
            if (at_time is not None and now >= at_time) or (at_step is not None and step is not None
                                                             and step >= at_step):
                del self._down[s]

    def healthy_slices(self) -> list[int]:
        with self._lock:
            self._revive_due(None)
            alive = [s for s in range(self.num_slices) if s not in self._down]
        return [s for s in alive if _probe(self._devices[s])]

    def revived(self, active: Sequence[int]) -> list[int]:
        # Asked at every step while degraded, so bookkeeping only; the wait before the next attempt probes.
        with self._lock:
            self._revive_due(None)
            return sorted(set(range(self.num_slices)) - set(self._down) - set(active))

    def lost_slices(self, active: Sequence[int]) -> list[int]:
        # What the last injected fault took down: with --revive-after 0 it may be back already.
        with self._lock:
            lost, self._last_lost = self._last_lost, []
        return [s for s in lost if s in active]

    def stalled_slices(self) -> list[int]:
        with self._lock:
            return [] if self._hang is None else [self._hang.slice]

    def health_check(self, slice_index: int) -> str | None:
        with self._lock:
            sick = slice_index in self._sick
        return run_checks(self._devices[slice_index], corrupt=sick)

    def can_interrupt_stall(self) -> bool:
        with self._lock:
            return self._hang is not None

    def interrupt_stall(self, why: str) -> None:
        with self._lock:
            fault = self._hang
            if fault is None:
                return
            self._mark_down(fault)
            self._last_lost = [fault.slice]
            self._release_reason = why
        self._release.set()

    def close(self, peer_gone: bool = False) -> None:
        with self._lock:
            self._release_reason = "the backend closed"
        self._release.set()  # never leave a step blocked on an injected hang

    def _mark_down(self, fault: Fault) -> None:
        revive_after = self._faults.revive_after
        if fault.revive_at_step is not None:  # an explicit +R wins over --revive-after
            revive_after = None
        at_time = None if revive_after is None else self._clock.monotonic() + revive_after
        self._down[fault.slice] = (at_time, fault.revive_at_step)

    def _hang_if_due(self, step: int, active: Sequence[int]) -> None:
        """An injected hang: the step blocks, without raising, until the stall watchdog interrupts it."""
        with self._lock:
            due = [(i, f) for i, f in enumerate(self._faults.faults)
                   if f.point == "hang" and i not in self._fired and f.strikes("step", step)]
            if not due:
                return
            i, fault = due[0]
            self._fired.add(i)
            if fault.slice not in active:  # a slice outside the mesh cannot stall the step
                return
            self._hang = fault
            self.kills.append((fault.slice, fault.spec))
            self._release.clear()
        self._release.wait()
        with self._lock:
            self._hang, why = None, self._release_reason
        raise slice_down_error(f"simulated stall of slice {fault.slice} at step {step}: {why}")

    def fault_point(self, point: str, step: int, active: Sequence[int]) -> None:
        fired: set[int] = set()
        if point == "step":
            self._hang_if_due(step, active)
        struck: set[tuple] = set()
        with self._lock:
            if point == "step":
                self._revive_due(step)
            for i, fault in enumerate(self._faults.faults):
                if i in self._fired or not fault.strikes(point, step):
                    continue
                key = (fault.slice, fault.point, fault.step)
                if key in struck:  # the same spec again: it strikes at the next occurrence of its point
                    continue
                struck.add(key)
                self._fired.add(i)
                self._mark_down(fault)
                if fault.point == "sick":
                    self._sick.add(fault.slice)
                self.kills.append((fault.slice, fault.spec))
                fired.add(fault.slice)
            # A save's data left the devices when save() returned, so only a death scheduled for the
            # commit itself breaks it; everywhere else any dead active slice is a slice-down error.
            dead = sorted(set(active) & (fired if point == "save" else set(self._down)))
        if dead:
            with self._lock:
                self._last_lost = dead
            where = {"step": "before step", "mid": "while running step", "data": "in the data loader at step",
                     "save": "while committing the checkpoint of step", "restore": "while restoring step"}[point]
            raise slice_down_error(f"simulated loss of slice {dead[0]} {where} {step}")


class PathwaysSlices(SliceBackend):
    """Slices of a Pathways (single-controller) backend; faults are real, none are injected."""

    PROBE_INTERVAL_S = 10.0  # pathwaysutils' default poll interval

    def __init__(self, clock: Clock) -> None:
        import jax
        from pathwaysutils.elastic import elastic

        self._elastic = elastic
        self._clock = clock
        self._next_probe = 0.0
        self._devices = {s: list(d) for s, d in elastic.get_slice_to_devices(tuple(jax.devices())).items()}
        self.num_slices = len(self._devices)

    def slice_devices(self) -> dict[int, list[Any]]:
        return dict(self._devices)

    def healthy_slices(self) -> list[int]:
        return sorted(self._elastic.get_active_slice_indices(self._devices))

    def revived(self, active: Sequence[int]) -> list[int]:
        # Asked at every step while degraded: probe the missing slices at most every PROBE_INTERVAL_S.
        now = self._clock.monotonic()
        if now < self._next_probe:
            return []
        self._next_probe = now + self.PROBE_INTERVAL_S
        missing = {s: d for s, d in self._devices.items() if s not in active}
        return sorted(self._elastic.get_active_slice_indices(missing)) if missing else []


# How long a process waits for its peers' compiles: the stall watchdog's floor, which a slow first step
# stays below (elxpk_contract/stall.py).
COMPILE_BARRIER_S = STALL_FLOOR_S


class MultiControllerSlices(SliceBackend):
    """jax.distributed with one controller per host. A slice loss ends every process (a survivor exits 75
    once a collective reports the dead peer, `close`; else jax aborts it on the missed heartbeat), so there
    is nothing to wait for in-process: the group restart is the retry.

    With --coordinator (local CPU) each process is one slice of its first --devices-per-slice devices.
    Without it (TPU on GKE: the launcher sets no address) jax detects the cluster, and slices come from
    `device.slice_index` with every device of the slice, however many processes share it.
    """

    KILLED_EXIT_CODE = 137  # what a SIGKILLed process reports, so supervisors treat both alike
    in_process_retry = False

    def __init__(self, cfg: TrainerConfig, faults: FaultSchedule) -> None:
        import jax

        joined = join_cluster(cfg)
        explicit = joined.explicit
        self.process_index = jax.process_index()
        try:
            self._devices = gke_gpu_env.one_slice(jax.devices()) if joined.gpu_group else group_slices(
                jax.devices(), one_slice_per_process=explicit,
                devices_per_slice=cfg.devices_per_slice if explicit else None,
                processes_per_slice=joined.processes_per_slice)
            self.slice_index = slice_of_process(self._devices, self.process_index)
        except TopologyError as exc:
            jax.distributed.shutdown()
            raise UsageError(f"{said('slice_backend')} multi-controller: {exc}") from None
        self.num_slices = len(self._devices)
        self._faults = faults
        # A restarted group must not replay the fault that killed it: fired faults are remembered on disk.
        # Read once at start, so every process of a multi-host slice fires the same fault at the same step.
        self._fired_dir = epath.Path(cfg.run_dir) / ".faults-fired"  # gs:// too: every restart reads it
        self._fired_before = {i for i in range(len(faults.faults)) if (self._fired_dir / str(i)).exists()}
        self._barriers = 0  # every process passes the same barriers in the same order: their names count them
        client = _coordination_client()
        self._stop_board = GroupStopBoard(client, self.process_index, self.slice_index) if (
            client is not None and jax.process_count() > 1) else None

    def slice_devices(self) -> dict[int, list[Any]]:
        return dict(self._devices)

    def healthy_slices(self) -> list[int]:
        return sorted(self._devices)

    def fault_point(self, point: str, step: int, active: Sequence[int]) -> None:
        for i, fault in enumerate(self._faults.faults):
            if fault.slice != self.slice_index or i in self._fired_before:
                continue
            if fault.strikes(point, step):
                self._fired_dir.mkdir(parents=True, exist_ok=True)
                (self._fired_dir / str(i)).write_text(fault.spec + "\n", encoding="utf-8")
                if fault.point == "hang":  # no progress, no error: the stall watchdogs end every process
                    threading.Event().wait()
                os._exit(self.KILLED_EXIT_CODE)  # a dead host flushes nothing

    def stop_at(self, step: int, heard: str | None, save: bool) -> GroupStop | None:
        if self._stop_board is None:  # a group of one process
            return super().stop_at(step, heard, save)
        return self._stop_board.at_boundary(step, heard, save)

    def after_compile(self) -> None:
        """Wait at the coordination service until every process has compiled its step. The first step's
        collectives open their transport then, and CPU's (gloo) gives a late peer only 30 s: a process whose
        compile ran that much longer than its peers' (a cold cache, a loaded host) failed the first step."""
        import jax

        client = _coordination_client()
        if client is None or jax.process_count() == 1:
            return
        self._barriers += 1
        client.wait_at_barrier(f"elxpk-compiled-{self._barriers}", timeout_in_ms=int(COMPILE_BARRIER_S * 1000))

    def close(self, peer_gone: bool = False) -> None:
        """jax.distributed's shutdown, except after a peer died. Its shutdown waits at a barrier of every
        process, which a dead one never reaches: the process then sat there until the heartbeat timeout (or
        until the restarted group's new process called at this coordinator, the old one still serving its
        address) and jax ended it with LOG(FATAL), SIGABRT: exit 134 in place of SLICE_LOST's 75, and
        the error line, printed after this, never written. So a peer's death leaves jax.distributed as it
        is, and the process ends without the interpreter's exit (`LEFT_OPEN`), whose jax hook
        (jax._src.api.clean_up) would shut it down after all."""
        import jax

        if peer_gone and jax.process_count() > 1:
            LEFT_OPEN.set()
            return
        jax.distributed.shutdown()


# Set once a multi-controller backend closed with jax.distributed left open (MultiControllerSlices.close):
# the process must then end without the interpreter's exit (trainer/__main__.py).
LEFT_OPEN = threading.Event()


def _coordination_client() -> Any:
    """jax.distributed's client to the coordination service (None before it is initialised)."""
    from jax._src import distributed  # jax's own multi-host array serialization uses the same client

    return distributed.global_state.client


def make_backend(cfg: TrainerConfig, faults: FaultSchedule, clock: Clock) -> SliceBackend:
    if cfg.slice_backend == "simulated":
        return SimulatedSlices(cfg.num_slices, cfg.devices_per_slice, faults, clock)
    if cfg.slice_backend == "pathways":
        return PathwaysSlices(clock)
    return MultiControllerSlices(cfg, faults)
