"""`python -m trainer` as a GPU node group's pods run it: no --coordinator, the group from the env xpk's GPU
render sets (JAX_COORDINATOR_ADDRESS and _PORT, NNODES, NODE_RANK; trainer/elastic/gke_gpu_env.py), the GPUs
as CPU devices given in XLA_FLAGS (what tools/testcluster's GPU nodes give). The run on the real control
plane is tests/realcluster/test_stories_gpu.py."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.process.conftest import user_env

TINY = ["--steps", "2", "--checkpoint-period", "2", "--slice-backend", "multi-controller", "--num-slices", "1",
        "--d-model", "32", "--n-layers", "1", "--n-heads", "2", "--d-ff", "64", "--seq-len", "8", "--vocab-size", "64"]


def node_env(rank: int, port: int, **extra: str) -> dict[str, str]:
    return {**user_env(), "JAX_PLATFORMS": "cpu", "XLA_FLAGS": "--xla_force_host_platform_device_count=2",
            "JAX_COORDINATOR_ADDRESS": "127.0.0.1", "JAX_COORDINATOR_PORT": str(port), "NNODES": "2",
            "NODE_RANK": str(rank), **extra}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.slow
def test_two_nodes_form_one_slice_of_their_devices(tmp_path: Path) -> None:
    port = free_port()
    procs = [subprocess.Popen([sys.executable, "-m", "trainer", *TINY, "--run-dir", str(tmp_path / f"run{r}")],
                              cwd=tmp_path, env=node_env(r, port), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for r in (0, 1)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err[-2000:] for _, err in outs]
    config = json.loads((tmp_path / "run0" / "run.json").read_text())["config"]  # process 0 keeps the run dir
    # One slice: both nodes' devices (2 each), the count XLA_FLAGS gave, not the trainer's default.
    assert (config["num_slices"], config["devices_per_slice"]) == (1, 4)


def test_a_broken_gpu_env_is_one_line_and_exit_2(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "trainer", *TINY, "--run-dir", str(tmp_path / "run")],
                          cwd=tmp_path, env=node_env(0, free_port(), NNODES="two"), capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert "xpk's GPU env cannot form a cluster: NNODES='two' is not a whole number" in done.stderr
