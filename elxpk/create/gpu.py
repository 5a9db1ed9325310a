"""GPU machine types as xpk renders them: `--device-type NAME --num-nodes N`.

Same table as xpk's system characteristics (xpk 1.16.0, src/xpk/core/system_characteristics.py) for the
four 8-GPU machine types, and the networking its workload decorators add (src/xpk/core/workload_decorators:
tcpx, tcpxo, rdma). tests/launcher/xpk_gpu holds xpk's own renders; tests/launcher/test_gpu_parity.py
compares elxpk's render with them field by field (docs/gpu.md lists the deliberate differences).

A "slice" on GPUs is one node group: one Job of N pods, one per node, 8 GPUs each.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class GpuType:
    """One GKE GPU machine type, as its node pools are labelled and its pods need it."""

    name: str  # xpk's --device-type spelling, e.g. h100-80gb-8
    gke_accelerator: str  # node label cloud.google.com/gke-accelerator
    machine_type: str  # GCE machine type, accepted as a spelling too
    gpus_per_node: int
    gpudirect: str  # tcpx (A3 High), tcpxo (A3 Mega) or rdma (A3 Ultra, A4): xpk's USE_GPUDIRECT

    @property
    def networks(self) -> tuple[str, ...]:
        """The pod's network names, eth0 first: xpk hard-codes A3 High's; for the others xpk reads the
        cluster's GKENetworkParamSets, and elxpk (which renders offline) uses GKE's documented names."""
        return _NETWORKS[self.gpudirect]

    @property
    def interfaces(self) -> str:
        """The networking.gke.io/interfaces annotation, formatted as xpk formats it."""
        rows = ",\n".join(f'    {json.dumps({"interfaceName": f"eth{i}", "network": n}, separators=(",", ":"))}'
                          for i, n in enumerate(self.networks))
        return f"[\n{rows}\n]"


_NETWORKS = {
    "tcpx": ("default", "vpc1", "vpc2", "vpc3", "vpc4"),
    "tcpxo": ("default", *(f"vpc{i}" for i in range(1, 9))),
    "rdma": ("default", "gvnic-1", *(f"rdma-{i}" for i in range(8))),
}

GPU_TYPES = (
    GpuType("h100-80gb-8", "nvidia-h100-80gb", "a3-highgpu-8g", 8, "tcpx"),
    GpuType("h100-mega-80gb-8", "nvidia-h100-mega-80gb", "a3-megagpu-8g", 8, "tcpxo"),
    GpuType("h200-141gb-8", "nvidia-h200-141gb", "a3-ultragpu-8g", 8, "rdma"),
    GpuType("b200-8", "nvidia-b200", "a4-highgpu-8g", 8, "rdma"),
)
# The sidecars' images, as xpk pins them (tcpx_decorator.tcpx, tcpxo_decorator.rxdm).
TCPX_IMAGE = "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/tcpgpudmarxd-dev:v2.0.11"
TCPXO_IMAGE = "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/tcpgpudmarxd-dev:v1.0.12"
# xpk's GPU container name, whatever --docker-name says (xpk docker_container.get_main_container_docker_image).
GPU_CONTAINER_NAME = "gpu-image"
# xpk's JAX coordinator: pod 0 of the node group, through the JobSet's headless service.
JAX_COORDINATOR_PORT = 6002
JAX_COORDINATOR_ADDRESS = "$(JOBSET_NAME)-$(REPLICATED_JOB_NAME)-0-0.$(JOBSET_NAME)"
# Env names the GPU render sets itself (xpk's), which --env must not shadow.
GPU_RESERVED_ENV = frozenset({"REPLICATED_JOB_NAME", "JOBSET_NAME", "NNODES", "NODE_RANK", "USE_GPUDIRECT",
                              "GPUS_PER_NODE", "COMMAND", "JAX_COORDINATOR_PORT", "JAX_COORDINATOR_ADDRESS",
                              "LD_LIBRARY_PATH", "NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY"})


class UnknownGpuType(ValueError):
    """The name is not in the table; the message lists the known names."""


def lookup_gpu(name: str) -> GpuType:
    """The machine type of `name`: xpk's device type (h100-80gb-8) or the GCE machine type (a3-highgpu-8g)."""
    key = name.strip().lower()
    for gpu in GPU_TYPES:
        if key in (gpu.name, gpu.machine_type):
            return gpu
    known = ", ".join(f"{g.name} ({g.machine_type})" for g in GPU_TYPES)
    raise UnknownGpuType(f"unknown GPU device type {name!r}; known: {known}")


def device_paths(gpu: GpuType) -> str:
    """The devices.gke.io/container.<daemon> annotation: the GPU devices the GPUDirect daemon may open."""
    paths = [f"/dev/nvidia{i}" for i in range(gpu.gpus_per_node)] + ["/dev/nvidiactl", "/dev/nvidia-uvm"]
    if gpu.gpudirect == "tcpxo":
        paths.append("/dev/dmabuf_import_helper")
    return "".join(f"- path: {p}\n" for p in paths)


def sidecar_image(gpu: GpuType) -> str | None:
    """The GPUDirect daemon's image; None where the NICs need none (RDMA)."""
    return {"tcpx": TCPX_IMAGE, "tcpxo": TCPXO_IMAGE}.get(gpu.gpudirect)


def gpu_flag_problems(flags: Any, *, maxtext: bool, env: Sequence[tuple[str, str]], docker_name: str
                      ) -> tuple[int, str]:
    """The GPU flags' checks, after the shared ones (elxpk/create/checks.py): --num-nodes, the flags a GPU
    workload has no use for, and the env names the GPU render sets. Errors go to `flags.errors` (the
    FlagChecker of the invocation, whose `values` are its rows read); returns the node count and the
    container name, xpk's `gpu-image` unless --docker-name says."""
    err = flags.errors.append
    nodes = flags.values["num_nodes"]  # bounds and default: its row in elxpk/create/flags.py
    if not flags.given("device_type"):
        err("--num-nodes: only for GPU workloads (--device-type); TPU slices are sized by --tpu-type and "
            "counted by --num-slices")
        return 1, docker_name
    if flags.given("num_slices"):
        err("--num-slices: a GPU workload is one node group; give its size with --num-nodes")
    if maxtext:
        err("--trainer maxtext: not on GPUs yet (its settings are placed for TPU runs); give MaxText as your own "
            "--command (it reads xpk's JAX_COORDINATOR_ADDRESS, JAX_COORDINATOR_PORT, NNODES and NODE_RANK; "
            "see docs/gpu.md), or --trainer for the bundled one")
    for key, _ in env:
        if key in GPU_RESERVED_ENV:
            err(f"--env {key}: set by the GPU render itself (as xpk sets it); drop it")
    return nodes or 1, docker_name if flags.given("docker_name") else GPU_CONTAINER_NAME
