"""Hostile inputs for MaxText's own start-up, both directions (issue 19).

RENDERED: `workload create --trainer maxtext` flags elxpk must render, and MaxText must then accept with the
values elxpk promised (docs/maxtext.md, "The mapping"), computed here from the flags alone.

REFUSED: flags elxpk refuses (exit 2), each with the MaxText words a naive mapping would have added and
MaxText's own verdict on them: `("refuses", part of its message)`, or `("accepts", why elxpk is stricter)`.
The test asserts elxpk's refusal and MaxText's verdict, so a MaxText that changes its mind shows here.
"""

from __future__ import annotations

BASE = ["--workload", "w", "--tpu-type", "v5litepod-16", "--num-slices", "3", "--trainer", "maxtext",
        "--docker-image", "gcr.io/p/maxtext:0.2.5"]
ELASTIC = [*BASE, "--elastic-slices", "1", "--max-slice-restarts", "10"]
CONFIG = "src/maxtext/configs/base.yml"
RUN = f"python3 -m maxtext.trainers.pre_train.train {CONFIG}"
GRAIN = "dataset_type=grain grain_train_files=/data/train.array_record grain_use_elastic_iterator=true packing=false"
COMMAND = f"{RUN} model_name=qwen3-0.6b per_device_batch_size=1 {GRAIN}"

# Last parts of --checkpoint-dir that YAML reads as something other than the same text unless quoted.
HOSTILE_NAMES = (".5", "0x1f", "12:30", "-", "[x]", "@r", "'r'", "123", "true", "null", "~", "{a}", "a b", "r#1",
                 "x: y", "*x", "&x", "!x", "%x", "|", ">", 'r"q', "r'q", "1e3", "0o17", "+1", ".inf", "yes", "Off",
                 "2026-12-01", "a,b", "?x", "`x", "a:", "a:b")

RENDERED: dict[str, list[str]] = {
    **{f"checkpoint-dir-name {name!r}": [*ELASTIC, "--command", COMMAND, "--checkpoint-dir", f"gs://bkt/q/{name}"]
       for name in HOSTILE_NAMES},
    **{f"checkpoint-dir-parent {name!r}": [*ELASTIC, "--command", COMMAND, "--checkpoint-dir", f"{name}/run"]
       for name in ("123", "true", ".5", "[x]", "'r'", "a b")},
    "checkpoint-dir local trailing slash": [*ELASTIC, "--command", COMMAND, "--checkpoint-dir", "/mnt/runs/r1/"],
    "checkpoint-dir deep": [*ELASTIC, "--command", COMMAND, "--checkpoint-dir", "gs://bkt/a/b/c/run-7",
                            "--checkpoint-period", "1"],
    "steps": [*ELASTIC, "--command", COMMAND, "--steps", "2000"],
    "steps equal to the command's": [*ELASTIC, "--command", f"{COMMAND} steps=50", "--steps", "50"],
    "elastic values at their lowest": [*ELASTIC, "--command", COMMAND, "--elastic-timeout-seconds", "1",
                                       "--elastic-max-retries", "1", "--elastic-min-slice-count", "2"],
    "min slice count below N - E (redundant: warned)": [*ELASTIC, "--command", COMMAND,
                                                        "--elastic-min-slice-count", "1"],
    "min slice count -1": [*ELASTIC, "--command", COMMAND, "--elastic-min-slice-count", "-1"],
    "not elastic, data without the iterator": [*BASE, "--command", f"{RUN} dataset_type=grain "
                                               "grain_train_files=/data/train.array_record", "--checkpoint-period",
                                               "500"],
    "no pathways": [*BASE, "--no-pathways", "--command", COMMAND, "--checkpoint-dir", "gs://bkt/q/mc"],
    "everything": [*ELASTIC, "--command", f"cd / && JAX_X=1 {COMMAND} 2>&1 | tee /dev/null", "--steps", "10",
                   "--checkpoint-dir", "gs://bkt/q/all", "--checkpoint-period", "5", "--elastic-timeout-seconds",
                   "60", "--elastic-max-retries", "3", "--elastic-min-slice-count", "2"],
    "an M_ env var of a key nobody else sets": [*ELASTIC, "--command", COMMAND, "--env", "M_LOG_PERIOD=7",
                                                "--checkpoint-period", "100"],
}

