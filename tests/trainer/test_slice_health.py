"""The health check a returning slice passes before it receives the state (trainer/elastic/slice_health.py), on
the real CPU devices: a known matmul on each device, an all-reduce over the slice, under a timeout."""

from __future__ import annotations

import threading

import jax
import pytest

from elxpk_contract.faults import FaultSchedule
from tests.support.clock import ManualClock
from tests.support.runs import read_jsonl
from trainer.elastic.slice_health import RejoinGate, run_checks, within
from trainer.elastic.slices import SimulatedSlices
from trainer.metrics import RunRecorder


def test_healthy_devices_pass_and_a_corrupted_device_fails_on_its_result():
    devices = jax.devices()[:2]
    assert run_checks(devices) is None
    assert run_checks(devices, corrupt=True) == (f"matmul on device {devices[0].id} gave a wrong result "
                                                 "(32 of 1024 entries differ)")


def test_a_check_that_hangs_or_raises_is_a_failed_check():
    never = threading.Event()
    try:
        assert within(0.05, lambda: never.wait() and None) == (
            "the check did not finish within 0.05s (a device or a collective hangs)")
    finally:
        never.set()  # let the left-behind thread end

    def boom() -> str | None:
        raise RuntimeError("INTERNAL: device 3 wedged\nmore")

    assert within(5, boom) == "the check raised: INTERNAL: device 3 wedged"


def _refusals(run_dir) -> list[dict]:
    return [{k: e[k] for k in ("event", "step", "slices", "reason")} for e in read_jsonl(run_dir / "events.jsonl")]


def test_the_gate_keeps_a_sick_slice_out_and_records_why_once(tmp_path):
    clock = ManualClock()
    backend = SimulatedSlices(2, 1, FaultSchedule.parse(["1@sick:2+4"]), clock)
    with pytest.raises(Exception, match="DATA_LOSS"):
        backend.fault_point("step", 2, [0, 1])
    backend.fault_point("step", 4, [0])  # the revive step: slice 1 is back, and answers the probe
    assert backend.healthy_slices() == [0, 1]
    recorder = RunRecorder(tmp_path, clock)
    gate = RejoinGate(backend, recorder, clock, recheck_s=1.0)
    assert gate.admit([1], 4) == []
    clock.sleep(5)  # past recheck_s: checked again, refused again, no second event for the same reason
    assert gate.admit([1], 6) == []
    recorder.close()
    why = f"matmul on device {jax.devices()[1].id} gave a wrong result (32 of 1024 entries differ)"
    assert _refusals(tmp_path) == [{"event": "rejoin_refused", "step": 4, "slices": [1], "reason": why}]
    assert gate.refused() == {1: why}


def test_a_healthy_returning_slice_is_admitted(tmp_path):
    clock = ManualClock()
    backend = SimulatedSlices(2, 1, FaultSchedule.parse(["1@2+4"]), clock)
    recorder = RunRecorder(tmp_path, clock)
    gate = RejoinGate(backend, recorder, clock, recheck_s=1.0)
    assert gate.admit([1], 4) == [1] and gate.refused() == {}
    recorder.close()
    assert _refusals(tmp_path) == []
