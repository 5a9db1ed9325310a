"""The accelerator catalog, TPUs and GPUs in one table: every name a user may give (`v5p-16`, `v5p-2x2x2`,
`h100-80gb-8`, `a3-highgpu-8g`) to its row, a `TpuType` or a `GpuType`, frozen.

One table as xpk keeps one (src/xpk/core/system_characteristics.py). TPUs, with xpk's semantics: chips per
VM is 1 for a single-chip topology and 4 otherwise, VMs per slice = chips / chips per VM, and the number in
`prefix-N` counts TensorCores (2 per chip on v4, v5p and tpu7x; 1 on v5e and v6e). Each topology is
reachable by both spellings; when two topologies have the same core count, the first listed wins. GPUs:
xpk 1.16.0's four 8-GPU machine types, by device type or GCE machine type; a GPU "slice" is one node group.
What each one's GPUDirect network adds to a pod (xpk's workload decorators) is elxpk/create/gpu.py's.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from functools import lru_cache
from types import MappingProxyType
from typing import NamedTuple

from elxpk_contract.chip_peaks import generation_peak


class TpuType(NamedTuple):
    """One slice shape, as the worker pods and the Pathways resource manager need it."""

    name: str  # canonical `prefix-<cores>` name, e.g. v5p-16
    topology: str  # e.g. 2x2x2
    chips_per_vm: int
    vms_per_slice: int
    gke_accelerator: str  # node label cloud.google.com/gke-tpu-accelerator
    machine_type: str
    pathways_version: str  # e.g. tpuv5; the resource manager takes `<version>:<topology>`
    jax_generation: str = ""  # jax.experimental.topologies' name of the chip: v5e for v5litepod
    hbm_bytes_per_chip: int = 0  # the chip's HBM, as Google's TPU pages list it
    devices_per_chip: int = 1  # jax's devices on one chip: 1 (megacore), 2 where each TensorCore is one

    @property
    def devices_per_slice(self) -> int:
        """jax's devices in one slice: what the trainer's global batch must divide over, slice by slice."""
        return self.chips_per_slice * self.devices_per_chip

    @property
    def instance_type(self) -> str:
        return f"{self.pathways_version}:{self.topology}"

    @property
    def jax_topology(self) -> str:
        """The slice as jax names it (`python -m trainer --compile-topology`): v5litepod-16 is v5e:4x4."""
        return f"{self.jax_generation}:{self.topology}"

    @property
    def chips_per_slice(self) -> int:
        return self.chips_per_vm * self.vms_per_slice

    @property
    def peak_bf16_tflops(self) -> float | None:
        """One chip's dense bf16 peak from the one table (elxpk_contract/chip_peaks.py), the trainer's MFU's
        denominator; None for a chip without a published figure there."""
        return generation_peak(self.jax_generation)


class GpuType(NamedTuple):
    """One GKE GPU machine type, as its node pools are labelled and its pods need it."""

    name: str  # xpk's --device-type spelling, e.g. h100-80gb-8
    gke_accelerator: str  # node label cloud.google.com/gke-accelerator
    machine_type: str  # GCE machine type, accepted as a spelling too
    gpus_per_node: int
    gpudirect: str  # tcpx (A3 High), tcpxo (A3 Mega) or rdma (A3 Ultra, A4): xpk's USE_GPUDIRECT


# As xpk's system characteristics (xpk 1.16.0) for the four 8-GPU machine types. tests/launcher/xpk_gpu holds
# xpk's own renders of each; tests/launcher/test_gpu_parity.py compares elxpk's with them field by field.
GPU_TYPES = (
    GpuType("h100-80gb-8", "nvidia-h100-80gb", "a3-highgpu-8g", 8, "tcpx"),
    GpuType("h100-mega-80gb-8", "nvidia-h100-mega-80gb", "a3-megagpu-8g", 8, "tcpxo"),
    GpuType("h200-141gb-8", "nvidia-h200-141gb", "a3-ultragpu-8g", 8, "rdma"),
    GpuType("b200-8", "nvidia-b200", "a4-highgpu-8g", 8, "rdma"),
)


class _Family(NamedTuple):
    prefix: str
    cores_per_chip: int
    gke_accelerator: str
    machine_type: str
    pathways_version: str
    topologies: tuple[str, ...]
    jax_generation: str
    hbm_gib_per_chip: int
    single_chip_machine: str | None = None  # machine type of the 1-chip topology, where it exists
    # jax's devices per chip: 1 where the chip's TensorCores form one device (v4 and v5p megacore, v5e and
    # v6e with one core), 2 on tpu7x, whose two TensorCores are two chiplets, each a device of its own.
    devices_per_chip: int = 1


_V5P_TOPOLOGIES = (
    "2x2x1 2x2x2 2x2x4 2x4x4 4x4x4 4x4x8 4x4x12 4x8x8 4x4x20 4x8x12 4x4x28 8x8x8 4x12x12 4x8x20 "
    "4x4x44 8x8x12 4x4x52 4x8x28 4x12x20 8x8x16 4x4x68 8x12x12 4x4x76 8x8x20 4x12x28 4x8x44 4x4x92 "
    "8x12x16 4x20x20 4x8x52 12x12x12 8x8x28 4x4x116 8x12x20 4x4x124 8x16x16 4x12x44 4x8x68 4x20x28 "
    "12x12x16 4x4x148 4x8x76 4x12x52 8x16x20 4x4x164 8x12x28 4x4x172 8x8x44 12x12x20 4x8x92 4x4x188 "
    "12x16x16 4x28x28 8x20x20 4x12x68 8x8x52 4x4x212 12x12x24 4x20x44 8x16x28 4x12x76 4x8x116 "
    "4x4x236 12x16x20 4x4x244 4x8x124 12x12x28 16x16x16 4x20x52 8x12x44 8x8x68 4x12x92 8x20x28 "
    "12x16x24 4x8x148 12x20x20 8x8x76 4x28x44 8x12x52 16x16x20 12x12x36 4x8x164 12x16x28 4x20x68 "
    "4x8x172 4x12x116 8x16x44 12x20x24 4x28x52 8x8x92 4x12x124 4x8x188 4x20x76 16x16x24 12x24x24 16x20x28"
).split()

_TPU7X_TOPOLOGIES = (
    "1x1x1 2x2x1 2x2x2 2x2x4 2x4x4 4x4x4 4x4x8 4x8x8 8x8x8 4x4x12 4x4x20 4x8x12 8x8x12 8x8x16 "
    "8x16x16 12x12x12 16x16x16 16x16x24 12x24x24 16x20x28"
).split()

_FAMILIES: tuple[_Family, ...] = (
    _Family("v4", 2, "tpu-v4-podslice", "ct4p-hightpu-4t", "tpuv4",
            tuple("2x2x1 2x2x2 2x2x4 2x4x4 4x4x4 4x4x8 4x8x8 8x8x8 8x8x12 8x8x16 8x16x16".split()), "v4", 32),
    # 1x1 and 2x2 are GKE's single-host v5e slices (ct5lp-hightpu-1t and -4t: v5litepod-1, v5litepod-4).
    _Family("v5litepod", 1, "tpu-v5-lite-podslice", "ct5lp-hightpu-4t", "tpuv5e",
            ("1x1", "2x2", "2x4", "4x4", "4x8", "8x8", "8x16", "16x16"), "v5e", 16,
            single_chip_machine="ct5lp-hightpu-1t"),
    _Family("v5p", 2, "tpu-v5p-slice", "ct5p-hightpu-4t", "tpuv5", tuple(_V5P_TOPOLOGIES), "v5p", 95),
    _Family("v6e", 1, "tpu-v6e-slice", "ct6e-standard-4t", "tpuv6e",
            ("1x1", "2x2", "2x4", "4x4", "4x8", "8x8", "8x16", "16x16"), "v6e", 32,
            single_chip_machine="ct6e-standard-1t"),
    _Family("tpu7x", 2, "tpu7x", "tpu7x-standard-4t", "tpu7x", tuple(_TPU7X_TOPOLOGIES), "tpu7x", 192,
            single_chip_machine="tpu7x-standard-1t", devices_per_chip=2),
)


def _chips(topology: str) -> int:
    product = 1
    for side in topology.split("x"):
        product *= int(side)
    return product


@lru_cache(maxsize=1)
def _table() -> Mapping[str, TpuType | GpuType]:
    """Every spelling -> its row (built on first use: the TPU topologies are ~150 rows)."""
    table: dict[str, TpuType | GpuType] = {}
    for fam in _FAMILIES:
        for topology in fam.topologies:
            chips = _chips(topology)
            chips_per_vm = 1 if chips == 1 else 4
            machine = fam.single_chip_machine if chips == 1 and fam.single_chip_machine else fam.machine_type
            name = f"{fam.prefix}-{chips * fam.cores_per_chip}"
            tpu = TpuType(name, topology, chips_per_vm, chips // chips_per_vm, fam.gke_accelerator,
                          machine, fam.pathways_version, fam.jax_generation, fam.hbm_gib_per_chip << 30,
                          fam.devices_per_chip)
            table.setdefault(name, tpu)
            table[f"{fam.prefix}-{topology}"] = tpu
    for gpu in GPU_TYPES:  # xpk's device type, and the GCE machine type gcluster's --compute-type gives
        table[gpu.name] = table[gpu.machine_type] = gpu
    return MappingProxyType(table)


@lru_cache(maxsize=1)
def _tpu_names() -> list[str]:
    return sorted(name for name, row in _table().items() if isinstance(row, TpuType))


# Families as people say them -> as GKE's accelerator names and xpk spell them (TPU v5e is v5litepod-N)
_SPOKEN = {"v5e": "v5litepod", "v5lite": "v5litepod"}


class UnknownTpuType(ValueError):
    """The name is not in the catalog; the message lists the closest known names."""


class UnknownGpuType(ValueError):
    """The name is no GPU of the catalog; the message lists the known names."""


def families() -> tuple[_Family, ...]:
    """The TPU families (prefix, GKE accelerator label, ...), to map a node selector back to a type."""
    return _FAMILIES


def all_names() -> list[str]:
    """Every accepted spelling of a TPU type, sorted."""
    return list(_tpu_names())


def gpu_names() -> list[str]:
    """Every accepted spelling of a GPU device type: xpk's names, then the GCE machine types."""
    return [gpu.name for gpu in GPU_TYPES] + [gpu.machine_type for gpu in GPU_TYPES]


