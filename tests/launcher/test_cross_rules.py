"""The rules between `workload create`'s flags, as pure functions over typed values (elxpk/create/cross_rules.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from elxpk.create.cross_rules import (
    Slices,
    min_slice_count_rules,
    pre_start_problems,
    restart_codes,
    slice_rules,
)


def test_elastic_slices_must_leave_a_survivor_and_need_pathways():
    counts, errors, warnings = slice_rules(2, 2, 1, pathways=True, restarts_given=False, elastic_given=True)
    assert counts == Slices(2, 0, 1) and warnings == []
    assert errors == ["--elastic-slices 2: must be below --num-slices (2); at least one slice must survive, so use "
                      "0..1 or raise --num-slices"]
    counts, errors, _ = slice_rules(3, 1, 1, pathways=False, restarts_given=False, elastic_given=True)
    assert counts.elastic_slices == 0 and errors[0].startswith("--elastic-slices 1: needs Pathways")


def test_slice_restarts_zero_when_elastic_is_an_error_and_without_elasticity_a_warning():
    _, errors, _ = slice_rules(3, 1, 0, pathways=True, restarts_given=True, elastic_given=True)
    assert errors[0].startswith("--max-slice-restarts 0: an elastic run needs >= 1")
    _, errors, warnings = slice_rules(3, 0, 5, pathways=True, restarts_given=True, elastic_given=False)
    assert errors == [] and warnings[0].startswith("--max-slice-restarts only counts with --elastic-slices > 0")


def test_restart_codes_read_ranges_sorted_and_unique():
    assert restart_codes("77, 1,75-77", headless=False) == ((1, 75, 76, 77), [])
    assert restart_codes(None, headless=True) == ((), [])
    assert restart_codes("1", headless=True)[1][0].startswith("--restart-on-exit-codes: a --headless workload")
    assert restart_codes("0", headless=False)[1] == [
        "--restart-on-exit-codes '0': '0' is outside 1..255 (0 is success, exit codes end at 255); e.g. 1,75-77"]


@given(st.text(alphabet="0123456789,-_ ١٢٣²x", max_size=12))
def test_restart_codes_never_raise_and_read_only_ascii_digits(raw):
    codes, errors = restart_codes(raw, headless=False)
    assert not (codes and errors)  # codes, or one refusal, never both
    if codes:  # every code it took was written in ASCII digits (the contract's plain_number_text)
        assert raw.isascii() and "_" not in raw and all(1 <= c <= 255 for c in codes)
    for line in errors:
        assert line.startswith(f"--restart-on-exit-codes {raw!r}: ") and "\n" not in line


def test_pre_start_needs_maxtext_and_a_checkpoint_dir():
    assert pre_start_problems(maxtext=True, checkpoint_dir="gs://bkt/r") == []
    assert pre_start_problems(maxtext=False, checkpoint_dir="gs://bkt/r")[0].startswith(
        "--checkpoint-pre-start: only with --trainer maxtext")
    assert pre_start_problems(maxtext=True, checkpoint_dir=None)[0].startswith(
        "--checkpoint-pre-start: needs --checkpoint-dir")


def test_min_slice_count_below_what_pathways_keeps_is_a_warning_not_an_error():
    assert min_slice_count_rules(Slices(4, 1, 1), None) == ([], [])
    errors, warnings = min_slice_count_rules(Slices(4, 1, 1), 2)
    assert errors == [] and warnings[0].startswith("--elastic-min-slice-count 2: below num_slices - elastic_slices = 3")
    errors, warnings = min_slice_count_rules(Slices(4, 1, 1), 5)
    assert errors and warnings == []
