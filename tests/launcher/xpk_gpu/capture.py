"""Regenerate the vendored xpk GPU renders in this folder (run by hand, never by the tests).

In a throwaway venv outside the checkout:

    python3 -m venv /tmp/xpkvenv && /tmp/xpkvenv/bin/pip install xpk==1.16.0
    /tmp/xpkvenv/bin/python tests/launcher/xpk_gpu/capture.py tests/launcher/xpk_gpu

It runs xpk's own `workload create --dry-run --output-manifest-file` for each GPU machine type, with one
input xpk would read from the cluster replaced: the secondary network names (`kubectl get
GKENetworkParamSet`, which a dry run answers with nothing). They are set to the names of GKE's documented
GPUDirect setups, the names elxpk renders (docs/gpu.md). A3 High needs none: xpk hard-codes vpc1..vpc4.
"""

from __future__ import annotations

import sys
from pathlib import Path

import xpk.commands.workload as workload  # type: ignore[import-not-found]
from xpk.main import main  # type: ignore[import-not-found]

NETWORKS = {
    "h100-80gb-8": [],
    "h100-mega-80gb-8": ["default", *(f"vpc{i}" for i in range(1, 9))],
    "h200-141gb-8": ["default", "gvnic-1", *(f"rdma-{i}" for i in range(8))],
    "b200-8": ["default", "gvnic-1", *(f"rdma-{i}" for i in range(8))],
}


def capture(out: Path) -> None:
    from importlib.metadata import version

    for device_type, networks in NETWORKS.items():
        workload.get_cluster_subnetworks = lambda networks=networks: list(networks)
        path = out / f"{device_type}.yaml"
        sys.argv = ["xpk", "workload", "create", "--project", "p", "--zone", "us-central1-a", "--cluster", "c",
                    "--workload", "gpu-run", "--device-type", device_type, "--num-nodes", "2",
                    "--docker-image", "gcr.io/p/img:1", "--command", "python3 train.py", "--dry-run",
                    "--output-manifest-file", str(path)]
        try:
            main()
        except SystemExit as exc:
            if exc.code not in (0, None):
                raise
        text = path.read_text(encoding="utf-8")
        path.write_text(f"# xpk {version('xpk')}: {' '.join(sys.argv[1:-2])} (networks: {networks})\n{text}",
                        encoding="utf-8")


if __name__ == "__main__":
    capture(Path(sys.argv[1]))
