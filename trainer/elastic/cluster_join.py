"""How a multi-controller process joins jax.distributed: one of three ways, in this order.

- `--coordinator` given (local CPU runs): that address, with --process-id and --num-processes;
- xpk's GPU env (trainer.elastic.gke_gpu_env): the node group is one slice;
- jax's own cluster detection (Cloud TPU / GKE metadata), else GKE's TPU env read as jax would
  (trainer.elastic.gke_tpu_env).

`join_cluster` says which, and what the slice grouping (trainer.elastic.slices.MultiControllerSlices) needs.
"""

from __future__ import annotations

import os
from typing import NamedTuple

from elxpk_contract.errors import UsageError
from elxpk_contract.settings import TrainerConfig
from trainer.elastic import gke_gpu_env, gke_tpu_env
from trainer.elastic.preemption import sigterm_exits_at_once


class Joined(NamedTuple):
    explicit: bool  # --coordinator given: each process is one slice
    gpu_group: bool  # joined through xpk's GPU env: the node group is one slice
    processes_per_slice: int | None  # from GKE's TPU env; None where slices come from device.slice_index


def join_cluster(cfg: TrainerConfig) -> Joined:
    """jax.distributed.initialize, once, the first way that applies; UsageError when none does. A SIGTERM
    while it waits for the group ends the process at once with 77 (preemption.sigterm_exits_at_once)."""
    with sigterm_exits_at_once("joining the jax.distributed group"):
        return _join(cfg)


def _join(cfg: TrainerConfig) -> Joined:
    import jax

    # jax's preemption service installs its own SIGTERM handler (preemption_notifier.cc) over the
    # trainer's, and only records the signal: a deleted or evicted pod then trained on until SIGKILL,
    # never exiting PREEMPTED (77), which the rendered podFailurePolicy and JobSet rules read.
    jax.config.update("jax_enable_preemption_service", False)
    if cfg.coordinator is not None:
        jax.distributed.initialize(
            coordinator_address=cfg.coordinator,
            coordinator_bind_address=cfg.coordinator if cfg.process_id == 0 else None,
            num_processes=cfg.num_processes,
            process_id=cfg.process_id,
            heartbeat_timeout_seconds=cfg.heartbeat_timeout_seconds,
            initialization_timeout=max(60, 6 * cfg.heartbeat_timeout_seconds),  # a peer that never comes
        )
        return Joined(explicit=True, gpu_group=False, processes_per_slice=None)
    if _join_gpu_node_group(cfg):
        return Joined(explicit=False, gpu_group=True, processes_per_slice=None)
    return Joined(explicit=False, gpu_group=False, processes_per_slice=_join_detected_cluster(cfg))


def _join_gpu_node_group(cfg: TrainerConfig) -> bool:
    """jax.distributed from xpk's GPU env (JAX_COORDINATOR_ADDRESS and _PORT, NNODES, NODE_RANK), which
    jax's own detection cannot read (trainer.elastic.gke_gpu_env); False when this is no GPU node group."""
    import jax

    try:
        group = gke_gpu_env.from_env(os.environ)
        if group is None:
            return False
        bind = gke_gpu_env.bind_address(group) if group.process_id == 0 else None
    except ValueError as exc:
        raise UsageError(f"--coordinator: not given, and xpk's GPU env cannot form a cluster: {exc}") from None
    jax.distributed.initialize(
        coordinator_address=group.coordinator_address, coordinator_bind_address=bind,
        num_processes=group.num_processes, process_id=group.process_id,
        heartbeat_timeout_seconds=cfg.heartbeat_timeout_seconds,
        initialization_timeout=max(60, 6 * cfg.heartbeat_timeout_seconds),  # a peer that never comes
    )
    return True


def _join_detected_cluster(cfg: TrainerConfig) -> int | None:
    """jax.distributed without --coordinator: jax's own detection (Cloud TPU / GKE metadata, or another
    cluster it knows), else GKE's TPU env read as jax would (trainer.elastic.gke_tpu_env: jax's GKE
    detection needs a TPU chip, which a node whose chips are CPU devices lacks). Returns the processes
    per slice from that env (None where jax detected the cluster: slices then come from the devices'
    slice_index)."""
    import jax

    try:
        jax.distributed.initialize(heartbeat_timeout_seconds=cfg.heartbeat_timeout_seconds)
        return None
    except ValueError as exc:
        detected = str(exc)
    try:
        gke = gke_tpu_env.from_env(os.environ)
    except ValueError as exc:
        raise UsageError(f"--coordinator: not given, and GKE's TPU env cannot form a cluster: {exc}") from None
    if gke is None:
        raise UsageError(f"--coordinator: not given, and jax found no cluster to join ({detected}); pass "
                         "--coordinator HOST:PORT with --process-id and --num-processes") from None
    jax.distributed.initialize(
        coordinator_address=gke.coordinator_address,
        # The coordinator listens on its own address only: with hostNetwork every pod of a node shares its
        # ports, and where several nodes share one machine (tools/testcluster) each has its own address.
        coordinator_bind_address=gke_tpu_env.bind_address(gke) if gke.process_id == 0 else None,
        num_processes=gke.num_processes,
        process_id=gke.process_id,
        heartbeat_timeout_seconds=cfg.heartbeat_timeout_seconds,
        initialization_timeout=max(60, 6 * cfg.heartbeat_timeout_seconds),  # a peer that never comes
    )
    return gke.processes_per_slice
