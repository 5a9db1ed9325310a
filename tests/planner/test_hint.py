"""The submit-time hint, with a stand-in spec (the launcher's WorkloadSpec is not needed)."""

from __future__ import annotations

from dataclasses import dataclass

from elxpk.plan import model
from elxpk.plan.hint import checkpoint_period_hint
from elxpk.plan.model import PAUSE_RESUME, Costs


@dataclass(frozen=True)
class Spec:
    checkpoint_period: int = 100
    num_slices: int = 32
    slice_mtbf_seconds: float | None = 30 * 86400.0
    step_time_seconds: float | None = 2.5


BEST = model.best_period_steps(Costs(32, 30 * 86400, 2.5, 20, 90, 100), PAUSE_RESUME)


def test_a_period_far_below_the_optimum_gets_one_line():
    line = checkpoint_period_hint(Spec(checkpoint_period=100))
    assert line is not None and "\n" not in line
    assert f"planned {BEST} steps" in line and f"{BEST / 100:.1f}x shorter" in line
    assert "assumed 20s save" in line and "elxpk plan" in line


def test_a_period_far_above_the_optimum_gets_one_line():
    line = checkpoint_period_hint(Spec(checkpoint_period=3 * BEST))
    assert line is not None and "3.0x longer" in line


def test_within_a_factor_of_two_is_quiet():
    for period in (BEST // 2 + 1, BEST, 2 * BEST):
        assert checkpoint_period_hint(Spec(checkpoint_period=period)) is None


def test_missing_inputs_give_no_hint():
    assert checkpoint_period_hint(Spec(slice_mtbf_seconds=None)) is None
    assert checkpoint_period_hint(Spec(step_time_seconds=None)) is None
    assert checkpoint_period_hint(object()) is None


def test_a_measured_save_cost_moves_the_optimum():
    @dataclass(frozen=True)
    class WithSave(Spec):
        checkpoint_save_seconds: float = 2.0

    # A 2s save puts the optimum near sqrt(2*2*81000)/2.5 = 228 steps: 150 is within 2x.
    assert checkpoint_period_hint(WithSave(checkpoint_period=150)) is None
    line = checkpoint_period_hint(WithSave(checkpoint_period=1000))
    assert line is not None and "2.0s saves" in line


def test_an_unset_period_is_the_trainers_default():
    line = checkpoint_period_hint(Spec(checkpoint_period=None))
    assert line is not None and line.startswith("hint: the default checkpoint_period 100 is")
