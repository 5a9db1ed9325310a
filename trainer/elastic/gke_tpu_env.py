"""Where a multi-controller trainer on a GKE TPU node pool finds its jax.distributed cluster, read from the
env that GKE's TPU provisioning injects, when jax's own detection finds nothing.

jax's GkeTpuCluster (jax/_src/clusters/cloud_tpu_cluster.py) reads exactly this env, but only after
`running_in_cloud_tpu_vm` saw a TPU chip on the machine. A node whose chips are CPU devices (the process
pools of tools/testcluster, one TPU VM each) has the env and no chip, so jax joins no cluster. This module
derives the same values the same way (BaseTpuCluster), so such a pod joins the group a TPU VM would:

- coordinator: MEGASCALE_COORDINATOR_ADDRESS (its host part), else worker 0 of the slice's worker list,
  on jax's TPU coordinator port;
- processes per slice: the slice's worker list (TPU_PROCESS_ADDRESSES, else TPU_WORKER_HOSTNAMES);
- process id: TPU_WORKER_ID + MEGASCALE_SLICE_ID x processes per slice;
- process count: processes per slice x MEGASCALE_NUM_SLICES (1 and 0 when unset, as jax has them).

Pure: the env is passed in, nothing is resolved or imported here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from trainer.elastic.coordinator_bind import resolved_bind_address

# jax's cloud_tpu_cluster.coordinator_port: the port every TPU VM of a multislice job agrees on without
# being told. Kept equal to jax's so this pod and a real TPU VM of the same JobSet would meet.
JAX_TPU_COORDINATOR_PORT = 8482


@dataclass(frozen=True)
class GkeTpuCluster:
    coordinator_host: str
    num_processes: int
    process_id: int
    processes_per_slice: int
    slice_id: int

    @property
    def coordinator_address(self) -> str:
        return f"{self.coordinator_host}:{JAX_TPU_COORDINATOR_PORT}"


def worker_list(env: Mapping[str, str]) -> list[str] | None:
    """The slice's workers, as jax reads them (TPU_PROCESS_ADDRESSES first); None when neither is set."""
    raw = env.get("TPU_PROCESS_ADDRESSES", env.get("TPU_WORKER_HOSTNAMES"))
    return None if raw is None else raw.split(",")


def _int(env: Mapping[str, str], name: str, default: int) -> int:
    value = env.get(name, "")
    if not value:
        return default
    try:
        number = int(value)
    except ValueError:
        raise ValueError(f"{name}={value[:80]!r} is not a whole number") from None
    if number < 0:
        raise ValueError(f"{name}={number} is negative")
    return number


def from_env(env: Mapping[str, str]) -> GkeTpuCluster | None:
    """The cluster GKE's TPU env describes; None when this is no GKE TPU pod (no worker list or worker id).
    ValueError names the variable when the env is present but cannot form a cluster."""
    workers = worker_list(env)
    if workers is None or "TPU_WORKER_ID" not in env:
        return None
    hosts = [w.strip() for w in workers]
    if not all(hosts):
        raise ValueError(f"TPU_WORKER_HOSTNAMES={','.join(workers)[:200]!r} has an empty entry")
    per_slice = len(hosts)
    worker_id = _int(env, "TPU_WORKER_ID", 0)
    num_slices = _int(env, "MEGASCALE_NUM_SLICES", 1)
    slice_id = _int(env, "MEGASCALE_SLICE_ID", 0)
    if worker_id >= per_slice:
        raise ValueError(f"TPU_WORKER_ID={worker_id} is not below the {per_slice} worker(s) of the slice")
    if num_slices < 1 or slice_id >= num_slices:
        raise ValueError(f"MEGASCALE_SLICE_ID={slice_id} is not below MEGASCALE_NUM_SLICES={num_slices}")
    coordinator = env.get("MEGASCALE_COORDINATOR_ADDRESS") or hosts[0]
    # jax keeps the host part only (the address may carry megascale's own port), and so does this.
    host = coordinator.split(":")[0]
    return GkeTpuCluster(coordinator_host=host, num_processes=per_slice * num_slices,
                         process_id=worker_id + slice_id * per_slice, processes_per_slice=per_slice,
                         slice_id=slice_id)


def bind_address(cluster: GkeTpuCluster, *, attempts: int = 12, wait_s: float = 5.0) -> str:
    """The coordinator's own address and jax's TPU coordinator port (trainer.elastic.coordinator_bind says
    why)."""
    return resolved_bind_address(cluster.coordinator_host, JAX_TPU_COORDINATOR_PORT,
                                 f"the coordinator's name {cluster.coordinator_host!r}", attempts=attempts,
                                 wait_s=wait_s)
