"""GKE's TPU env read as jax's BaseTpuCluster reads it (trainer.elastic.gke_tpu_env), for a pod whose chips
are CPU devices, where jax's own GkeTpuCluster stays silent (it needs a TPU chip).

The derivation is held against jax's own code: GkeTpuCluster's classmethods are called on the same env
(they read os.environ, patched here with pytest's monkeypatch.setenv, not a client's method), so the two
cannot drift apart. The slices of such a cluster come from the process index (CPU devices report
slice_index 0 on every process)."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainer.core.topology import group_slices, slice_of_process
from trainer.elastic import gke_tpu_env
from trainer.elastic.gke_tpu_env import JAX_TPU_COORDINATOR_PORT, from_env

HOST = st.from_regex(r"[a-z][a-z0-9-]{0,20}(\.[a-z][a-z0-9-]{0,10})?", fullmatch=True)


@st.composite
def tpu_env(draw: st.DrawFn) -> dict[str, str]:
    workers = draw(st.lists(HOST, min_size=1, max_size=4, unique=True))
    slices = draw(st.integers(1, 4))
    env = {"TPU_WORKER_HOSTNAMES": ",".join(workers), "TPU_WORKER_ID": str(draw(st.integers(0, len(workers) - 1))),
           "MEGASCALE_NUM_SLICES": str(slices), "MEGASCALE_SLICE_ID": str(draw(st.integers(0, slices - 1)))}
    if draw(st.booleans()):
        env["MEGASCALE_COORDINATOR_ADDRESS"] = draw(HOST) + draw(st.sampled_from(["", ":8080"]))
    if slices == 1 and draw(st.booleans()):  # a single slice: jax's defaults for the MEGASCALE_ pair
        del env["MEGASCALE_NUM_SLICES"], env["MEGASCALE_SLICE_ID"]
    return env


def jax_reads(env: dict[str, str], read):  # noqa: ANN001, ANN201
    """What jax's GkeTpuCluster reads from `env`. An unset variable is set empty: jax asks the metadata
    server for one that is unset, and treats an empty one as unset (its defaults), which is what GKE's env
    without it means here."""
    with pytest.MonkeyPatch.context() as mp:
        for name in ("TPU_PROCESS_ADDRESSES", "TPU_WORKER_HOSTNAMES", "TPU_WORKER_ID", "MEGASCALE_NUM_SLICES",
                     "MEGASCALE_SLICE_ID", "MEGASCALE_COORDINATOR_ADDRESS"):
            mp.setenv(name, env.get(name, ""))
        mp.delenv("TPU_PROCESS_ADDRESSES")
        return read()


@settings(deadline=None)
@given(env=tpu_env())
def test_process_id_and_count_are_jaxs(env: dict[str, str]) -> None:
    from jax._src.clusters.cloud_tpu_cluster import GkeTpuCluster

    derived = from_env(env)
    assert derived is not None
    assert (derived.process_id, derived.num_processes) == jax_reads(
        env, lambda: (GkeTpuCluster.get_process_id(), GkeTpuCluster.get_process_count()))


@pytest.mark.parametrize("megascale", ["", "localhost", "localhost:8080"])
def test_the_coordinator_is_jaxs(megascale: str) -> None:
    """MEGASCALE_COORDINATOR_ADDRESS's host when set, else worker 0 of the slice, on jax's port (jax waits
    for the name to resolve, so only names that do: localhost)."""
    from jax._src.clusters.cloud_tpu_cluster import GkeTpuCluster, coordinator_port

    env = {"TPU_WORKER_ID": "1", "TPU_WORKER_HOSTNAMES": "localhost,w-1", "MEGASCALE_COORDINATOR_ADDRESS": megascale}
    derived = from_env(env)
    assert derived is not None and str(JAX_TPU_COORDINATOR_PORT) == coordinator_port
    assert derived.coordinator_address == jax_reads(env, lambda: GkeTpuCluster.get_coordinator_address(1, None))


def test_a_v4_8_multislice_pod_of_the_process_pool() -> None:
    """The env the provider gives slice 1 of a 2-slice `--no-pathways` JobSet (1 VM per slice)."""
    derived = from_env({"TPU_WORKER_ID": "0", "TPU_WORKER_HOSTNAMES": "st-slice-job-1-0.st",
                        "MEGASCALE_COORDINATOR_ADDRESS": "st-slice-job-0-0.st", "MEGASCALE_NUM_SLICES": "2",
                        "MEGASCALE_SLICE_ID": "1"})
    assert derived is not None
    assert (derived.coordinator_address, derived.num_processes, derived.process_id, derived.slice_id) == (
        f"st-slice-job-0-0.st:{JAX_TPU_COORDINATOR_PORT}", 2, 1, 1)


def test_no_tpu_env_is_no_cluster() -> None:
    assert from_env({}) is None
    assert from_env({"TPU_WORKER_HOSTNAMES": "a"}) is None  # no worker id: not a GKE TPU container


@pytest.mark.parametrize(("env", "named"), [
    ({"TPU_WORKER_ID": "x", "TPU_WORKER_HOSTNAMES": "a"}, "TPU_WORKER_ID='x'"),
    ({"TPU_WORKER_ID": "1", "TPU_WORKER_HOSTNAMES": "a"}, "TPU_WORKER_ID=1"),
    ({"TPU_WORKER_ID": "-1", "TPU_WORKER_HOSTNAMES": "a"}, "TPU_WORKER_ID=-1"),
    ({"TPU_WORKER_ID": "0", "TPU_WORKER_HOSTNAMES": "a,,b"}, "empty entry"),
    ({"TPU_WORKER_ID": "0", "TPU_WORKER_HOSTNAMES": "a", "MEGASCALE_NUM_SLICES": "2", "MEGASCALE_SLICE_ID": "2"},
     "MEGASCALE_SLICE_ID=2"),
    ({"TPU_WORKER_ID": "0", "TPU_WORKER_HOSTNAMES": "a", "MEGASCALE_NUM_SLICES": "0"}, "MEGASCALE_NUM_SLICES=0"),
    ({"TPU_WORKER_ID": "0", "TPU_WORKER_HOSTNAMES": "a", "MEGASCALE_NUM_SLICES": "1e9" * 100},
     "MEGASCALE_NUM_SLICES="),
])
def test_an_env_that_cannot_form_a_cluster_names_the_variable(env: dict[str, str], named: str) -> None:
    with pytest.raises(ValueError, match=None) as caught:
        from_env(env)
    assert named in str(caught.value) and len(str(caught.value)) < 300


@dataclass(frozen=True)
class Device:
    id: int
    process_index: int
    slice_index: int = 0  # what a CPU device of a multi-process jax reports, on every process


@pytest.mark.parametrize(("slices", "per_slice"), [(2, 1), (2, 2), (3, 4)])
def test_slices_come_from_the_process_index_not_the_cpu_slice_index(slices: int, per_slice: int) -> None:
    devices = [Device(p * 4 + c, p) for p in range(slices * per_slice) for c in range(4)]
    groups = group_slices(devices, one_slice_per_process=False, processes_per_slice=per_slice)
    assert sorted(groups) == list(range(slices))
    assert all(len(ds) == 4 * per_slice for ds in groups.values())
    assert [slice_of_process(groups, p) for p in range(slices * per_slice)] == [
        p // per_slice for p in range(slices * per_slice)]
    # Without it the CPU devices' slice_index 0 would make one slice of them all: the bug this guards.
    assert list(group_slices(devices, one_slice_per_process=False)) == [0]


def test_the_coordinator_binds_its_own_address() -> None:
    cluster = from_env({"TPU_WORKER_ID": "0", "TPU_WORKER_HOSTNAMES": "localhost"})
    assert cluster is not None
    assert gke_tpu_env.bind_address(cluster) == f"127.0.0.1:{JAX_TPU_COORDINATOR_PORT}"
    nowhere = from_env({"TPU_WORKER_ID": "0", "TPU_WORKER_HOSTNAMES": "no-such-host.invalid"})
    assert nowhere is not None
    with pytest.raises(ValueError, match="no-such-host.invalid"):
        gke_tpu_env.bind_address(nowhere, attempts=2, wait_s=0.01)


def test_a_broken_tpu_env_is_exit_2_with_one_line(repo_root, tmp_path) -> None:
    """`python -m trainer` as the pod runs it, with GKE's TPU env but a worker id past the slice: one line
    naming the variable, exit 2, no run dir."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "TPU_", "MEGASCALE_"))
           and k not in ("XLA_FLAGS", "KUBERNETES_SERVICE_HOST")}
    env |= {"ELXPK_SLICE_BACKEND": "multi-controller", "ELXPK_NUM_SLICES": "2", "TPU_WORKER_ID": "3",
            "TPU_WORKER_HOSTNAMES": "localhost", "MEGASCALE_NUM_SLICES": "2", "MEGASCALE_SLICE_ID": "0",
            "JAX_PLATFORMS": "cpu"}
    proc = subprocess.run([sys.executable, "-m", "trainer", "--run-dir", str(tmp_path / "run")], cwd=repo_root,
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("error: --coordinator: not given, and GKE's TPU env cannot form a cluster: "
                           "TPU_WORKER_ID=3"), proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and not (tmp_path / "run").exists()
