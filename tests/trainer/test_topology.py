"""Slice grouping (trainer.core.topology) and the config on the hardware's topology, without a TPU.

The devices are plain records with the three attributes jax devices have (`id`, `process_index`,
`slice_index`); the layouts are those of the machines they stand for.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from elxpk_contract.command_line import config_from_args
from elxpk_contract.errors import UsageError
from elxpk_contract.settings import TrainerConfig
from trainer.core.topology import TopologyError, devices_per_slice, group_slices, slice_of_process


@dataclass(frozen=True)
class Device:
    id: int
    process_index: int
    slice_index: int | None = None


@dataclass(frozen=True)
class CpuDevice:  # CPU devices have no slice_index at all
    id: int
    process_index: int


def tpu_cluster(slices: int, hosts_per_slice: int, chips_per_host: int) -> list[Device]:
    """Devices of `slices` TPU slices of `hosts_per_slice` VMs each, processes numbered slice-major."""
    out = []
    for s in range(slices):
        for h in range(hosts_per_slice):
            process = s * hosts_per_slice + h
            out += [Device(process * chips_per_host + c, process, s) for c in range(chips_per_host)]
    return out


def test_multi_host_slices_group_by_slice_index_with_every_device():
    devices = tpu_cluster(slices=2, hosts_per_slice=4, chips_per_host=4)  # 2 x v5e-16
    groups = group_slices(reversed(devices), one_slice_per_process=False)
    assert sorted(groups) == [0, 1] and devices_per_slice(groups) == 16
    assert [d.id for d in groups[1]] == list(range(16, 32))  # sorted by id
    assert {d.process_index for d in groups[0]} == {0, 1, 2, 3}
    assert [slice_of_process(groups, p) for p in range(8)] == [0, 0, 0, 0, 1, 1, 1, 1]


def test_single_host_slices_without_slice_index_are_one_slice_per_process():
    devices = [CpuDevice(i, i // 4) for i in range(12)]
    groups = group_slices(devices, one_slice_per_process=False)
    assert sorted(groups) == [0, 1, 2] and devices_per_slice(groups) == 4


def test_local_cpu_layout_is_one_slice_per_process_truncated_even_with_slice_index():
    # Explicit --coordinator: the process is the slice, whatever slice_index says; extra devices unused.
    devices = [Device(i, i // 3, 0) for i in range(6)]
    groups = group_slices(devices, one_slice_per_process=True, devices_per_slice=2)
    assert {s: [d.id for d in ds] for s, ds in groups.items()} == {0: [0, 1], 1: [3, 4]}
    assert slice_of_process(groups, 1) == 1


def test_bad_layouts_are_reported():
    with pytest.raises(TopologyError, match="different device counts"):
        group_slices([Device(0, 0, 0), Device(1, 0, 0), Device(2, 1, 1)], one_slice_per_process=False)
    with pytest.raises(TopologyError, match="--devices-per-slice 4"):
        group_slices([CpuDevice(0, 0), CpuDevice(1, 1)], one_slice_per_process=True, devices_per_slice=4)
    with pytest.raises(TopologyError, match="no devices"):
        group_slices([], one_slice_per_process=False)
    with pytest.raises(TopologyError, match="process 5"):
        slice_of_process(group_slices(tpu_cluster(1, 1, 4), one_slice_per_process=False), 5)


def test_mixed_slice_index_falls_back_to_processes():
    devices = [Device(0, 0, 0), Device(1, 0, None), Device(2, 1, 1), Device(3, 1, None)]
    assert sorted(group_slices(devices, one_slice_per_process=False)) == [0, 1]


def test_tpu_cluster_config_defers_the_batch_check_to_the_hardware():
    # No --coordinator: the default --devices-per-slice 2 says nothing about the real slices.
    cfg = TrainerConfig(slice_backend="multi-controller", num_slices=3, global_batch=3)
    assert cfg.topology_from_hardware and cfg.devices_per_slice == 2
    fitted = cfg.on_hardware(3, 1, "the TPU cluster")  # 3 x v5e-1
    assert fitted.devices_per_slice == 1 and fitted.fingerprint() == cfg.fingerprint()
    with pytest.raises(UsageError) as info:
        cfg.on_hardware(3, 4, "the TPU cluster")
    (line,) = info.value.messages
    assert line.startswith("--global-batch 3:") and "the TPU cluster has 4 per slice" in line
    assert "multiple of 12" in line
    with pytest.raises(UsageError, match="--num-slices 3: the Pathways backend has 2 slice"):
        TrainerConfig(slice_backend="pathways", num_slices=3).on_hardware(2, 4, "the Pathways backend")


def test_local_configs_keep_checking_the_batch_up_front():
    assert not TrainerConfig(slice_backend="multi-controller", coordinator="127.0.0.1:1234",
                             num_processes=2).topology_from_hardware
    with pytest.raises(UsageError, match="--global-batch 6"):
        TrainerConfig(global_batch=6)  # simulated: 2 x 2 devices


@pytest.mark.parametrize(
    ("settings", "flag"),
    [
        (dict(slice_backend="multi-controller", process_id=3), "--process-id 3"),
        (dict(slice_backend="multi-controller", num_processes=2), "--num-processes 2"),
        (dict(slice_backend="multi-controller", coordinator="localhost", num_processes=2), "--coordinator"),
        (dict(slice_backend="multi-controller", coordinator="h:99999", num_processes=2), "--coordinator"),
        (dict(slice_backend="multi-controller", coordinator="h:1", num_processes=3), "--num-processes 3"),
        (dict(slice_backend="multi-controller", coordinator="h:1", num_processes=2, process_id=2), "--process-id 2"),
        (dict(coordinator="127.0.0.1:1"), "--coordinator 127.0.0.1:1: only with --slice-backend multi-controller"),
    ],
)
def test_multi_controller_nonsense_is_rejected(settings, flag):
    with pytest.raises(UsageError) as info:
        TrainerConfig(**settings)
    assert any(line.startswith(flag) for line in info.value.messages), info.value.messages


def test_multi_controller_shapes_that_are_accepted():
    TrainerConfig(slice_backend="multi-controller")  # TPU cluster: jax detects the processes
    TrainerConfig(slice_backend="multi-controller", coordinator="127.0.0.1:8476", num_processes=2, process_id=1)
    config_from_args([], {"ELXPK_SLICE_BACKEND": "multi-controller", "ELXPK_NUM_SLICES": "4"})