def find(name: str) -> TpuType | GpuType:
    """The row `name` spells, a TPU type or a GPU device type (or its machine type); UnknownTpuType (the
    closest TPU names) when it is neither."""
    row = _table().get(name.strip().lower())
    return row if row is not None else lookup(name)


def lookup_gpu(name: str) -> GpuType:
    """The GPU machine of `name`: xpk's device type (h100-80gb-8) or the GCE machine type (a3-highgpu-8g)."""
    row = _table().get(name.strip().lower())
    if isinstance(row, GpuType):
        return row
    known = ", ".join(f"{g.name} ({g.machine_type})" for g in GPU_TYPES)
    raise UnknownGpuType(f"unknown GPU device type {name!r}; known: {known}")


def from_node_labels(tpu_accelerator: str | None, topology: str | None,
                     gpu_accelerator: str | None) -> TpuType | GpuType | None:
    """The row a node selector asks for, by GKE's labels (gke-tpu-accelerator and gke-tpu-topology, or
    gke-accelerator); None when the catalog has none."""
    if tpu_accelerator and topology:
        for fam in _FAMILIES:
            if fam.gke_accelerator == tpu_accelerator:
                row = _table().get(f"{fam.prefix}-{topology}".strip().lower())
                return row if isinstance(row, TpuType) else None
    if gpu_accelerator:
        return next((gpu for gpu in GPU_TYPES if gpu.gke_accelerator == gpu_accelerator), None)
    return None


