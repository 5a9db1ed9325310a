"""trainer/elastic/gke_gpu_env.py: the jax.distributed group of a GPU node group, read from the env xpk's
GPU render sets (elxpk's too: elxpk/create/templates/gpu_multi_controller.yaml.j2)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from elxpk.create import gpu as launcher_gpu
from trainer.elastic import gke_gpu_env

POD = {"JAX_COORDINATOR_ADDRESS": "w-slice-job-0-0.w", "JAX_COORDINATOR_PORT": "6002", "NNODES": "2",
       "NODE_RANK": "1"}


def test_the_rendered_env_names_are_the_ones_read() -> None:
    """The names come from the GPU render's own list: a rename there must show here."""
    assert set(gke_gpu_env.REQUIRED) <= launcher_gpu.GPU_RESERVED_ENV
    assert str(launcher_gpu.JAX_COORDINATOR_PORT) == POD["JAX_COORDINATOR_PORT"]


def test_a_node_group_pod() -> None:
    group = gke_gpu_env.from_env(POD)
    assert group == gke_gpu_env.GpuNodeGroup("w-slice-job-0-0.w", 6002, num_processes=2, process_id=1)
    assert group is not None and group.coordinator_address == "w-slice-job-0-0.w:6002"


def test_no_gpu_env_is_no_node_group() -> None:
    assert gke_gpu_env.from_env({}) is None
    assert gke_gpu_env.from_env({"NNODES": "", "TPU_WORKER_ID": "0"}) is None
    # jax's own variables (its Slurm, Open MPI ... detection reads the port): left to jax
    assert gke_gpu_env.from_env({"JAX_COORDINATOR_PORT": "6002", "JAX_COORDINATOR_ADDRESS": "h"}) is None


@pytest.mark.parametrize(("change", "named"), [
    ({"NNODES": None}, "NNODES not set"),
    ({"JAX_COORDINATOR_PORT": None, "NODE_RANK": None}, "JAX_COORDINATOR_PORT, NODE_RANK not set"),
    ({"NNODES": "two"}, "NNODES='two' is not a whole number"),
    ({"NNODES": "0"}, "NNODES=0 must be at least 1"),
    ({"NODE_RANK": "2"}, "NODE_RANK=2 must be from 0 to 1"),
    ({"NODE_RANK": "-1"}, "NODE_RANK='-1' is not a whole number"),
    ({"NODE_RANK": "١"}, "NODE_RANK='١' is not a whole number"),  # a digit to str.isdigit, not to int()'s caller
    ({"JAX_COORDINATOR_PORT": "70000"}, "JAX_COORDINATOR_PORT=70000 must be from 1 to 65535"),
    ({"JAX_COORDINATOR_ADDRESS": "w-0.w:6002"}, "want the coordinator's host name alone"),
    ({"JAX_COORDINATOR_ADDRESS": "$(JOBSET_NAME)-0.w"}, "want the coordinator's host name alone"),
], ids=["no-nodes", "two-missing", "nodes-word", "nodes-zero", "rank-high", "rank-negative", "rank-arabic",
        "port-high", "address-port", "address-unexpanded"])
def test_a_broken_env_names_the_variable(change: dict, named: str) -> None:
    env = {k: v for k, v in {**POD, **change}.items() if v is not None}
    with pytest.raises(ValueError, match=None) as raised:
        gke_gpu_env.from_env(env)
    assert named in str(raised.value)


@given(st.dictionaries(st.sampled_from(gke_gpu_env.REQUIRED), st.text(max_size=30), max_size=4))
def test_any_env_is_a_group_none_or_a_value_error(env: dict[str, str]) -> None:
    """Whatever the env holds: a consistent group, nothing, or a ValueError (never another exception)."""
    try:
        group = gke_gpu_env.from_env(env)
    except ValueError as exc:
        assert any(name in str(exc) for name in gke_gpu_env.REQUIRED)
        return
    if group is None:
        assert not (env.get("NNODES", "").strip() or env.get("NODE_RANK", "").strip())
    else:
        assert 0 <= group.process_id < group.num_processes and 1 <= group.port <= 65535


def test_one_slice_holds_every_device_by_id() -> None:
    class Device:
        def __init__(self, id_: int, process: int) -> None:
            self.id, self.process_index = id_, process

    devices = [Device(i, i // 8) for i in (9, 0, 8, 1)]
    assert [d.id for d in gke_gpu_env.one_slice(devices)[0]] == [0, 1, 8, 9]


def test_a_name_that_never_resolves_is_named() -> None:
    group = gke_gpu_env.GpuNodeGroup("no-such-host.invalid", 6002, 2, 0)
    with pytest.raises(ValueError, match="no-such-host.invalid"):
        gke_gpu_env.bind_address(group, attempts=2, wait_s=0)
    assert gke_gpu_env.bind_address(gke_gpu_env.GpuNodeGroup("127.0.0.1", 6002, 2, 0)) == "127.0.0.1:6002"
