"""Every text value elxpk writes into a MaxText command reads back, in MaxText's own OmegaConf, as the same
string (the class behind issue 19's `--checkpoint-dir gs://bkt/q/.5`): random printable text through
`maxtext_overrides`, the shell's word splitting, then `OmegaConf.from_cli` as pyconfig calls it."""

from __future__ import annotations

import shlex

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elxpk.maxtext.overrides import maxtext_overrides
from tests.maxtext_startup.corpus import RUN

pytestmark = pytest.mark.slow
NAME = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=24).filter(
    lambda t: "/" not in t and t.strip() not in ("", ".", ".."))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parent=NAME, run=NAME)
def test_checkpoint_dir_parts_read_back_as_the_same_text(maxtext_worker, parent, run):
    d = f"gs://bkt/{parent}/{run}"
    o = maxtext_overrides({"checkpoint_dir": d}, pathways=True, elastic=False, user_command=RUN)
    if o.errors:  # refused: only what no quoting can keep
        assert "${" in d or not d.replace(" ", "").isprintable(), o.errors
        return
    words = shlex.split(o.command)[len(shlex.split(RUN)):]
    reply = maxtext_worker.from_cli(words)
    assert reply["ok"], reply
    base, name = d.strip().rstrip("/").rsplit("/", 1)
    assert reply["values"]["base_output_directory"] == ["str", base]
    assert reply["values"]["run_name"] == ["str", name]
