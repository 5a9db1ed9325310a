"""`python -m trainer --compile-only`: will the step fit, on a TPU slice this machine does not have?

jax compiles for a TPU topology from its description alone (jax.experimental.topologies, as MaxText's
train_compile does): libtpu must be installed, no chip is needed, and a CPU machine gives the same
memory_analysis() figures as the chip (issue 42). The step compiled is the real one, StepCache's, with
the run's settings: the model, the batch, the compute dtype as the TPU resolves it, the reduction and the
donation the run's backend would use. Its per-device memory is printed as one JSON object; `elxpk
workload create --check-fit` reads it and refuses a workload that will not fit before it is submitted.
Nothing is written (no run dir, no checkpoint, no compilation cache entry: a cache would not help, a second
compile of the same step for a topology, its entry written, took as long as the first) unless
--compile-executables names the run's executable store: then each step compiled is written there ahead, for
every host of the group (trainer/core/executable_store.py), as MaxText's train_compile writes its
compiled_trainstep_file. On stderr: a first line saying what is compiled and about how long it takes, then a
sign of life every 20 s (trainer/compile_progress.py).
"""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING, Any

from elxpk_contract.errors import UsageError
from trainer.clock import SystemClock
from trainer.compile_progress import SignOfLife, first_line, say
from trainer.core.executable_store import ExecutableStore
from trainer.core.precision import resolved

if TYPE_CHECKING:
    from elxpk_contract.settings import TrainerConfig

# What analysis fields the report carries (jax's CompiledMemoryStats; bytes per device).
_ANALYSIS_FIELDS = ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes",
                    "temp_size_in_bytes", "generated_code_size_in_bytes")


def _chips(name: str) -> int:
    """The chips of the TPU slice `name` (v5e:4x4 -> 16)."""
    chips = 1
    for side in name.split(":", 1)[1].split("x"):
        chips *= int(side)
    return chips


