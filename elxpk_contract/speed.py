"""A run's speed from its records: tokens/s, TFLOP/s per device and MFU, computed one way for every reader.

The trainer's speed line (trainer/speed_log.py), the progress record it publishes, `elxpk report`, `workload
status` and the local live view all sum steps with `SpeedSum` over the `SpeedBasis` the trainer wrote in its
`run_started` event: what one example costs (tokens, model FLOPs: ModelShape.flops_per_example, MaxText's
formula), the devices per slice and the device's bf16 peak (elxpk_contract/chip_peaks.py; None on a CPU or
an unknown chip, and then no MFU). A step's devices are its slices x the devices per slice, so a resized run's
steps count with the devices they ran on. Standard library only.
"""

from __future__ import annotations

import math
from typing import NamedTuple


class SpeedBasis(NamedTuple):
    """What turns a step's examples and seconds into a speed (from the trainer's run_started event)."""

    tokens_per_example: int  # seq_len
    flops_per_example: float  # model FLOPs of one example, forward and backward
    devices_per_slice: int
    device_kind: str  # jax's name of the device, e.g. "TPU v5 lite", "cpu"
    peak_tflops: float | None  # one device's dense bf16 peak; None: unknown, no MFU


class Speed(NamedTuple):
    steps: int
    seconds: float  # the steps' own seconds, summed
    tokens_per_s: float
    tokens_per_s_per_device: float
    tflops_per_device: float
    mfu: float | None  # a fraction of the peak; None where no peak is known

    def describe(self) -> str:
        """`12,345 tokens/s, 45.6 TFLOP/s per device, MFU 23.1%` (MFU left out where it is unknown)."""
        mfu = "" if self.mfu is None else f", MFU {100.0 * self.mfu:.1f}%"
        return f"{self.tokens_per_s:,.0f} tokens/s, {self.tflops_per_device:.3g} TFLOP/s per device{mfu}"


class SpeedSum:
    """Steps added one at a time (examples, slices in the mesh, seconds); `speed()` is their speed as a whole:
    the tokens over the seconds, the FLOPs over the device-seconds (a step on fewer devices weighs less)."""

    def __init__(self, basis: SpeedBasis) -> None:
        self.basis = basis
        self.steps = 0
        self.examples = 0
        self.seconds = 0.0
        self.device_seconds = 0.0

    def add(self, examples: int, slices: int, seconds: float) -> None:
        self.steps += 1
        self.examples += examples
        self.seconds += seconds
        self.device_seconds += seconds * slices * self.basis.devices_per_slice

    def speed(self) -> Speed | None:
        """None before a step with time in it (a zero-second step tells no speed)."""
        if self.steps == 0 or self.seconds <= 0.0 or self.device_seconds <= 0.0:
            return None
        b = self.basis
        tflops = self.examples * b.flops_per_example / self.device_seconds / 1e12
        mfu = None if not b.peak_tflops else tflops / b.peak_tflops
        tokens = self.examples * b.tokens_per_example
        speed = Speed(self.steps, self.seconds, tokens / self.seconds, tokens / self.device_seconds, tflops, mfu)
        # A basis read from a damaged or hostile record can overflow: no speed then, never an infinite one.
        return speed if all(math.isfinite(v) for v in speed if v is not None) else None
