"""Which devices form which slice: pure functions over device objects (no jax import).

Two shapes of multi-controller run:
- local CPU (explicit `--coordinator`): one process per slice; the slice is the process, and each process
  keeps its first `--devices-per-slice` devices (XLA may expose more virtual host devices than asked for);
- TPU on GKE (no `--coordinator`, jax detects the cluster): a slice spans every device with the same
  `device.slice_index`, however many host processes (VMs) that is, and all of them take part. Devices
  without a `slice_index` (one host per slice, or CPU) fall back to one slice per process.

A device here is anything with `id`, `process_index` and, optionally, `slice_index`: jax devices, or
plain stand-ins in tests.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from elxpk_contract.setting_rules import said


class TopologyError(ValueError):
    """The devices do not form a usable ('slice', 'data') mesh."""


def has_slice_index(devices: Sequence) -> bool:
    return bool(devices) and all(isinstance(getattr(d, "slice_index", None), int) for d in devices)


def group_slices(devices: Iterable, *, one_slice_per_process: bool,
                 devices_per_slice: int | None = None, processes_per_slice: int | None = None) -> dict[int, list]:
    """slice -> its devices, sorted by id; every slice has the same number of devices.

    `one_slice_per_process` is the local CPU layout; `devices_per_slice` truncates each process's
    devices there. `processes_per_slice` (CPU devices standing for a TPU slice's chips, whose
    `slice_index` is 0 on every process) makes each run of that many consecutive processes one slice, as
    jax numbers a multislice job's processes slice by slice. Otherwise slices come from `slice_index` when
    every device has one, else one slice per process.
    """
    devices = list(devices)
    if not devices:
        raise TopologyError("jax reports no devices")
    per = processes_per_slice if processes_per_slice and not one_slice_per_process else None
    by_slice = not one_slice_per_process and per is None and has_slice_index(devices)
    groups: dict[int, list] = {}
    for d in devices:
        groups.setdefault(d.slice_index if by_slice else d.process_index // (per or 1), []).append(d)
    groups = {s: sorted(ds, key=lambda d: d.id) for s, ds in sorted(groups.items())}
    if one_slice_per_process and devices_per_slice is not None:
        short = {s: len(ds) for s, ds in groups.items() if len(ds) < devices_per_slice}
        if short:
            raise TopologyError(f"{said('devices_per_slice')} {devices_per_slice}: process(es) {sorted(short)} have only "
                                f"{min(short.values())} device(s)")
        groups = {s: ds[:devices_per_slice] for s, ds in groups.items()}
    sizes = {s: len(ds) for s, ds in groups.items()}
    if len(set(sizes.values())) > 1:
        raise TopologyError(f"slices have different device counts {sizes}; a ('slice', 'data') mesh needs "
                            "equal slices")
    return groups


def slice_of_process(groups: dict[int, list], process_index: int) -> int:
    """The slice this process's devices belong to (fault injection kills the processes of a slice)."""
    for s, ds in groups.items():
        if any(d.process_index == process_index for d in ds):
            return s
    raise TopologyError(f"process {process_index} owns no device of any slice")


def devices_per_slice(groups: dict[int, list]) -> int:
    return len(next(iter(groups.values())))
