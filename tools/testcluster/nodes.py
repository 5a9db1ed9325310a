"""The cluster's Node objects, shaped like `xpk cluster create-pathways` makes them (one TPU node pool per
slice, and cpu-np), and the config of the process pools' virtual-kubelet (vk/main.go: Config)."""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

# TPU type -> (gke-tpu-accelerator, gke-tpu-topology, VMs per slice, chips per VM), as GKE labels its nodes.
TPU_TYPES = {
    "v5p-8": ("tpu-v5p-slice", "2x2x1", 1, 4),
    "v5p-16": ("tpu-v5p-slice", "2x2x2", 2, 4),
    "v5litepod-16": ("tpu-v5-lite-podslice", "4x4", 4, 4),
    "v6e-16": ("tpu-v6e-slice", "4x4", 4, 4),
    "tpu7x-8": ("tpu7x", "2x2x1", 1, 4),
    "v4-8": ("tpu-v4-podslice", "2x2x1", 1, 4),  # up's default process pool: a type no kwok pool has
}
# GPU type (xpk's --device-type) -> (cloud.google.com/gke-accelerator, GPUs per node), as GKE labels its GPU
# nodes (elxpk/catalog.py: GPU_TYPES). A GPU pool's count is its nodes: one node group of that many.
GPU_TYPES = {
    "h100-80gb-8": ("nvidia-h100-80gb", 8),
    "h100-mega-80gb-8": ("nvidia-h100-mega-80gb", 8),
    "h200-141gb-8": ("nvidia-h200-141gb", 8),
    "b200-8": ("nvidia-b200", 8),
}
CPU_NP_NODES = 4


def nodes(pools: str) -> list[dict]:
    """kwok nodes shaped like `xpk cluster create-pathways`: one TPU node pool per slice, and cpu-np."""
    out = [_node(f"gke-testcluster-cpu-np-{i}", {"cloud.google.com/gke-nodepool": "cpu-np"},
                 {"cpu": "64", "memory": "256Gi", "pods": "110"}, taints=[]) for i in range(CPU_NP_NODES)]
    return out + [node for _, node in pool_nodes(pools, "--pools")]


def pool_nodes(pools: str, flag: str, *, kind: str = "") -> list[tuple[str, dict]]:
    """(accelerator type, node) of every node of `pools` (TYPE:COUNT,...), labelled, tainted and sized as
    GKE makes them: for a TPU type COUNT slices, one node pool per slice, a node per VM; for a GPU type one
    node pool of COUNT nodes (a node group). `kind` tells the pools apart in their names (`proc`: the
    process pools, whose nodes are not kwok's)."""
    out = []
    infix = f"-{kind}" if kind else ""
    for entry in filter(None, pools.split(",")):
        name, _, count = entry.partition(":")
        if name not in TPU_TYPES and name not in GPU_TYPES:
            sys.exit(f"testcluster: {flag}: unknown TPU or GPU type {name!r}; known: "
                     f"{', '.join([*TPU_TYPES, *GPU_TYPES])}")
        if not (count or "1").isdigit():
            sys.exit(f"testcluster: {flag}: {entry!r}: the count after ':' must be a number")
        if name in GPU_TYPES:
            out += [(name, node) for node in _gpu_pool(name, int(count or 1), f"testcluster-{name}{infix}-np",
                                                        kwok=not kind)]
            continue
        accelerator, topology, vms, chips = TPU_TYPES[name]
        for s in range(int(count or 1)):
            pool = f"testcluster-{name}{infix}-np-{s}"
            labels = {"cloud.google.com/gke-nodepool": pool, "cloud.google.com/gke-tpu-accelerator": accelerator,
                      "cloud.google.com/gke-tpu-topology": topology}
            out += [(name, _node(f"gke-{pool}-{v}", labels, {"cpu": "200", "memory": "400Gi", "pods": "110",
                                                               "google.com/tpu": str(chips)},
                                 taints=[{"key": "google.com/tpu", "value": "present", "effect": "NoSchedule"}],
                                 kwok=not kind))
                    for v in range(vms)]
    return out


