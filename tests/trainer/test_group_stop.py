"""The group stop's record in the coordination service (trainer/elastic/group_stop.py): what one process
writes, every other reads back the same; anything else in the key is no stop, never an error. The protocol
itself runs between real processes in tests/trainer/test_multicontroller.py."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from trainer.elastic.group_stop import GroupStop

signals = st.sampled_from(["SIGTERM", "SIGINT", "SIGUSR1"])


@given(st.integers(0, 2**40), st.integers(0, 4096), st.one_of(st.none(), st.integers(0, 4096)), signals, st.booleans())
def test_what_one_process_writes_every_process_reads_back(step, process, slice_index, signal, save):
    stop = GroupStop(step, process, slice_index, signal, save)
    assert GroupStop.parse(stop.text()) == stop


@given(st.text(max_size=60))
def test_any_other_text_is_no_stop_or_a_whole_one(text):
    parsed = GroupStop.parse(text)
    assert parsed is None or parsed.text() == text


def test_the_near_misses_are_no_stop():
    for text in ("", "8 1 1", "8 1 1 SIGTERM", "08 1 1 SIGTERM save", "8 1 1 SIGTERM save\n", "² 1 1 SIGTERM save",
                 "8 1 x SIGTERM save", "-1 1 1 SIGTERM save", "8  1 1 SIGTERM save", "8 1 1 sigterm save",
                 "9" * 19 + " 1 1 SIGTERM save", "8 1 1 SIGTERM Save", "8 1 1 SIGTERM yes"):
        assert GroupStop.parse(text) is None, text
