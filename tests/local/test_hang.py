"""`elxpk local run --kill-slice K@hang:STEP` (issue 15): the hang flows through the contract's fault
grammar, the local run's stall timeout is a few seconds, and the hung run recovers bit for bit."""

from __future__ import annotations

import pytest

from elxpk.errors import UsageError
from elxpk.local.options import STALL_TIMEOUT_SECONDS, LocalRunOptions
from tests.local.test_local_run import TINY_FLAGS, run_cli

STEPS, PERIOD, HANG = 12, 4, 6


def _options(**over):
    base = dict(run_dir="r", steps=STEPS, num_slices=2, checkpoint_period=PERIOD, kill_slice=[f"1@hang:{HANG}"],
                no_faults=False, revive_after="0.2", mode="pause-resume", seed=0)
    return LocalRunOptions.from_flags(**{**base, **over})


def test_hang_spec_is_accepted_in_process_with_a_short_stall_timeout():
    opts = _options()
    cfg = opts.trainer_config(opts.faults_for(fresh=True))
    assert cfg.fault == (f"1@hang:{HANG}",) and cfg.stall_timeout_seconds == STALL_TIMEOUT_SECONDS <= 10
    over = _options(trainer_args=("--stall-timeout-seconds=30",)).trainer_config()
    assert over.stall_timeout_seconds == 30.0


@pytest.mark.parametrize(("spec", "says"), [
    ("1@hang", "--kill-slice '1@hang': hang needs a step, e.g. 1@hang:100"),
    ("3@hang:5", "--kill-slice '3@hang:5': slice 3 does not exist (slices are 0..1)"),
])
def test_bad_hang_specs_are_refused_by_the_contract_grammar(spec, says):
    with pytest.raises(UsageError) as info:
        _options(kill_slice=[spec])
    assert info.value.messages == [says]


def test_hang_in_a_local_run_is_detected_recovered_and_bitwise_equal(tmp_path):
    common = ("--steps", STEPS, "--checkpoint-period", PERIOD, "--plain", *TINY_FLAGS)
    code, _, err = run_cli("local", "run", "--run-dir", tmp_path / "ref", "--no-faults", *common)
    assert code == 0, err
    code, out, err = run_cli("local", "run", "--run-dir", tmp_path / "hang", "--kill-slice", f"1@hang:{HANG}",
                             "--revive-after", "0.2", *common)
    assert code == 0, err
    assert f"slice 1 lost at step {HANG}" in out and "Traceback" not in out + err
    assert list((tmp_path / "hang" / "stalls").glob(f"*-step{HANG}-p0.txt"))
    code, out, err = run_cli("compare", tmp_path / "ref", tmp_path / "hang")
    assert code == 0, out + err