_ITER = "grain_use_elastic_iterator=true"
REFUSED: dict[str, tuple[list[str], list[str], dict[str, str], tuple[str, str]]] = {
    # name: (elxpk flags, the MaxText words after the config file, M_ env, MaxText's verdict)
    "iterator without packing=false, not elastic": (
        [*BASE, "--command", f"{RUN} dataset_type=grain {_ITER}"],
        ["elastic_enabled=false", "enable_single_controller=true", "dataset_type=grain", _ITER], {},
        ("refuses", "requires `packing=False`")),
    "iterator without packing=false, elastic": (
        [*ELASTIC, "--command", f"{RUN} dataset_type=grain {_ITER}"],
        ["elastic_enabled=true", "enable_single_controller=true", "dataset_type=grain", _ITER], {},
        ("refuses", "requires `packing=False`")),
    "iterator with parquet": (
        [*BASE, "--command", f"{COMMAND} grain_file_type=parquet"],
        ["elastic_enabled=false", "enable_single_controller=true", *GRAIN.split(), "grain_file_type=parquet"], {},
        ("refuses", "only supports `grain_file_type=arrayrecord`")),
    "iterator without truncation": (
        [*BASE, "--command", f"{COMMAND} use_truncation=false"],
        ["elastic_enabled=false", "enable_single_controller=true", *GRAIN.split(), "use_truncation=false"], {},
        ("refuses", "requires `use_truncation=True`")),
    "iterator with a data mixture": (
        [*ELASTIC, "--command", f"{RUN} dataset_type=grain 'grain_train_files=/d/a*,0.5;/d/b*,0.5' {_ITER} "
         "packing=false"],
        ["elastic_enabled=true", "enable_single_controller=true", "dataset_type=grain",
         "grain_train_files=/d/a*,0.5;/d/b*,0.5", _ITER, "packing=false"], {},
        ("refuses", "does not support dataset mixtures")),
    "iterator with a mixture config": (
        [*BASE, "--command", f"{COMMAND} grain_train_mixture_config_path=/d/mix.json"],
        ["elastic_enabled=false", "enable_single_controller=true", *GRAIN.split(),
         "grain_train_mixture_config_path=/d/mix.json"], {},
        ("refuses", "does not support dataset mixtures")),
    "elastic without pathways": (
        [*ELASTIC, "--no-pathways", "--command", COMMAND],
        ["elastic_enabled=true", "enable_single_controller=false", *GRAIN.split()], {},
        ("refuses", "Elastic training is only supported with Pathways")),
    "M_ env var and --checkpoint-period": (
        [*ELASTIC, "--command", COMMAND, "--env", "M_CHECKPOINT_PERIOD=5", "--checkpoint-period", "100"],
        ["elastic_enabled=true", "enable_single_controller=true", "enable_checkpointing=true",
         "checkpoint_period=100", *GRAIN.split()], {"M_CHECKPOINT_PERIOD": "5"},
        ("refuses", "overridden by both CLI/kwargs and environment variable 'M_CHECKPOINT_PERIOD'")),
    "M_ env var and the command's own key": (
        [*ELASTIC, "--command", f"{COMMAND} steps=10", "--env", "M_STEPS=5"],
        ["elastic_enabled=true", "enable_single_controller=true", *GRAIN.split(), "steps=10"], {"M_STEPS": "5"},
        ("refuses", "overridden by both CLI/kwargs and environment variable 'M_STEPS'")),
    "model config presets checkpoint_period": (
        [*ELASTIC, "--command", f"{RUN} model_name=gpt3-175b {GRAIN}", "--checkpoint-period", "100"],
        ["elastic_enabled=true", "enable_single_controller=true", "enable_checkpointing=true",
         "checkpoint_period=100", "model_name=gpt3-175b", *GRAIN.split()], {},
        ("refuses", "overridden by both model config and CLI/kwargs")),
    "interpolation in --checkpoint-dir": (
        [*ELASTIC, "--command", COMMAND, "--checkpoint-dir", "gs://bkt/${x}/r"],
        ["elastic_enabled=true", "enable_single_controller=true", "base_output_directory=gs://bkt/${x}",
         "run_name=r", *GRAIN.split()], {},
        ("refuses", "x")),
    "--checkpoint-period 0": (
        [*ELASTIC, "--command", COMMAND, "--checkpoint-period", "0"],
        ["elastic_enabled=true", "enable_single_controller=true", "enable_checkpointing=true",
         "checkpoint_period=0", *GRAIN.split()], {},
        ("accepts", "the first save computes step % 0 (common/checkpointing.py): ZeroDivisionError at run time")),
    "--elastic-max-retries 0": (
        [*ELASTIC, "--command", COMMAND, "--elastic-max-retries", "0"],
        ["elastic_enabled=true", "enable_single_controller=true", "elastic_max_retries=0", *GRAIN.split()], {},
        ("accepts", "pathwaysutils raises 'max_attempts must be positive' when the retry loop starts")),
    "--elastic-timeout-seconds 0": (
        [*ELASTIC, "--command", COMMAND, "--elastic-timeout-seconds", "0"],
        ["elastic_enabled=true", "enable_single_controller=true", "elastic_timeout_seconds=0", *GRAIN.split()], {},
        ("accepts", "pathwaysutils' wait_for_slices times out after its first probe: no wait at all")),
    "--elastic-min-slice-count 0": (
        [*ELASTIC, "--command", COMMAND, "--elastic-min-slice-count", "0"],
        ["elastic_enabled=true", "enable_single_controller=true", "elastic_min_slice_count=0", *GRAIN.split()],
        {}, ("accepts", "pathwaysutils takes 0 as met by no slice: an attempt would start on none")),
    "--elastic-min-slice-count N": (
        [*ELASTIC, "--command", COMMAND, "--elastic-min-slice-count", "3"],
        ["elastic_enabled=true", "enable_single_controller=true", "elastic_min_slice_count=3", *GRAIN.split()], {},
        ("accepts", "N means all slices, which MaxText spells -1; elxpk asks for one spelling")),
    "--steps against the command's steps": (
        [*ELASTIC, "--command", f"{COMMAND} steps=2000", "--steps", "100"],
        ["elastic_enabled=true", "enable_single_controller=true", "steps=100", *GRAIN.split(), "steps=2000"], {},
        ("accepts", "the last word wins (steps=2000): the order would silently decide, so elxpk refuses")),
    "run_name against --checkpoint-dir": (
        [*ELASTIC, "--command", f"{COMMAND} run_name=qwen-1", "--checkpoint-dir", "gs://bkt/q/ckpt"],
        ["elastic_enabled=true", "enable_single_controller=true", "base_output_directory=gs://bkt/q", "run_name=ckpt",
         *GRAIN.split(), "run_name=qwen-1"], {},
        ("accepts", "run_name=qwen-1 wins: checkpoints would land in gs://bkt/q/qwen-1, not the promised directory")),
    "a bucket without a directory": (
        [*ELASTIC, "--command", COMMAND, "--checkpoint-dir", "gs://bucket"],
        ["elastic_enabled=true", "enable_single_controller=true", "base_output_directory=gs:", "run_name=bucket",
         *GRAIN.split()], {},
        ("refuses", "base_output_directory Input should be a valid string")),  # YAML reads gs: as a mapping
}