def _gpu_pool(name: str, nodes: int, pool: str, *, kwok: bool) -> list[dict]:
    """One GKE GPU node pool: the accelerator label the GPU render selects, the taint GKE puts on GPU nodes
    (which the render tolerates), the GPUs as nvidia.com/gpu capacity."""
    accelerator, gpus = GPU_TYPES[name]
    labels = {"cloud.google.com/gke-nodepool": pool, "cloud.google.com/gke-accelerator": accelerator}
    return [_node(f"gke-{pool}-{n}", labels, {"cpu": "200", "memory": "400Gi", "pods": "110",
                                              "nvidia.com/gpu": str(gpus)},
                  taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}], kwok=kwok)
            for n in range(nodes)]


def process_pool_config(run_dir: Path, pki: Path, ports: dict[str, int], repo: Path, pools: str,
                        process_nodes: list[dict]) -> dict:
    """testcluster-vk's config (vk/main.go: Config): each node with its own loopback address, the one that
    a hostNetwork pod on it gets (a TPU VM's own address); pods off hostNetwork get one of 127.A.(B+1).*.
    A.B is drawn per cluster, so that two clusters on one machine do not share pod addresses."""
    a, b = random.randrange(100, 200), random.randrange(0, 254, 2)
    gcs = f"http://127.0.0.1:{ports['gcs']}"
    types = [name for name, _ in pool_nodes(pools, "--process-pools", kind="proc")]
    out_nodes = []
    for i, (name, node) in enumerate(zip(types, process_nodes, strict=True)):
        host = {"name": node["metadata"]["name"], "address": f"127.{a}.{b}.{i + 1}",
                "labels": node["metadata"]["labels"], "taints": node["spec"]["taints"],
                "capacity": node["status"]["capacity"]}
        if name in GPU_TYPES:
            host["gpu"] = {"type": name, "gpus": GPU_TYPES[name][1]}
        else:
            _, topology, vms, chips = TPU_TYPES[name]
            host["tpu"] = {"type": name, "topology": topology, "vms": vms, "chips": chips}
        out_nodes.append(host)
    return {"nodes": out_nodes, "port": ports["vk"], "tlsCert": str(pki / "serving.crt"),
            "tlsKey": str(pki / "serving.key"), "repo": str(repo), "python": sys.executable,
            "stateDir": str(run_dir / "vk"), "podAddressPrefix": f"127.{a}.{b + 1}",
            # What GKE's metadata server and workload identity stand for here: gs:// is fake-gcs-server
            # (gcsfs reads STORAGE_EMULATOR_HOST; orbax's tensorstore the other two).
            "env": {"STORAGE_EMULATOR_HOST": gcs, "TENSORSTORE_GCS_HTTP_URL": gcs,
                    "GOOGLE_AUTH_TOKEN_FOR_TESTING": "anon", **_compile_cache_env()}}


def _compile_cache_env() -> dict[str, str]:
    """jax's persistent compilation cache, when `up` runs with one (the tests' XLA cache,
    tests/support/xla_cache.py): the pods' trainers load the executables of the same small steps instead of
    compiling them again, as a MaxText run with `jax_cache_dir` on GCS does. Nothing is added otherwise.
    With it goes the PYTHONPATH that lets every process of a group write to it (tests/support/xla_site/;
    the trainer image's checkout follows it, vk/env.go)."""
    env = {k: v for k, v in os.environ.items() if k.startswith(("JAX_COMPILATION_CACHE", "JAX_PERSISTENT_CACHE"))}
    if env and os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env


def _node(name: str, labels: dict, capacity: dict, *, taints: list, kwok: bool = True) -> dict:
    """A Node; kwok manages those with its annotation, virtual-kubelet registers the others itself."""
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "annotations": {"kwok.x-k8s.io/node": "fake"} if kwok else {},
                         "labels": {**labels, "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                    "kubernetes.io/arch": "amd64", "type": "kwok" if kwok else "virtual-kubelet"}},
            "spec": {"taints": taints},
            "status": {"capacity": capacity, "allocatable": capacity}}
