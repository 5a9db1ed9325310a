"""A run's speed as `elxpk report` states it beside goodput: tokens/s, TFLOP/s per device and MFU.

Summed (elxpk_contract/speed.py SpeedSum) over the steps that count, each with the devices it ran on, from
the basis the trainer wrote in its newest `run_started` event (an example's tokens and model FLOPs, the
devices per slice, the device's bf16 peak). A run whose trainer wrote no basis (the supervisor's events
only, an older trainer) has no speed; a device without a known peak (a CPU) has no MFU, and says so.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass

from elxpk.runs.rundir import Run
from elxpk_contract.event_records import RunStarted
from elxpk_contract.speed import Speed, SpeedBasis, SpeedSum


@dataclass(frozen=True)
class RunSpeed:
    speed: Speed
    basis: SpeedBasis

    def describe(self) -> str:
        b = self.basis
        where = f"{self.speed.steps} steps that count, on {b.device_kind or 'an unnamed device'}"
        kind = b.device_kind or "this device"
        peak = f", bf16 peak {b.peak_tflops:g} TFLOP/s" if b.peak_tflops else f"; no MFU: elxpk knows no bf16 peak for {kind}"
        return f"speed {self.speed.describe()} ({where}{peak})"

    def to_dict(self) -> dict:
        s, b = self.speed, self.basis
        return {"tokens_per_s": s.tokens_per_s, "tokens_per_s_per_device": s.tokens_per_s_per_device,
                "tflops_per_device": s.tflops_per_device, "mfu": s.mfu, "steps": s.steps,
                "device_kind": b.device_kind, "peak_tflops": b.peak_tflops}


def run_speed(run: Run, order: array) -> RunSpeed | None:
    """The speed of the records at `order` (the steps that count), or None without a basis or step time."""
    basis = next((b for e in reversed(run.events_of(RunStarted)) if (b := e.speed_basis()) is not None), None)
    if basis is None:
        return None
    m = run.metrics
    total = SpeedSum(basis)
    for i in order:
        total.add(m.end[i] - m.first[i], len(m.slice_sets[m.slice_set[i]]), m.step_time[i])
    speed = total.speed()
    return None if speed is None else RunSpeed(speed, basis)
