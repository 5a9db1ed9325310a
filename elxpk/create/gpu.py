"""What a GPU workload's pods need beyond the machine (elxpk/catalog.py: GpuType), as xpk renders them with
`--device-type NAME --num-nodes N`: the GPUDirect networking its workload decorators add (xpk 1.16.0,
src/xpk/core/workload_decorators: tcpx, tcpxo, rdma), as data that templates/gpu_multi_controller.yaml.j2
reads, and the GPU flags' checks. tests/launcher/xpk_gpu holds xpk's own renders; docs/gpu.md lists the
deliberate differences.

A "slice" on GPUs is one node group: one Job of N pods, one per node, 8 GPUs each.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, NamedTuple

from elxpk.catalog import GpuType
from elxpk.create.yamlquote import written

Pairs = tuple[tuple[str, str], ...]  # (name, value) in the order the manifest lists them


class Sidecar(NamedTuple):
    """A GPUDirect receive-path daemon, run as a native sidecar (an init container, restartPolicy Always)."""

    name: str
    image: str
    argv: tuple[tuple[str, tuple[str, ...]], ...]  # ("command", words) and, where it has them, ("args", words)
    capabilities: tuple[str, ...]
    mounts: Pairs  # (volume, mountPath)
    env: Pairs


class GpuNetwork(NamedTuple):
    """What one GPUDirect flavour adds to the pod: the parts of xpk's render that differ per machine type."""

    name: str  # xpk's USE_GPUDIRECT value
    networks: tuple[str, ...]  # the pod's networks, eth0 first
    env: Pairs  # the user container's env, after xpk's common variables
    mounts: Pairs  # the user container's volumeMounts (volume, mountPath), before /dev/shm
    host_volumes: Pairs  # hostPath volumes (name, path), before /dev/shm
    shm: Pairs  # the /dev/shm emptyDir's fields
    sidecars: tuple[Sidecar, ...] = ()
    device_files: tuple[str, ...] = ()  # opened by the daemon beyond the GPUs' own (/dev/nvidia*)

    @property
    def interfaces(self) -> str:
        """The networking.gke.io/interfaces annotation, formatted as xpk formats it."""
        rows = ",\n".join(f'    {json.dumps({"interfaceName": f"eth{i}", "network": n}, separators=(",", ":"))}'
                          for i, n in enumerate(self.networks))
        return f"[\n{rows}\n]"


_HOST_SYS = (("sys", "/sys"), ("proc-sys", "/proc/sys"))
_DAEMON_SYS = (("sys", "/hostsysfs"), ("proc-sys", "/hostprocsysfs"))
_DAEMON_ENV = (("LD_LIBRARY_PATH", "/usr/local/nvidia/lib64"),)
_SHM_128G = (("medium", "Memory"), ("sizeLimit", "128Gi"))

