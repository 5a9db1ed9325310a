"""The cluster's Node objects, shaped like `xpk cluster create-pathways` makes them (one TPU node pool per
slice, and cpu-np), and the config of the process pools' virtual-kubelet (vk/main.go: Config)."""

from __future__ import annotations

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
CPU_NP_NODES = 4


def nodes(pools: str) -> list[dict]:
    """kwok nodes shaped like `xpk cluster create-pathways`: one TPU node pool per slice, and cpu-np."""
    out = [_node(f"gke-testcluster-cpu-np-{i}", {"cloud.google.com/gke-nodepool": "cpu-np"},
                 {"cpu": "64", "memory": "256Gi", "pods": "110"}, taints=[]) for i in range(CPU_NP_NODES)]
    return out + [node for _, node in tpu_nodes(pools, "--pools")]


def tpu_nodes(pools: str, flag: str, *, kind: str = "") -> list[tuple[str, dict]]:
    """(TPU type, node) of every VM of every slice of `pools` (TYPE:SLICES,...): one node pool per slice,
    labelled, tainted and sized as GKE makes TPU nodes. `kind` tells the pools apart in their names
    (`proc`: the process pools, whose nodes are not kwok's)."""
    out = []
    infix = f"-{kind}" if kind else ""
    for entry in filter(None, pools.split(",")):
        tpu, _, count = entry.partition(":")
        if tpu not in TPU_TYPES:
            sys.exit(f"testcluster: {flag}: unknown TPU type {tpu!r}; known: {', '.join(TPU_TYPES)}")
        if not (count or "1").isdigit():
            sys.exit(f"testcluster: {flag}: {entry!r}: SLICES must be a number")
        accelerator, topology, vms, chips = TPU_TYPES[tpu]
        for s in range(int(count or 1)):
            pool = f"testcluster-{tpu}{infix}-np-{s}"
            labels = {"cloud.google.com/gke-nodepool": pool, "cloud.google.com/gke-tpu-accelerator": accelerator,
                      "cloud.google.com/gke-tpu-topology": topology}
            out += [(tpu, _node(f"gke-{pool}-{v}", labels, {"cpu": "200", "memory": "400Gi", "pods": "110",
                                                              "google.com/tpu": str(chips)},
                                taints=[{"key": "google.com/tpu", "value": "present", "effect": "NoSchedule"}],
                                kwok=not kind))
                    for v in range(vms)]
    return out


def process_pool_config(run_dir: Path, pki: Path, ports: dict[str, int], repo: Path, pools: str,
                        process_nodes: list[dict]) -> dict:
    """testcluster-vk's config (vk/main.go: Config): each node with its own loopback address, the one that
    a hostNetwork pod on it gets (a TPU VM's own address); pods off hostNetwork get one of 127.A.(B+1).*.
    A.B is drawn per cluster, so that two clusters on one machine do not share pod addresses."""
    a, b = random.randrange(100, 200), random.randrange(0, 254, 2)
    gcs = f"http://127.0.0.1:{ports['gcs']}"
    types = [tpu for tpu, _ in tpu_nodes(pools, "--process-pools", kind="proc")]
    out_nodes = []
    for i, (tpu, node) in enumerate(zip(types, process_nodes, strict=True)):
        accelerator, topology, vms, chips = TPU_TYPES[tpu]
        out_nodes.append({"name": node["metadata"]["name"], "address": f"127.{a}.{b}.{i + 1}",
                          "labels": node["metadata"]["labels"], "taints": node["spec"]["taints"],
                          "capacity": node["status"]["capacity"],
                          "tpu": {"type": tpu, "topology": topology, "vms": vms, "chips": chips}})
    return {"nodes": out_nodes, "port": ports["vk"], "tlsCert": str(pki / "serving.crt"),
            "tlsKey": str(pki / "serving.key"), "repo": str(repo), "python": sys.executable,
            "stateDir": str(run_dir / "vk"), "podAddressPrefix": f"127.{a}.{b + 1}",
            # What GKE's metadata server and workload identity stand for here: gs:// is fake-gcs-server
            # (gcsfs reads STORAGE_EMULATOR_HOST; orbax's tensorstore the other two).
            "env": {"STORAGE_EMULATOR_HOST": gcs, "TENSORSTORE_GCS_HTTP_URL": gcs,
                    "GOOGLE_AUTH_TOKEN_FOR_TESTING": "anon"}}


def _node(name: str, labels: dict, capacity: dict, *, taints: list, kwok: bool = True) -> dict:
    """A Node; kwok manages those with its annotation, virtual-kubelet registers the others itself."""
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "annotations": {"kwok.x-k8s.io/node": "fake"} if kwok else {},
                         "labels": {**labels, "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                    "kubernetes.io/arch": "amd64", "type": "kwok" if kwok else "virtual-kubelet"}},
            "spec": {"taints": taints},
            "status": {"capacity": capacity, "allocatable": capacity}}