def devices_per_chip(name: str, devices_per_slice: int) -> int:
    """jax's devices on one chip of slice `name`: 1, or 2 where each core is a device (v4, tpu7x)."""
    return max(1, devices_per_slice // _chips(name))


def topology_devices(name: str, num_slices: int) -> list:
    """The devices of `num_slices` slices of the TPU slice `name` (v5e:4x4), from its description alone.
    UsageError naming --compile-topology when jax cannot describe it (no libtpu, an unknown slice)."""
    from jax.experimental import topologies

    chips = _chips(name)
    # No chip is opened here, so libtpu's one-process-per-host lock is not needed: without this, another jax
    # process on the machine that loaded libtpu (a trainer without JAX_PLATFORMS=cpu) makes the description
    # fail ("Internal error when accessing libtpu multi-process lockfile"). jax's own multi-process tests set it.
    os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
    # A one-chip slice is one host of one chip; jax's default host is 2x2x1 chips, which 1x1 cannot hold.
    host = {"chips_per_host_bounds": (1, 1, 1)} if chips == 1 else {}
    try:
        topology = topologies.get_topology_desc(platform="tpu", topology_name=name, num_slices=num_slices,
                                                **host)
    except RuntimeError as exc:
        first = (str(exc).splitlines() or [""])[0][:300]
        if "not installed" in first:
            raise UsageError(f"--compile-only: jax cannot compile for a TPU without libtpu ({first}); install "
                             "the version jax pins: pip install 'jax[tpu]==0.10.2'") from None
        raise UsageError(f"--compile-topology {name}: jax cannot describe this TPU slice ({first}); name one "
                         "as jax does, e.g. v5e:4x4 or v5p:2x2x2") from None
    return list(topology.devices)


def compile_report(cfg: TrainerConfig) -> dict[str, Any]:
    """Compile the run's train step for cfg.num_slices slices of cfg.compile_topology and report its memory;
    with resizes on (--elastic-min-slice-count), also the step on the fewest slices a run may train on,
    whose devices each take a larger share of the batch."""
    from trainer.core.mesh import build_mesh
    from trainer.elastic.live_recovery import donates_with

    devices = topology_devices(cfg.compile_topology, cfg.num_slices)
    store = _ahead_store(cfg, devices)
    slices: dict[int, list] = {}
    for device in devices:  # one slice per slice_index, however many hosts share it
        slices.setdefault(getattr(device, "slice_index", 0) or 0, []).append(device)
    slices = {s: sorted(ds, key=lambda d: d.id) for s, ds in sorted(slices.items())}
    per_slice = len(next(iter(slices.values())))
    cfg = resolved(cfg.on_hardware(len(slices), per_slice, f"{cfg.num_slices} x {cfg.compile_topology}"), on="tpu")
    donate = donates_with(cfg, in_process_retry=cfg.slice_backend != "multi-controller")
    cfg = _remat_resolved(cfg, build_mesh(slices, list(slices)), donate)
    # The fewest-slices step only where it is asked for: `--check-fit` decides on the full width alone.
    fewest = cfg.min_slices < len(slices) and cfg.compile_fewest_slices
    where = f"{len(slices)} x {cfg.compile_topology} ({len(devices)} devices)"
    _say_what(cfg, where, len(devices), compiles=2 if fewest else 1)
    with SignOfLife(f"for {where}"):
        report = {"topology": cfg.compile_topology, "devices_per_slice": per_slice, "remat_policy": cfg.remat_policy,
                  "attention": cfg.attention, "device_limit_bytes": device_limit(cfg, build_mesh(slices, list(slices))),
                  "device_kind": devices[0].device_kind, "donates_input_state": donate,
                  **_compiled(cfg, build_mesh(slices, list(slices)), donate, refuse=True, store=store),
                  "settings": cfg.to_dict()}
        if fewest:
            # Written ahead for a resize onto exactly these slices (the first ones).
            report["fewest_slices"] = _compiled(cfg, build_mesh(slices, list(slices)[:cfg.min_slices]), donate,
                                                refuse=False, store=store)
    return report


def _say_what(cfg: TrainerConfig, where: str, devices: int, compiles: int) -> None:
    """The first line on stderr: the model, its batch, the slice and about how long (trainer/compile_progress.py)."""
    from trainer.core.model import ModelShape

    params = ModelShape.from_config(cfg).param_count()
    per_device = cfg.global_batch / devices
    count = f"{params / 1e9:.1f}B" if params >= 1e9 else f"{params / 1e6:.0f}M" if params >= 1e6 else f"{params:,}"
    what = (f"--model {cfg.model} ({count} parameters; {cfg.global_batch} examples of {cfg.seq_len} "
            f"tokens a step, {per_device:g} a device; remat {cfg.remat_policy})")
    say(first_line(what, where, cfg.n_layers, int(per_device * cfg.seq_len), compiles, params))


def _ahead_store(cfg: TrainerConfig, devices: list) -> Any:
    """--compile-executables' store, written for every host of the group (each a jax process), or None."""
    if not cfg.compile_executables:
        return None
    if cfg.compile_executables.startswith("gs://"):
        from elxpk_storage import gcs_auth  # lazy: a gs:// store only (google-auth)

        gcs_auth.require_credentials(f"--compile-executables {cfg.compile_executables:.200}")
    return ExecutableStore(cfg.compile_executables, ahead_for=len({d.process_index for d in devices}))


# What XLA's allocator may use of a TPU's HBM: a v5e chip of 16 GiB reports a bytes_limit of 16,909,336,064
# (bench/results/device_check-tpu-v5e-2026-12-06.json); the rest is the runtime's own.
USABLE_HBM_SHARE = 16_909_336_064 / 2**34


def device_limit(cfg: TrainerConfig, mesh: Any) -> int | None:
    """The bytes one device's allocator may use, from --compile-chip-bytes; None where it was not given."""
    if not cfg.compile_chip_bytes:
        return None
    per_chip = devices_per_chip(cfg.compile_topology, mesh.devices.size // cfg.num_slices)
    return int(cfg.compile_chip_bytes * USABLE_HBM_SHARE) // per_chip


def _remat_resolved(cfg: TrainerConfig, mesh: Any, donate: bool) -> TrainerConfig:
    """--remat-policy auto resolved as the run would on the full mesh, against a device's share of
    --compile-chip-bytes (a topology's devices report no memory: the launcher passes the chip's HBM)."""
    from trainer.core.memory import with_remat_resolved
    from trainer.core.state import state_target

    return with_remat_resolved(cfg, state_target(cfg, mesh), mesh, device_limit(cfg, mesh), donates=donate)


def _compiled(cfg: TrainerConfig, mesh: Any, donate: bool, *, refuse: bool, store: Any = None) -> dict[str, Any]:
    """The step on `mesh`: its memory, or (not `refuse`) XLA's refusal as `does_not_fit`. With `refuse`, a
    step XLA finds past the chip is a UsageError naming the sizing flags."""
    from trainer.core.kernels.splash import lowering_for_tpu
    from trainer.core.memory import estimate, sizing_flags
    from trainer.core.state import abstract_state
    from trainer.core.step import StepCache

    slices, per_slice = mesh.devices.shape
    where = {"num_slices": slices, "mesh": dict(mesh.shape)}
    try:
        with lowering_for_tpu():  # splash as Mosaic compiles it for the chip, not the CPU's interpreter
            compiled, _ = StepCache(cfg, SystemClock(), donate=donate, store=store).get(mesh)
    except Exception as exc:  # noqa: BLE001 - XLA's own refusal of a step far past the chip: name it
        first = (str(exc).splitlines() or [""])[0]
        if "RESOURCE_EXHAUSTED" not in first:
            raise
        xla = first[first.index("RESOURCE_EXHAUSTED"):][:300]
        if not refuse:
            return {**where, "does_not_fit": xla}
        raise UsageError(f"{sizing_flags(cfg)}: the train step does not fit on {slices} x {cfg.compile_topology}: "
                         f"XLA: {xla} Lower --global-batch, use a smaller model, or use more slices or a larger "
                         "slice") from None
    analysis = compiled.executable.memory_analysis()
    need = estimate(cfg, abstract_state(cfg), per_slice, mesh.devices.size, donates=donate, on="tpu")
    return {**where, "bytes_per_device": compiled.bytes_per_device, "estimate_bytes_per_device": need.total,
            "memory_analysis": {name: int(getattr(analysis, name)) for name in _ANALYSIS_FIELDS},
            "compile_s": round(compiled.compile_s, 3),
            **({"executable_store": compiled.saved or "written"} if store is not None else {})}


def run(cfg: TrainerConfig) -> int:
    """The action: the report as one JSON line on stdout, exit 0."""
    import jax

    jax.config.update("jax_enable_compilation_cache", False)  # nothing written, even under the caller's cache
    report = compile_report(cfg)
    sys.stdout.write(json.dumps(report, sort_keys=True) + "\n")
    sys.stdout.flush()
    return 0
