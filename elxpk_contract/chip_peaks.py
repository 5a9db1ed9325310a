"""The one table of accelerator peaks: a chip's dense bf16 TFLOP/s, for MFU.

The trainer's speed line (trainer/speed_log.py) looks its devices up by jax's `device_kind`; the launcher's
catalog (elxpk/catalog.py) by the jax generation of a TPU type; bench/bench_chip.py by `device_kind` too.
Only figures the vendor publishes are here: a device this table does not know gets no MFU, never a guess.
On these TPUs jax gives one device per chip (v4 and v5p as one megacore), so the peak is also a device's.
Standard library only.
"""

from __future__ import annotations

# Dense bf16 TFLOP/s per chip, from Google's Cloud TPU pages (cloud.google.com/tpu/docs/v4, v5e, v5p, v6e)
# and NVIDIA's H100/H200 datasheets (SXM, without sparsity).
PEAK_BF16_TFLOPS: dict[str, float] = {
    "v4": 275.0,
    "v5e": 197.0,
    "v5p": 459.0,
    "v6e": 918.0,
    "h100": 989.0,
    "h200": 989.0,
}

# jax's `device.device_kind` -> the generation above. jax names a v5e "TPU v5 lite", a v5p "TPU v5" and a
# v6e "TPU v6 lite"; the other spellings are older jaxlibs'.
DEVICE_KINDS: dict[str, str] = {
    "TPU v4": "v4",
    "TPU v5 lite": "v5e",
    "TPU v5e": "v5e",
    "TPU v5": "v5p",
    "TPU v5p": "v5p",
    "TPU v6 lite": "v6e",
    "TPU v6e": "v6e",
    "NVIDIA H100 80GB HBM3": "h100",
    "NVIDIA H200": "h200",
}


def peak_tflops(device_kind: str) -> float | None:
    """The dense bf16 peak of one device of `device_kind` (jax's name), or None where none is known (a CPU,
    or a chip not in the table): then there is no MFU to state."""
    generation = DEVICE_KINDS.get(device_kind)
    return None if generation is None else PEAK_BF16_TFLOPS[generation]


def generation_peak(generation: str) -> float | None:
    """The peak of a jax generation (v5e, v5p: a catalog TPU type's `jax_generation`), or None."""
    return PEAK_BF16_TFLOPS.get(generation)


def no_peak_note(device_kind: str) -> str:
    """Why there is no MFU on `device_kind`: said once where a speed is shown without one."""
    return f"no MFU: elxpk knows no bf16 peak for {device_kind or 'this device'} (elxpk_contract/chip_peaks.py)"
