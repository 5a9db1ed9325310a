"""The speed line and the one peak table (issue 50): MFU against the chip's bf16 peak where the table knows the
device, none (said once) where it does not; the sum weighs each step by the devices it ran on. The real
SpeedLog is fed the metric records a run writes; `python -m trainer` printing it is
tests/process/test_speed_line.py."""

from __future__ import annotations

import ast
import io
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from elxpk import catalog
from elxpk_contract.chip_peaks import DEVICE_KINDS, PEAK_BF16_TFLOPS, generation_peak, peak_tflops
from elxpk_contract.event_records import RunStarted
from elxpk_contract.records import make_event
from elxpk_contract.speed import SpeedBasis, SpeedSum
from trainer.speed_log import SpeedLog

ROOT = Path(__file__).resolve().parents[2]
V5E = SpeedBasis(tokens_per_example=256, flops_per_example=3e9, devices_per_slice=4, device_kind="TPU v5 lite",
                 peak_tflops=197.0)


def metric(step: int, seconds: float, slices=(0, 1), batch: int = 8, loss: float = 2.5) -> dict:
    return {"step": step, "loss": float(loss).hex(), "lr": 0.001, "step_time_s": seconds,
            "examples": [step * batch, (step + 1) * batch], "slices": list(slices), "time": 1.0 + step}


def test_a_tpu_line_states_mfu_against_its_peak_every_log_period_steps():
    out = io.StringIO()
    log = SpeedLog(V5E, 2, out)
    for step, seconds in enumerate((0.5, 0.3, 0.2, 0.2)):
        log.observe("metric", metric(step, seconds))
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and lines[0].startswith("completed step: 1, seconds: 0.400,")
    # steps 2-3: 16 examples on 2 slices x 4 devices in 0.4 s
    tflops = 16 * 3e9 / (0.4 * 8) / 1e12
    assert lines[1] == (f"completed step: 3, seconds: 0.200, TFLOP/s/device: {tflops:.3f}, Tokens/s/device: "
                        f"{16 * 256 / 0.4 / 8:.0f}, tokens/s: {16 * 256 / 0.4:.0f}, MFU: {100 * tflops / 197:.1f}%, "
                        "loss: 2.5000")


def test_an_unknown_device_says_once_that_it_has_no_mfu_and_states_none():
    out = io.StringIO()
    log = SpeedLog(V5E._replace(device_kind="TPU v9 imaginary", peak_tflops=None), 1, out)
    for step in range(3):
        log.observe("metric", metric(step, 0.1))
    lines = out.getvalue().splitlines()
    assert lines[0] == ("speed: no MFU: elxpk knows no bf16 peak for TPU v9 imaginary "
                        "(elxpk_contract/chip_peaks.py)")
    assert len(lines) == 4 and not any("MFU:" in line for line in lines[1:])
    assert log.recent() is not None and log.recent().mfu is None


def test_recent_is_the_speed_since_the_previous_call_and_keeps_the_last_one_without_steps():
    log = SpeedLog(V5E, 0, None)
    assert log.recent() is None
    log.observe("metric", metric(0, 1.0))
    first = log.recent()
    log.observe("metric", metric(1, 0.5))
    second = log.recent()
    assert second.tokens_per_s == pytest.approx(2 * first.tokens_per_s)
    assert log.recent() == second


@given(st.lists(st.tuples(st.integers(1, 64), st.integers(1, 4), st.floats(1e-3, 10.0)), min_size=1, max_size=30))
def test_the_sum_weighs_each_step_by_its_devices(steps):
    total = SpeedSum(V5E)
    for examples, slices, seconds in steps:
        total.add(examples, slices, seconds)
    speed = total.speed()
    flops = sum(e for e, _, _ in steps) * V5E.flops_per_example
    device_s = sum(s * n * V5E.devices_per_slice for _, n, s in steps)
    assert speed.tflops_per_device == pytest.approx(flops / device_s / 1e12)
    assert speed.mfu == pytest.approx(speed.tflops_per_device / 197.0)
    assert speed.tokens_per_s == pytest.approx(sum(e for e, _, _ in steps) * 256 / sum(s for _, _, s in steps))


def test_run_started_carries_the_basis_and_an_older_record_has_none():
    event = make_event("run_started", 1.0, 0, **V5E._asdict())
    assert isinstance(event, RunStarted) and event.speed_basis() == V5E
    assert RunStarted(time=1.0, step=0).speed_basis() is None


def test_every_peak_comes_from_the_one_table():
    assert {peak_tflops(kind) for kind in DEVICE_KINDS} == set(PEAK_BF16_TFLOPS.values())
    assert peak_tflops("cpu") is None and peak_tflops("TPU v5 lite") == 197.0
    for name in ("v4-8", "v5litepod-16", "v5p-8", "v6e-4"):
        tpu = catalog.find(name)
        assert tpu.peak_bf16_tflops == generation_peak(tpu.jax_generation) is not None
    # No other peak table: bench/ reads this one (a dict literal of TPU device kinds to numbers is a copy).
    for path in [*ROOT.glob("bench/*.py"), *ROOT.glob("trainer/**/*.py"), *ROOT.glob("elxpk/**/*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Dict):
                keys = [k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
                assert not any(k in DEVICE_KINDS for k in keys), f"{path}: a peak table of its own"


def test_a_damaged_or_hostile_basis_or_record_shows_no_speed_rather_than_an_absurd_one():
    total = SpeedSum(V5E._replace(flops_per_example=1e308))
    total.add(64, 1, 1e-3)
    assert total.speed() is None
    from elxpk.cluster.verbs.status_render import speed_text

    assert speed_text({"tokens_per_s": 1e300, "mfu": 0.5}) == "" and speed_text({"tokens_per_s": -1.0}) == ""
    assert speed_text({"tokens_per_s": 10.0, "mfu": 40.0}) == "; 10 tokens/s, no MFU"
    assert speed_text({"tokens_per_s": 10.0, "mfu": 0.25}) == "; 10 tokens/s, MFU 25.0%"
