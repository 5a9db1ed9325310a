"""TrainerConfig: flags over ELXPK_* env vars over defaults; every bad value reported at once."""

from __future__ import annotations

import pytest

from elxpk_contract.command_line import config_from_args
from elxpk_contract.errors import UsageError
from elxpk_contract.settings import TrainerConfig


def test_env_vars_of_the_launcher_mapping_are_read():
    env = {
        "ELXPK_CHECKPOINT_DIR": "/ckpt", "ELXPK_CHECKPOINT_PERIOD": "50", "ELXPK_ELASTIC_ENABLED": "true",
        "ELXPK_ELASTIC_MIN_SLICE_COUNT": "1", "ELXPK_ELASTIC_TIMEOUT_SECONDS": "30",
        "ELXPK_ELASTIC_MAX_RETRIES": "4", "ELXPK_NUM_SLICES": "2", "ELXPK_SLICE_BACKEND": "simulated",
    }
    cfg = config_from_args([], env)
    assert (cfg.checkpoint_dir, cfg.checkpoint_period, cfg.elastic_enabled) == ("/ckpt", 50, True)
    assert (cfg.elastic_min_slice_count, cfg.elastic_timeout_seconds, cfg.elastic_max_retries) == (1, 30.0, 4)


def test_flags_override_env_and_checkpoint_dir_defaults_under_run_dir():
    cfg = config_from_args(["--checkpoint-period", "7", "--no-elastic-enabled", "--run-dir", "/r"],
                                  {"ELXPK_CHECKPOINT_PERIOD": "50", "ELXPK_ELASTIC_ENABLED": "true"})
    assert cfg.checkpoint_period == 7 and cfg.elastic_enabled is False
    assert cfg.checkpoint_dir == "/r/checkpoints"


def test_every_error_is_reported_at_once_naming_its_flag():
    with pytest.raises(UsageError) as info:
        config_from_args(["--steps", "0", "--elastic-min-slice-count", "-3", "--max-to-keep", "1",
                                 "--fault", "x@1", "--global-batch", "6"], {})
    text = str(info.value)
    for flag in ("--steps", "--elastic-min-slice-count", "--max-to-keep", "--fault", "--global-batch"):
        assert flag in text
    assert len(info.value.messages) == 5


def test_unparseable_values_name_flag_or_env_var():
    with pytest.raises(UsageError) as info:
        config_from_args(["--steps", "ten"], {"ELXPK_ELASTIC_ENABLED": "maybe"})
    assert "--steps 'ten'" in str(info.value) and "ELXPK_ELASTIC_ENABLED 'maybe'" in str(info.value)


def test_unknown_flag_is_a_usage_error():
    with pytest.raises(UsageError, match="unrecognized arguments"):
        config_from_args(["--stepz", "3"], {})


def test_batch_must_divide_over_every_slice_count_a_resize_can_reach():
    with pytest.raises(UsageError, match="--global-batch 8: .* use a multiple of 12"):
        TrainerConfig(num_slices=4, devices_per_slice=1, global_batch=8, elastic_min_slice_count=3)
    assert TrainerConfig(num_slices=4, devices_per_slice=1, global_batch=8).global_batch == 8


def test_multi_controller_process_layout_comes_with_a_coordinator():
    # Without --coordinator jax detects the processes (TPU cluster); a half-given layout is refused.
    with pytest.raises(UsageError) as info:
        TrainerConfig(slice_backend="multi-controller", num_processes=3)
    assert "--num-processes 3: give it only together with --coordinator" in str(info.value)
    with pytest.raises(UsageError, match="--num-processes 3: must equal --num-slices 2"):
        TrainerConfig(slice_backend="multi-controller", num_processes=3, coordinator="127.0.0.1:8476")


def test_fingerprint_ignores_run_length_and_topology_but_not_the_model():
    base = TrainerConfig()
    assert base.fingerprint() == TrainerConfig(steps=5, num_slices=1, global_batch=16).fingerprint()
    assert base.fingerprint() != TrainerConfig(d_model=128).fingerprint()
