"""The fault grammar."""

from __future__ import annotations

import pytest

from elxpk_contract.faults import Fault, FaultSchedule


def test_every_form_parses():
    schedule = FaultSchedule.parse(["1@120", "1@mid:7", "0@data:50", "1@save:100", "0@restore", "1@5+9"],
                                   revive_after=2.0)
    assert schedule.faults == (
        Fault(1, "step", 120, None, "1@120"),
        Fault(1, "mid", 7, None, "1@mid:7"),
        Fault(0, "data", 50, None, "0@data:50"),
        Fault(1, "save", 100, None, "1@save:100"),
        Fault(0, "restore", None, None, "0@restore"),
        Fault(1, "step", 5, 9, "1@5+9"),
    )
    assert schedule.revive_after == 2.0


@pytest.mark.parametrize("spec, fragment", [
    ("1-120", "expected K@STEP"),
    ("1@save", "save needs a step"),
    ("1@mid", "mid needs a step"),
    ("1@restore:3", "restore takes no step"),
    ("1@10+5", "must come after step 10"),
    ("a@1", "expected K@STEP"),
])
def test_bad_specs_raise_a_clear_value_error(spec, fragment):
    with pytest.raises(ValueError, match=fragment):
        FaultSchedule.parse([spec])


def test_all_bad_specs_are_reported_together():
    with pytest.raises(ValueError) as info:
        FaultSchedule.parse(["x", "y"], revive_after=-1)
    assert str(info.value).count("\n") == 2


def test_slices_out_of_range_are_problems():
    assert FaultSchedule.parse(["2@3"]).problems(num_slices=2) == [
        "--fault '2@3': slice 2 does not exist (slices are 0..1)"
    ]


def test_mid_strikes_only_inside_its_step():
    (mid,) = FaultSchedule.parse(["1@mid:6"]).faults
    assert mid.strikes("mid", 6) and not mid.strikes("step", 6) and not mid.strikes("mid", 7)


def test_hang_needs_a_step_and_strikes_only_before_its_step():
    (hang,) = FaultSchedule.parse(["1@hang:6+9"]).faults
    assert hang == Fault(1, "hang", 6, 9, "1@hang:6+9")
    assert hang.strikes("step", 6) and not hang.strikes("step", 7) and not hang.strikes("data", 6)
    with pytest.raises(ValueError, match="hang needs a step, e.g. 1@hang:100"):
        FaultSchedule.parse(["1@hang"])