def lookup(name: str) -> TpuType:
    """The slice shape of `name` (`v5p-16`, `v5p-2x2x2`, `v5litepod-16`, `tpu7x-8`, ...)."""
    key = name.strip().lower()
    row = _table().get(key)
    if isinstance(row, TpuType):
        return row

    family, _, size = key.partition("-")
    if family in _SPOKEN and f"{_SPOKEN[family]}-{size}" in _table():  # the marketing name: difflib offers v6e-8
        raise UnknownTpuType(f"unknown TPU type {name!r}; {family} is named {_SPOKEN[family]} in GKE and xpk: "
                             f"did you mean {_SPOKEN[family]}-{size}?")
    close = difflib.get_close_matches(key, _tpu_names(), n=4, cutoff=0.6)
    if not close:
        families = ", ".join(f"{f.prefix}-*" for f in _FAMILIES)
        raise UnknownTpuType(f"unknown TPU type {name!r}; known families: {families}")
    raise UnknownTpuType(f"unknown TPU type {name!r}; did you mean {', '.join(close)}?")


def tpu_suggestion(name: str) -> str:
    """The closest TPU names to `name`, as `lookup`'s refusal gives them (e.g. `did you mean v5litepod-16?`)."""
    try:
        return f"{lookup(name).name} is one"
    except UnknownTpuType as exc:
        return str(exc).split("; ", 1)[-1]


def lookup_machine(machine_type: str, topology: str) -> TpuType:
    """The slice of GCE TPU machine type `machine_type` (ct6e-standard-4t, as gcluster's --compute-type
    takes it) in `topology` (4x4); UnknownTpuType when neither names a slice of the catalog."""
    key = machine_type.strip().lower()
    for fam in _FAMILIES:
        if key in (fam.machine_type, fam.single_chip_machine):
            try:
                return lookup(f"{fam.prefix}-{topology.strip().lower()}")
            except UnknownTpuType:
                raise UnknownTpuType(f"{machine_type} has no topology {topology!r}; known: "
                                     f"{', '.join(fam.topologies[:8])}, ...") from None
    machines = ", ".join(f.machine_type for f in _FAMILIES)
    raise UnknownTpuType(f"unknown TPU machine type {machine_type!r}; known: {machines}")


def is_machine_type(name: str) -> bool:
    """Whether `name` is a GCE TPU machine type (ct5p-hightpu-4t) rather than a slice name (v5p-8)."""
    key = name.strip().lower()
    return any(key in (f.machine_type, f.single_chip_machine) for f in _FAMILIES)
