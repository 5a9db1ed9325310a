"""One definition of a step number (elxpk_contract/step_names.py), and every reader of checkpoint and run
folders held to it: a folder named with any Unicode digit that is not ASCII is no step, and no error."""

from __future__ import annotations

import sys
import unicodedata
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from elxpk.checkpoints.flags import checkpoint_period
from elxpk.checkpoints.inspection import inspect_directory, step_of
from elxpk.errors import UsageError
from elxpk.local.resume import checkpoint_steps
from elxpk.plan.calibrate import _newest_checkpoint_bytes
from elxpk_contract.limits import MAX_INDEX
from elxpk_contract.step_names import ascii_number, canonical_step, digit_like, step_number
from elxpk_storage import checkpoint_files as ckpt_storage

# Every character Python calls a digit of some kind: Nd (decimal digits of every script), and the No/Nl
# characters str.isdigit() or str.isnumeric() accept (`²`, `①`, `Ⅻ`).
NUMERIC = [c for c in map(chr, range(sys.maxunicode + 1))
           if unicodedata.category(c) in ("Nd", "No", "Nl") and c not in "0123456789"]


def test_every_non_ascii_digit_is_no_step_number():
    nd = [c for c in NUMERIC if unicodedata.category(c) == "Nd"]
    assert len(nd) > 600 and "٣" in nd and "３" in nd and "²" in NUMERIC
    for c in NUMERIC:
        for name in (c, f"1{c}", f"{c}0", c * 3):
            assert step_number(name) is None and ascii_number(name) is None and canonical_step(name) is None, name
            assert step_of(name) is None and step_of(f"{name}.orbax-checkpoint-tmp") is None
            assert digit_like(name) == name.isdigit()


@given(st.text(max_size=25))
def test_a_step_number_is_ascii_digits_within_max_index(name):
    value = step_number(name)
    if value is None:
        assert not (name and name.isascii() and name.isdigit() and len(name) <= 19 and int(name) <= MAX_INDEX)
    else:
        assert name.isascii() and name.isdigit() and int(name) == value <= MAX_INDEX
        assert (canonical_step(name) == value) == (str(value) == name)


@given(st.integers(0, MAX_INDEX))
def test_every_step_round_trips(step):
    assert step_number(str(step)) == canonical_step(str(step)) == step
    assert step_number(str(step).zfill(19)) == step and canonical_step(str(step).zfill(19)) in (None, step)


def _folders(root: Path, names: list[str]) -> None:
    for name in names:
        (root / name).mkdir(parents=True)
        (root / name / "_CHECKPOINT_METADATA").write_text("{}")


def test_every_reader_of_checkpoint_folders_passes_over_non_ascii_digits(tmp_path):
    """resume (`local run`), `plan --from-run`'s size sum, the inspection (and so the pre-start), the
    trainer's storage: real folders named with every non-ASCII digit, beside two real steps."""
    root = tmp_path / "checkpoints"
    _folders(root, ["2", "4"])
    sample = sorted(set(NUMERIC[::7]) | {"²", "٣", "３"})
    _folders(root, sample)
    (root / "4" / "_CHECKPOINT_METADATA").write_text("{}" * 10)
    assert checkpoint_steps(root) == (2, 4)
    assert _newest_checkpoint_bytes(root) == 20.0
    report = inspect_directory(ckpt_storage.checkpoint_root(str(root)), None)
    assert [s.name for s in report.steps] == ["2", "4"]
    assert ckpt_storage.uncommitted(ckpt_storage.checkpoint_root(str(root))) == []
    assert not any(ckpt_storage.is_step_dir(ckpt_storage.checkpoint_root(str(root / n))) for n in sample)


@given(st.sampled_from(NUMERIC))
def test_a_flag_of_non_ascii_digits_is_one_usage_line(c):
    try:
        checkpoint_period(f"1{c}")
    except UsageError as exc:
        assert str(exc).startswith("--checkpoint-period")
    else:
        raise AssertionError(f"--checkpoint-period 1{c} accepted")


def test_a_copy_of_a_step_under_a_name_the_trainer_never_writes_is_refused_by_its_name(tmp_path):
    """The fifth pass: a real step's files under `0025`, fullwidth `２５` or 20 digits. The trainer (and so
    `local run`'s resume) refuses the folder, naming why: its name, not missing metadata. Names that are no
    digits at all (`+25`, ` 25`, `25\\n`, `-25`, `25.0`) are not steps and are passed over."""
    import pytest

    for name in ("0025", "２５", "12345678901234567890", "0000000000000000000025"):
        root = tmp_path / name.encode("unicode_escape").decode() / "checkpoints"
        _folders(root, ["20", name])
        with pytest.raises(UsageError, match=r"ASCII digits, no leading zero") as info:
            ckpt_storage.refuse_unsafe_checkpoints(str(root))
        assert str(info.value).count("\n") == 0
    for name in ("+25", " 25", "25\n", "-25", "25.0", "25 "):
        root = tmp_path / f"ok{abs(hash(name))}" / "checkpoints"
        _folders(root, ["20", name])
        ckpt_storage.refuse_unsafe_checkpoints(str(root))  # passed over, as orbax passes over them
        assert checkpoint_steps(root) == (20,) and _newest_checkpoint_bytes(root) == 2.0
        assert [s.name for s in inspect_directory(ckpt_storage.checkpoint_root(str(root)), None).steps] == ["20"]
