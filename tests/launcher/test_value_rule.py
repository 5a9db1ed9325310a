"""The one reader of a flag's or a setting's value (elxpk_contract/value_rule.py `read_value`) and the one
spelling context (elxpk_contract/spelling.py), issue 53: a launcher row and a trainer setting with the same
kind and bounds refuse a value that is no number in the same words, because one function writes them; and the
spelling a command sets is the one every message reads, in every thread."""

from __future__ import annotations

import threading

from hypothesis import given, settings
from hypothesis import strategies as st

from elxpk.create import flags as create_flags
from elxpk.flag_rows import INT, Flag, seed_row, setting_row
from elxpk_contract.setting_rules import FIELDS, check_setting, said
from elxpk_contract.spelling import Spelling, spoken_as
from elxpk_contract.value_rule import FLOAT, ValueRule, read_value

# A trainer setting's rule beside a launcher row's of the same kind and bounds: every number setting's.
_NUMBERS = [row.rule for row in FIELDS.values() if row.rule.kind in (INT, FLOAT) and not row.rule.never]
# Texts that read as no number (letters, `_` groups, other scripts' digits, fractions) or as nothing at all.
_NO_NUMBER = st.one_of(st.sampled_from(["abc", "nan", "inf", "-inf", "1e400", "1_0", "١٢", "½", "0x10", "", " "]),
                       st.text(alphabet="abcxyz_½١٢.", min_size=1, max_size=12))


@settings(max_examples=150, deadline=None)
@given(rule=st.sampled_from(_NUMBERS), raw=_NO_NUMBER)
def test_a_launcher_row_and_a_setting_refuse_a_non_number_in_the_same_words(rule, raw):
    trainer = read_value(rule, raw, "--x")
    launcher = read_value(rule._replace(trainer=False, cap=None), raw, "--x")
    assert trainer[0] is None and trainer == launcher, (rule, raw)


def test_every_command_reads_a_setting_by_the_settings_own_rule():
    rows = [*create_flags.TRAINER_SETTINGS, setting_row("steps", default=None, commands=("local",))]
    assert rows and all(row.rule == FIELDS[row.setting].rule for row in rows)
    assert seed_row("x", commands=("plan",)).rule.low == FIELDS["seed"].rule.low


def test_a_whole_number_too_long_for_a_float_is_one_line_not_a_traceback():
    row = Flag("max_restarts", INT, "h", low=0, high=2**31 - 1)
    assert row.read("9" * 400) == (None, f"--max-restarts {'9' * 400}: must be from 0 to 2147483647")
    assert read_value(ValueRule(INT, low=0), 10**400, "--x") == (10**400, None)


def test_one_spelling_context_is_read_by_every_reader():
    gcluster = Spelling({"max_restarts": "--restarts"}, namer=lambda name: f"--trainer-arg={name}")
    row = Flag("max_restarts", INT, "h", low=0)
    with spoken_as(gcluster):
        assert (row.flag, said("max_restarts")) == ("--restarts",) * 2
        assert check_setting("steps", "0") == (None, "--trainer-arg=steps 0: must be at least 1")
    assert (row.flag, said("steps")) == ("--max-restarts", "--steps")
    with spoken_as(Spelling(namer=lambda name: f"ELXPK_{name.upper()}")):
        assert said("steps") == "ELXPK_STEPS"  # the launcher's rooms and the trainer's read one context


def test_a_thread_started_before_the_command_spoke_names_its_flags_as_the_command_does():
    """The trainer's threads (data, watchdog, orbax) and any started earlier build messages too: a ContextVar
    set in the main thread would leave them with the plain spelling."""
    ready, go, seen = threading.Event(), threading.Event(), []

    def reader() -> None:
        ready.set()
        go.wait(10)
        seen.append(Flag("max_restarts", INT, "h").flag)

    thread = threading.Thread(target=reader)
    thread.start()
    ready.wait(10)
    with spoken_as(Spelling({"max_restarts": "--restarts"})):
        go.set()
        thread.join(10)
    assert seen == ["--restarts"]
