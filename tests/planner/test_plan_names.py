"""One name per quantity: `plan` spells its times as `workload create` does (elxpk/timing_flags.py), its earlier
spellings read the same rows, and the times both commands take are declared once, with one help."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from elxpk import timing_flags
from elxpk.create import flags as create_table
from elxpk.plan import flags as plan_table
from tests.planner.helpers import EXAMPLE, example_with, run_plan

EARLIER = [("--checkpoint-save", "--checkpoint-save-time", "7s"), ("--replacement", "--slice-replacement-time", "3m")]


@pytest.mark.parametrize(("old", "new", "value"), EARLIER)
def test_the_earlier_spelling_reads_the_same_row(capsys, old, new, value):
    code_new, out_new, err = run_plan(example_with([new, value]) + ["-o", "json"], capsys)
    assert code_new == 0, err
    without = [t for pair in zip(EXAMPLE[::2], EXAMPLE[1::2], strict=True) if pair[0] != new for t in pair]
    code_old, out_old, err = run_plan(without + [old, value, "-o", "json"], capsys)
    assert code_old == 0, err
    assert json.loads(out_old)["inputs"] == json.loads(out_new)["inputs"]


@pytest.mark.parametrize(("old", "new", "value"), EARLIER)
def test_both_spellings_are_one_line_naming_both(capsys, old, new, value):
    code, out, err = run_plan(example_with([new, value]) + [old, value], capsys)
    assert (code, out) == (2, "")
    assert err.splitlines() == [f"error: {old} and {new}: two spellings of one quantity; give {new} only"]


def test_help_lists_the_create_spelling_and_names_the_earlier_one(capsys):
    code, out, _ = run_plan(["--help"], capsys)
    assert code == 0
    words = set(out.split())
    assert {"--checkpoint-save-time", "--slice-replacement-time"} <= words
    assert not {"--checkpoint-save", "--replacement"} & words  # accepted, not listed as options of their own
    text = " ".join(out.split())
    assert "Also --checkpoint-save, its earlier spelling." in text and "Also --replacement, its earlier spelling." in text


@pytest.mark.parametrize("row", timing_flags.FLAGS, ids=[r.name for r in timing_flags.FLAGS])
def test_a_time_both_commands_take_is_one_row_with_one_help(row):
    mine, theirs = create_table.BY_NAME[row.name], plan_table.BY_NAME[row.name]
    assert "plan" in row.commands and "create" in row.commands
    assert mine is row  # create lists the row itself
    assert (theirs.name, theirs.kind, theirs.help, theirs.flag) == (row.name, row.kind, row.help, row.flag)
    assert theirs.full_help("plan").startswith(row.help)


def test_no_quantity_has_two_names_across_create_and_plan():
    """A plan row whose name create also has is the shared row (no second declaration, no second help)."""
    both = set(create_table.BY_NAME) & set(plan_table.BY_NAME)
    shared = {r.name for r in timing_flags.FLAGS} | {"accelerator", "chip_hour_price"}
    assert both <= shared, both - shared


def test_a_real_plan_process_refuses_both_spellings(tmp_path):
    exe = shutil.which("elxpk", path=str(Path(sys.executable).parent))
    assert exe is not None
    done = subprocess.run([exe, "plan", *EXAMPLE, "--checkpoint-save", "20s"], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == ("error: --checkpoint-save and --checkpoint-save-time: two spellings of one quantity; "
                           "give --checkpoint-save-time only\n")