# The networks: xpk hard-codes A3 High's names; for the others xpk reads the cluster's GKENetworkParamSets,
# and elxpk (which renders offline) uses GKE's documented names. The sidecars' images are xpk's pins
# (tcpx_decorator.tcpx, tcpxo_decorator.rxdm).
NETWORKS = {network.name: network for network in (
    GpuNetwork(
        "tcpx", ("default", "vpc1", "vpc2", "vpc3", "vpc4"), env=(),
        mounts=(("tcpx-socket", "/tmp"), ("libraries", "/usr/local/nvidia/lib64")),
        host_volumes=(("libraries", "/home/kubernetes/bin/nvidia/lib64"), *_HOST_SYS, ("tcpx-socket", "/run/tcpx")),
        shm=_SHM_128G,
        sidecars=(Sidecar(
            "tcpx-daemon", "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/tcpgpudmarxd-dev:v2.0.11",
            argv=(("command", ("/tcpgpudmarxd/build/app/tcpgpudmarxd", "--gpu_nic_preset", "a3vm", "--gpu_shmem_type",
                               "fd", "--uds_path", "/run/tcpx", "--setup_param", '"--verbose 128 2 0 "')),),
            capabilities=("NET_ADMIN",),
            mounts=(("libraries", "/usr/local/nvidia/lib64"), ("tcpx-socket", "/run/tcpx"), *_DAEMON_SYS),
            env=_DAEMON_ENV),)),
    GpuNetwork(
        "tcpxo", ("default", *(f"vpc{i}" for i in range(1, 9))),
        env=(("NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY", "/dev/aperture_devices"),),
        mounts=(("aperture-devices", "/dev/aperture_devices"), ("libraries", "/usr/local/nvidia")),
        host_volumes=(("libraries", "/home/kubernetes/bin/nvidia"), *_HOST_SYS,
                      ("aperture-devices", "/dev/aperture_devices")),
        shm=_SHM_128G,
        sidecars=(Sidecar(
            "tcpxo-daemon", "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/tcpgpudmarxd-dev:v1.0.12",
            argv=(("command", ("/bin/sh", "-c")),
                  ("args", ("set -ex\nchmod 755 /fts/entrypoint_rxdm_container.sh\n/fts/entrypoint_rxdm_container.sh "
                            "--num_hops=2 --num_nics=8 --uid= --alsologtostderr",))),
            capabilities=("NET_ADMIN", "NET_BIND_SERVICE"),
            mounts=(("libraries", "/usr/local/nvidia"), *_DAEMON_SYS),
            env=_DAEMON_ENV),),
        device_files=("/dev/dmabuf_import_helper",)),
    GpuNetwork(  # RDMA NICs need no receive-path daemon
        "rdma", ("default", "gvnic-1", *(f"rdma-{i}" for i in range(8))), env=(),
        mounts=(("library-dir-host", "/usr/local/nvidia"), ("gib", "/usr/local/gib")),
        host_volumes=(("library-dir-host", "/home/kubernetes/bin/nvidia"), ("gib", "/home/kubernetes/bin/gib")),
        shm=(("medium", "Memory"),)),
)}
# xpk's GPU container name, whatever --docker-name says (xpk docker_container.get_main_container_docker_image).
GPU_CONTAINER_NAME = "gpu-image"
# xpk's JAX coordinator: pod 0 of the node group, through the JobSet's headless service.
JAX_COORDINATOR_PORT = 6002
JAX_COORDINATOR_ADDRESS = "$(JOBSET_NAME)-$(REPLICATED_JOB_NAME)-0-0.$(JOBSET_NAME)"
# Env names the GPU render sets itself (xpk's), which --env must not shadow.
GPU_RESERVED_ENV = frozenset({"REPLICATED_JOB_NAME", "JOBSET_NAME", "NNODES", "NODE_RANK", "USE_GPUDIRECT",
                              "GPUS_PER_NODE", "COMMAND", "JAX_COORDINATOR_PORT", "JAX_COORDINATOR_ADDRESS",
                              "LD_LIBRARY_PATH", "NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY"})


def network(gpu: GpuType) -> GpuNetwork:
    """The GPUDirect networking of `gpu`'s machine type."""
    return NETWORKS[gpu.gpudirect]


def device_paths(gpu: GpuType) -> str:
    """The devices.gke.io/container.<daemon> annotation: the GPU devices the GPUDirect daemon may open."""
    paths = [f"/dev/nvidia{i}" for i in range(gpu.gpus_per_node)] + ["/dev/nvidiactl", "/dev/nvidia-uvm"]
    return "".join(f"- path: {p}\n" for p in [*paths, *network(gpu).device_files])


def _written(value: Any) -> Any:
    """`value` (the network's text, in tuples and rows) with each text as xpk writes it in YAML."""
    if isinstance(value, str):
        return written(value)
    items = tuple(_written(item) for item in value)
    return type(value)(*items) if hasattr(value, "_fields") else items


def template_values(gpu: GpuType) -> dict[str, Any]:
    """What the GPU template needs beyond the spec: the machine, its network (every constant already written
    as YAML, plain where xpk writes it plain), the two annotations made from them, and xpk's JAX coordinator."""
    net = network(gpu)
    return dict(gpu=gpu, network=_written(net), interfaces=net.interfaces, device_paths=device_paths(gpu),
                coordinator_address=JAX_COORDINATOR_ADDRESS, coordinator_port=JAX_COORDINATOR_PORT)


def gpu_flag_problems(flags: Any, *, maxtext: bool, env: Sequence[tuple[str, str]], docker_name: str
                      ) -> tuple[int, str]:
    """The GPU flags' checks, after the shared ones (elxpk/create/checks.py): --num-nodes, the flags a GPU
    workload has no use for, and the env names the GPU render sets. Errors go to `flags.errors` (the
    FlagChecker of the invocation, whose `values` are its rows read); returns the node count and the
    container name, xpk's `gpu-image` unless --docker-name says."""
    err = flags.errors.append
    nodes = flags.values.num_nodes  # bounds and default: its row in elxpk/create/flags.py
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
