"""The drain's rule (trainer/elastic/drain.py): save when the grace period left at the stop step covers
1.5 x the save + 3 s. The save itself, between real processes, is in tests/trainer/test_multicontroller.py."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from trainer.elastic.drain import EXIT_RESERVE_S, SAFETY, expected_save_s, outcome, verdict

seconds = st.floats(0.0, 3600.0, allow_nan=False)


@given(seconds, seconds, seconds, seconds, seconds)
def test_more_grace_never_turns_a_save_into_none(grace, more, heard_ago, step_s, save_s):
    if verdict(grace, heard_ago, step_s, save_s).save:
        assert verdict(grace + more, heard_ago, step_s, save_s).save


@given(seconds, seconds, seconds, seconds)
def test_it_saves_exactly_when_what_is_left_covers_the_save(grace, heard_ago, step_s, save_s):
    said = verdict(grace, heard_ago, step_s, save_s)
    assert said.save == (grace - heard_ago - step_s >= SAFETY * save_s + EXIT_RESERVE_S)
    assert f"of the {grace:g} s grace period left at the stop step" in said.why


def test_the_slowest_save_seen_wins_over_the_estimate_and_the_estimate_grows_with_the_bytes():
    import numpy as np

    assert expected_save_s([0.5, 2.0, 1.0], {"w": np.zeros(10**6, np.float32)}) == 2.0
    small = expected_save_s([], {"w": np.zeros(10**3, np.float32)})
    big = expected_save_s([], {"w": np.zeros(10**7, np.float32)})
    assert 0 < small < big


def test_the_steps_lost_are_those_back_to_the_newest_checkpoint():
    assert outcome(12, 12, True, "why").steps_lost == 0 and outcome(12, 12, True, "why").save_skipped == ""
    assert (outcome(12, 8, False, "why").steps_lost, outcome(12, 8, False, "why").save_skipped) == (4, "why")
    assert outcome(5, None, False, "why").steps_lost == 5  # no checkpoint: the restart starts over
