"""The trainer's speed line, as MaxText logs it, and the speed the progress record carries.

`SpeedLog` observes the records the RunRecorder writes (trainer/metrics.py): each step's metric gives its
examples, its slices and its seconds, and the session's `SpeedBasis` (elxpk_contract/speed.py, also written
in run_started) turns them into tokens/s, TFLOP/s per device and MFU. Every `--log-period` steps it prints

    completed step: 9, seconds: 0.412, TFLOP/s/device: 98.123, Tokens/s/device: 4970, tokens/s: 79520, MFU: 49.8%, loss: 7.5421

over the steps since the previous line (`seconds` is their mean). A device without a known bf16 peak (a CPU,
an unknown chip: elxpk_contract/chip_peaks.py) gets no MFU, and one line says so first. `recent()` is the
speed of the steps since its previous call: what each progress write publishes for `workload status`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TextIO

from elxpk_contract.chip_peaks import no_peak_note, peak_tflops
from elxpk_contract.speed import Speed, SpeedBasis, SpeedSum

if TYPE_CHECKING:
    from elxpk_contract.settings import TrainerConfig


def speed_basis(cfg: TrainerConfig, device_kind: str, flops_per_example: float) -> SpeedBasis:
    """The session's basis: `cfg` as fitted to the backend (its devices per slice are the hardware's)."""
    return SpeedBasis(cfg.seq_len, flops_per_example, cfg.devices_per_slice, device_kind, peak_tflops(device_kind))


def device_kind(slice_devices: dict[int, list[Any]]) -> str:
    """jax's name of the devices the run trains on (the first slice's first device)."""
    first = next(iter(slice_devices.values()), [])
    return str(getattr(first[0], "device_kind", "")) if first else ""


class SpeedLog:
    """Per-step speed from the metric records; a line every `period` steps on `out` (None or 0: no lines)."""

    def __init__(self, basis: SpeedBasis, period: int, out: TextIO | None) -> None:
        self.basis = basis
        self._period = period if out is not None else 0
        self._out = out
        self._line = SpeedSum(basis)  # the steps since the previous line
        self._recent = SpeedSum(basis)  # the steps since the previous recent()
        self._last: Speed | None = None
        if self._period and basis.peak_tflops is None:
            self._print(f"speed: {no_peak_note(basis.device_kind)}")

    def observe(self, kind: str, record: dict) -> None:
        if kind != "metric":
            return
        first, end = record["examples"]
        slices, seconds = len(record["slices"]), float(record["step_time_s"])
        self._line.add(end - first, slices, seconds)
        self._recent.add(end - first, slices, seconds)
        step = int(record["step"])
        if self._period and (step + 1) % self._period == 0:
            speed = self._line.speed()
            self._line = SpeedSum(self.basis)
            if speed is not None:
                self._print(line(step, speed, float.fromhex(record["loss"])))

    def recent(self) -> Speed | None:
        """The speed of the steps since the previous call; the previous answer where no step came since."""
        speed = self._recent.speed()
        if speed is not None:
            self._last = speed
            self._recent = SpeedSum(self.basis)
        return self._last

    def _print(self, text: str) -> None:
        assert self._out is not None
        try:
            print(text, file=self._out, flush=True)
        except (OSError, ValueError):  # a closed or broken stdout must not stop training
            self._period = 0


def line(step: int, speed: Speed, loss: float) -> str:
    """MaxText's `completed step` line, with the run's tokens/s and MFU (where the peak is known) added."""
    mfu = "" if speed.mfu is None else f", MFU: {100.0 * speed.mfu:.1f}%"
    return (f"completed step: {step}, seconds: {speed.seconds / speed.steps:.3f}, TFLOP/s/device: "
            f"{speed.tflops_per_device:.3f}, Tokens/s/device: {speed.tokens_per_s_per_device:.0f}, tokens/s: {speed.tokens_per_s:.0f}"
            f"{mfu}, loss: {loss:.4f}")
