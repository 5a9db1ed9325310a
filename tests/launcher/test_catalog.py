from __future__ import annotations

import pytest

from elxpk.catalog import UnknownTpuType, all_names, lookup

# The issue's table, which is xpk's (verified against system_characteristics.py).
ISSUE_TABLE = [
    ("v5p-8", "2x2x1", 4, 1, "tpu-v5p-slice", "ct5p-hightpu-4t", "tpuv5:2x2x1"),
    ("v5p-16", "2x2x2", 4, 2, "tpu-v5p-slice", "ct5p-hightpu-4t", "tpuv5:2x2x2"),
    ("v5litepod-16", "4x4", 4, 4, "tpu-v5-lite-podslice", "ct5lp-hightpu-4t", "tpuv5e:4x4"),
    ("v6e-16", "4x4", 4, 4, "tpu-v6e-slice", "ct6e-standard-4t", "tpuv6e:4x4"),
    ("v5p-128", "4x4x4", 4, 16, "tpu-v5p-slice", "ct5p-hightpu-4t", "tpuv5:4x4x4"),
    ("v5litepod-8", "2x4", 4, 2, "tpu-v5-lite-podslice", "ct5lp-hightpu-4t", "tpuv5e:2x4"),
    ("v5litepod-256", "16x16", 4, 64, "tpu-v5-lite-podslice", "ct5lp-hightpu-4t", "tpuv5e:16x16"),
    ("v6e-4", "2x2", 4, 1, "tpu-v6e-slice", "ct6e-standard-4t", "tpuv6e:2x2"),
    ("v6e-1", "1x1", 1, 1, "tpu-v6e-slice", "ct6e-standard-1t", "tpuv6e:1x1"),
    ("tpu7x-8", "2x2x1", 4, 1, "tpu7x", "tpu7x-standard-4t", "tpu7x:2x2x1"),
    ("tpu7x-128", "4x4x4", 4, 16, "tpu7x", "tpu7x-standard-4t", "tpu7x:4x4x4"),
    ("v4-8", "2x2x1", 4, 1, "tpu-v4-podslice", "ct4p-hightpu-4t", "tpuv4:2x2x1"),
    ("v4-16", "2x2x2", 4, 2, "tpu-v4-podslice", "ct4p-hightpu-4t", "tpuv4:2x2x2"),
]


@pytest.mark.parametrize("row", ISSUE_TABLE, ids=[r[0] for r in ISSUE_TABLE])
def test_rows(row):
    name, topology, chips_per_vm, vms, label, machine, instance = row
    tpu = lookup(name)
    assert (tpu.topology, tpu.chips_per_vm, tpu.vms_per_slice, tpu.gke_accelerator, tpu.machine_type,
            tpu.instance_type) == (topology, chips_per_vm, vms, label, machine, instance)
    assert tpu.name == name


def test_both_spellings_are_the_same_slice():
    assert lookup("v5p-2x2x2") == lookup("v5p-16")
    assert lookup("v5litepod-4x4") == lookup("v5litepod-16")
    assert lookup(" V6E-16 ") == lookup("v6e-16")


def test_every_family_is_covered():
    prefixes = {name.rsplit("-", 1)[0] for name in all_names()}
    assert {"v4", "v5litepod", "v5p", "v6e", "tpu7x"} <= prefixes


def test_catalog_is_self_consistent():
    for name in all_names():
        tpu = lookup(name)
        chips = 1
        for side in tpu.topology.split("x"):
            chips *= int(side)
        assert tpu.chips_per_slice == chips
        assert lookup(tpu.name) == tpu  # the canonical name leads back to the same slice


def test_unknown_type_lists_close_matches():
    with pytest.raises(UnknownTpuType, match=r"did you mean .*v5p-8"):
        lookup("v5p-9")
    with pytest.raises(UnknownTpuType, match="v5litepod"):
        lookup("v5lite-16")
    with pytest.raises(UnknownTpuType, match="known families"):
        lookup("h100-80gb-8")


@pytest.mark.parametrize("spoken", ["v5e", "V5E", "v5lite"])
def test_v5e_points_to_its_gke_name(spoken):
    """#43: `v5e-8` met "did you mean v6e-8, v5p-8" (the nearest strings, other chips); the catalog names
    v5e's every size as v5litepod-N (and its topologies), so the hint is that one, for every size there."""
    for name in all_names():
        family, _, size = name.partition("-")
        if family == "v5litepod":
            with pytest.raises(UnknownTpuType, match=rf"did you mean v5litepod-{size}\?$"):
                lookup(f"{spoken}-{size}")


def test_tpus_and_gpus_are_one_table():
    """Every spelling of every row, TPU or GPU, finds that row; each kind's own lookup finds only its kind,
    with its own message; a node selector's labels find the row back."""
    from elxpk import catalog

    for name in all_names():
        assert catalog.find(name) == lookup(name) and isinstance(lookup(name), catalog.TpuType)
        tpu = lookup(name)
        family = next(f for f in catalog.families() if name.startswith(f"{f.prefix}-"))
        assert catalog.from_node_labels(tpu.gke_accelerator, tpu.topology, None) == lookup(
            f"{family.prefix}-{tpu.topology}")
    for gpu in catalog.GPU_TYPES:
        for spelling in (gpu.name, gpu.machine_type, f" {gpu.name.upper()} "):
            assert catalog.find(spelling) == catalog.lookup_gpu(spelling) == gpu
        assert catalog.from_node_labels(None, None, gpu.gke_accelerator) == gpu
        with pytest.raises(UnknownTpuType, match="unknown TPU type"):
            lookup(gpu.name)
    assert catalog.gpu_names() == [g.name for g in catalog.GPU_TYPES] + [g.machine_type for g in catalog.GPU_TYPES]
    with pytest.raises(catalog.UnknownGpuType, match="unknown GPU device type 'v5p-8'; known: h100-80gb-8"):
        catalog.lookup_gpu("v5p-8")
    with pytest.raises(UnknownTpuType, match="did you mean"):
        catalog.find("v5p-9")
    assert catalog.from_node_labels("tpu-v5p-slice", "9x9x9", "nvidia-h100-80gb") is None
