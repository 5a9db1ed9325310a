"""LocalRunOptions: every problem at once, and the default kill only on a fresh run."""

from __future__ import annotations

import pytest

from elxpk.errors import UsageError
from elxpk.local.options import DEFAULT_KILL_STEP, LocalRunOptions


def flags(**over):
    base = dict(run_dir="r", steps=300, num_slices=2, checkpoint_period=50, kill_slice=None, no_faults=False,
                revive_after="1", mode="pause-resume", seed=0)
    return {**base, **over}


def test_all_problems_reported_at_once():
    with pytest.raises(UsageError) as info:
        LocalRunOptions.from_flags(**flags(steps=0, num_slices=0, checkpoint_period=0, seed=-1, mode="x",
                                           revive_after="-3s", kill_slice=["a@b"]))
    names = [m.split(" ")[0].rstrip(":") for m in info.value.messages]
    assert names == ["--steps", "--num-slices", "--checkpoint-period", "--seed", "--mode", "--revive-after",
                     "--kill-slice"]


def test_default_kill_only_on_a_fresh_run():
    opts = LocalRunOptions.from_flags(**flags())
    assert opts.faults_for(fresh=True) == (f"1@{DEFAULT_KILL_STEP}",)
    assert opts.faults_for(fresh=False) == ()
    assert LocalRunOptions.from_flags(**flags(no_faults=True)).faults_for(fresh=True) == ()
    assert LocalRunOptions.from_flags(**flags(kill_slice=["0@7"])).faults_for(fresh=False) == ("0@7",)
    assert LocalRunOptions.from_flags(**flags(steps=DEFAULT_KILL_STEP)).faults_for(fresh=True) == ()


def test_trainer_fault_grammar_passes_through_outside_multi_controller():
    opts = LocalRunOptions.from_flags(**flags(kill_slice=["1@save:100", "0@restore"], revive_after="500ms"))
    assert opts.kill_slice == ("1@save:100", "0@restore") and opts.revive_after == 0.5
    assert opts.min_slice_count == -1
    assert LocalRunOptions.from_flags(**flags(mode="resize")).min_slice_count == 1
    with pytest.raises(UsageError, match="--mode resize: needs --num-slices 2"):
        LocalRunOptions.from_flags(**flags(mode="resize", num_slices=1))
