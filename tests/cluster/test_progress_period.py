"""`workload status` reads the workload's checkpoint period by the trainer's own rule (#29 class 3): a value
of digits from another script (`²`, `٣`, fullwidth), or more digits than int() reads, is no period and
falls back to the default, never an internal error."""

from __future__ import annotations

import sys
import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from elxpk.cluster.records.progress import checkpoint_period
from elxpk_contract.setting_rules import default

NON_ASCII_DIGITS = [chr(c) for c in range(sys.maxunicode + 1)
                    if unicodedata.category(chr(c)) == "Nd" and not chr(c).isascii()] + ["²", "³", "¹"]


def jobset(period: str, as_flag: bool = False) -> dict:
    box = {"name": "jax-tpu", "env": [] if as_flag else [{"name": "ELXPK_CHECKPOINT_PERIOD", "value": period}],
           "command": ["python", "-m", "trainer", f"--checkpoint-period={period}"] if as_flag else []}
    head = {"name": "pathways-head", "template": {"spec": {"template": {"spec": {"containers": [box]}}}}}
    return {"spec": {"replicatedJobs": [head]}}


@given(st.text(st.sampled_from(NON_ASCII_DIGITS + list("0123456789")), min_size=1, max_size=6), st.booleans())
def test_any_digit_of_any_script_is_a_period_only_when_ascii(text: str, as_flag: bool) -> None:
    got = checkpoint_period(jobset(text, as_flag))
    expected = int(text) if text.isascii() and int(text) >= 1 else default("checkpoint_period")
    assert got == expected


def test_a_number_longer_than_int_reads_is_no_period() -> None:
    assert checkpoint_period(jobset("1" * 5000)) == default("checkpoint_period")
    assert checkpoint_period(jobset(" 40 ")) == 40
