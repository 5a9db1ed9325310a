"""LocalRunOptions: every problem at once, and the default kill only on a fresh run."""

from __future__ import annotations

import pytest

from elxpk.errors import UsageError
from elxpk.local.options import (
    DEFAULT_KILL_STEP,
    LOCAL_MODEL,
    STALL_TIMEOUT_SECONDS,
    LocalRunOptions,
    config_flags,
)
from elxpk_contract.command_line import config_from_args
from elxpk_contract.settings import TrainerConfig, check_setting


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


def test_the_resize_demo_s_slice_comes_back_after_the_survivor_trained():
    """Back after --revive-after's default second, the slice returned while the survivor still compiled its
    step, and the resize never trained on it: the default kill brings it back halfway through the rest."""
    opts = LocalRunOptions.from_flags(**flags(mode="resize", revive_after=None))
    revive = DEFAULT_KILL_STEP + (opts.steps - DEFAULT_KILL_STEP) // 2
    assert opts.faults_for(fresh=True) == (f"1@{DEFAULT_KILL_STEP}+{revive}",)
    assert DEFAULT_KILL_STEP < revive < opts.steps
    given = LocalRunOptions.from_flags(**flags(mode="resize", revive_after="3s"))  # given: the seconds decide
    assert given.faults_for(fresh=True) == (f"1@{DEFAULT_KILL_STEP}",)
    assert LocalRunOptions.from_flags(**flags()).faults_for(fresh=True) == (f"1@{DEFAULT_KILL_STEP}",)


def test_trainer_fault_grammar_passes_through_outside_multi_controller():
    opts = LocalRunOptions.from_flags(**flags(kill_slice=["1@save:100", "0@restore"], revive_after="500ms"))
    assert opts.kill_slice == ("1@save:100", "0@restore") and opts.revive_after == 0.5
    assert opts.min_slice_count == -1
    assert LocalRunOptions.from_flags(**flags(mode="resize")).min_slice_count == 1
    with pytest.raises(UsageError, match="--mode resize: needs --num-slices 2"):
        LocalRunOptions.from_flags(**flags(mode="resize", num_slices=1))


@pytest.mark.parametrize(("name", "raw"), [("steps", "abc"), ("steps", "0"), ("seed", "-1"), ("seed", str(2**32)),
                                           ("num_slices", "0"), ("checkpoint_period", "1.5")])
def test_shared_settings_are_refused_with_the_trainers_message(name, raw):
    _, expected = check_setting(name, raw)
    with pytest.raises(UsageError) as local:
        LocalRunOptions.from_flags(**flags(**{name: raw}))
    with pytest.raises(UsageError) as trainer:
        config_from_args(["--" + name.replace("_", "-"), raw])
    assert expected in local.value.messages and expected in trainer.value.messages


def test_trainer_config_is_built_directly_with_the_local_model():
    opts = LocalRunOptions.from_flags(**flags(steps="40", seed="5", mode="resize", checkpoint_period="10",
                                              trainer_args=("--d-model=64", "--global-batch=8")))
    cfg = opts.trainer_config(("1@20",))
    expected = TrainerConfig(run_dir="r", steps=40, seed=5, checkpoint_period=10, num_slices=2, devices_per_slice=2,
                             elastic_enabled=True, elastic_min_slice_count=1, elastic_poll_seconds=0.2,
                             fault=("1@20",), revive_after=1.0, stall_timeout_seconds=STALL_TIMEOUT_SECONDS,
                             **{**LOCAL_MODEL, "d_model": 64, "global_batch": 8})
    assert cfg == expected
    # The multi-controller supervisor's flags reproduce the same config in the child's parser.
    assert config_from_args(config_flags(cfg)) == cfg


@pytest.mark.parametrize(("arg", "says"), [("--d-model=abc", "--trainer-arg=--d-model 'abc': not a whole number; give a whole number, at least 1"),
                                           ("--steps=5", "--trainer-arg '--steps=5': use --NAME=VALUE"),
                                           ("--no-such=1", "--trainer-arg '--no-such=1'")])
def test_trainer_args_are_checked_by_the_table(arg, says):
    with pytest.raises(UsageError) as info:
        LocalRunOptions.from_flags(**flags(trainer_args=(arg,)))
    assert any(m.startswith(says) for m in info.value.messages), info.value.messages


def test_cross_field_problems_are_found_before_any_io():
    # 16 examples do not split over 3 slices x 2 devices: the trainer's own check, at option time.
    with pytest.raises(UsageError, match=r"^--trainer-arg=--global-batch 16: must divide evenly over 3 slice"):
        LocalRunOptions.from_flags(**flags(num_slices="3"))


@pytest.mark.parametrize("run_dir", ["gs://bucket/run", "s3://bucket/run"])
def test_a_run_dir_url_is_refused_by_local_run(run_dir):
    """The trainer takes gs://; the local supervisor tails and appends to the run's files on this disk."""
    with pytest.raises(UsageError) as info:
        LocalRunOptions.from_flags(**flags(run_dir=run_dir))
    (message,) = info.value.messages
    assert message.startswith(f"--run-dir {run_dir}: `elxpk local run` needs a local directory"), message


def test_trainer_messages_are_made_in_local_runs_words_only_within_it():
    """The trainer's checks name each setting as the command that runs them takes it: `local run` sets its
    spelling at its entry (no message is rewritten afterwards); the trainer itself keeps its own."""
    from elxpk.local.options import in_local_words

    bad = dict(run_dir="r", d_model=64, n_heads=3, fault=("9@5",), num_slices=2, steps=10)
    with in_local_words(), pytest.raises(UsageError) as local:
        TrainerConfig(**bad)
    with pytest.raises(UsageError) as trainer:
        TrainerConfig(**bad)
    assert "--trainer-arg=--n-heads 3: must divide --trainer-arg=--d-model 64" in local.value.messages
    assert any(m.startswith("--kill-slice '9@5': slice 9 does not exist") for m in local.value.messages)
    assert "--n-heads 3: must divide --d-model 64" in trainer.value.messages
    assert any(m.startswith("--fault '9@5': slice 9 does not exist") for m in trainer.value.messages)
