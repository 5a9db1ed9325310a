"""Where a multi-controller trainer on a GKE GPU node group finds its jax.distributed cluster: the env that
xpk's GPU render sets, and elxpk's `--device-type` render with it (docs/gpu.md).

- JAX_COORDINATOR_ADDRESS: pod 0 of the group, `$(JOBSET_NAME)-$(REPLICATED_JOB_NAME)-0-0.$(JOBSET_NAME)`,
  a host name without a port;
- JAX_COORDINATOR_PORT: the port (6002 in xpk's render);
- NNODES: the pods of the group (one process each); NODE_RANK: this pod's completion index.

jax's own detection does not read these as they are: `jax.distributed.initialize()` takes
JAX_COORDINATOR_ADDRESS from the env and then wants a HOST:PORT there (it splits the port off for its bind
address), and none of its clusters (jax/_src/clusters/: Slurm, Open MPI, mpi4py, Kubernetes through the
API server, Cloud TPU) reads NNODES or NODE_RANK. So the trainer passes them itself, as MaxText does on
GPUs. The node group is one slice: JobSet restarts the whole Job when one of its pods fails.

Pure: the env is passed in; only `bind_address` resolves a name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from trainer.elastic.coordinator_bind import resolved_bind_address

REQUIRED = ("JAX_COORDINATOR_ADDRESS", "JAX_COORDINATOR_PORT", "NNODES", "NODE_RANK")


@dataclass(frozen=True)
class GpuNodeGroup:
    coordinator_host: str
    port: int
    num_processes: int
    process_id: int

    @property
    def coordinator_address(self) -> str:
        return f"{self.coordinator_host}:{self.port}"


def _whole(env: Mapping[str, str], name: str, low: int, high: int | None = None) -> int:
    value = env[name].strip()
    if not value.isascii() or not value.isdigit():
        raise ValueError(f"{name}={value[:80]!r} is not a whole number")
    number = int(value)
    if number < low or (high is not None and number > high):
        bound = f"from {low} to {high}" if high is not None else f"at least {low}"
        raise ValueError(f"{name}={number} must be {bound}")
    return number


def from_env(env: Mapping[str, str]) -> GpuNodeGroup | None:
    """The node group xpk's GPU env describes; None when this is no such pod (neither NNODES nor NODE_RANK
    set: JAX_COORDINATOR_ADDRESS and _PORT alone are jax's own variables, which its detection reads).
    ValueError names the variable when the env is there but cannot form a group."""
    present = [name for name in REQUIRED if env.get(name, "").strip()]
    if not {"NNODES", "NODE_RANK"} & set(present):
        return None
    missing = [name for name in REQUIRED if name not in present]
    if missing:
        raise ValueError(f"{', '.join(missing)} not set (xpk's GPU render sets {', '.join(REQUIRED)} together)")
    host = env["JAX_COORDINATOR_ADDRESS"].strip()
    if ":" in host or "$(" in host or any(c.isspace() for c in host):
        raise ValueError(f"JAX_COORDINATOR_ADDRESS={host[:120]!r}: want the coordinator's host name alone "
                         "(its port is JAX_COORDINATOR_PORT)")
    nodes = _whole(env, "NNODES", 1)
    return GpuNodeGroup(coordinator_host=host, port=_whole(env, "JAX_COORDINATOR_PORT", 1, 65535),
                        num_processes=nodes, process_id=_whole(env, "NODE_RANK", 0, nodes - 1))


def bind_address(group: GpuNodeGroup, *, attempts: int = 12, wait_s: float = 5.0) -> str:
    """Pod 0's own address and the port (trainer.elastic.coordinator_bind says why)."""
    return resolved_bind_address(group.coordinator_host, group.port,
                                 f"JAX_COORDINATOR_ADDRESS={group.coordinator_host!r}", attempts=attempts, wait_s=wait_s)


def one_slice(devices: list) -> dict[int, list]:
    """The node group as one slice: every device of every process, sorted by id."""
    return {0: sorted(devices, key=lambda d: d.id)}
