"""xpk's --device-type names a TPU type too (`--device-type v5litepod-16`): elxpk renders exactly what
--tpu-type renders; a GPU machine stays a GPU workload; a name neither catalog has is refused with both
catalogs' closest names."""

from __future__ import annotations

import pytest

from elxpk import catalog

BASE = ["workload", "create", "--workload", "w", "--command", "python3 train.py", "--dry-run"]


@pytest.mark.parametrize("name", ["v5litepod-16", "v5p-8", "v6e-2x2", "tpu7x-8", "V4-8"])
def test_a_tpu_type_given_as_device_type_renders_as_tpu_type(cli, name):
    as_device = cli(*BASE, "--device-type", name, "--num-slices", "2")
    as_tpu = cli(*BASE, "--tpu-type", name, "--num-slices", "2")
    assert as_device.code == as_tpu.code == 0, as_device.err
    assert as_device.out == as_tpu.out and as_device.err == as_tpu.err
    assert f'cloud.google.com/gke-tpu-topology: "{catalog.lookup(name).topology}"' in as_device.out


def test_a_gpu_machine_stays_a_gpu_workload(cli):
    done = cli(*BASE, "--device-type", "h100-80gb-8")
    assert done.code == 0, done.err
    assert "nvidia-h100-80gb" in done.out and "gke-tpu-accelerator" not in done.out


def test_both_or_neither_catalog(cli):
    both = cli(*BASE, "--device-type", "v5litepod-16", "--tpu-type", "v5p-8")
    assert both.code == 2 and both.error_lines == [
        "error: --tpu-type and --device-type: one quantity, give one (--device-type names a GPU machine, e.g. "
        "h100-80gb-8, or a TPU type as --tpu-type does)"]
    unknown = cli(*BASE, "--device-type", "v5lite-16")
    assert unknown.code == 2 and len(unknown.error_lines) == 1
    assert unknown.error_lines[0].startswith("error: --device-type: unknown GPU device type 'v5lite-16'; known: ")
    assert unknown.error_lines[0].endswith("; or a TPU type, as --tpu-type: v5lite is named v5litepod in GKE and "
                                           "xpk: did you mean v5litepod-16?")
