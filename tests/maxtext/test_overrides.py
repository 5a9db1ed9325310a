"""The launcher's trainer settings as MaxText overrides: mapping, conflicts, refusals, warnings."""

from __future__ import annotations

import shlex

import pytest
import yaml
from hypothesis import example, given
from hypothesis import strategies as st

from elxpk.maxtext.command import find_invocations
from elxpk.maxtext.keys import KEYS, read_text, yaml_text
from elxpk.maxtext.overrides import checkpoint_location, maxtext_overrides

MODULE = "maxtext.trainers.pre_train.train"
CFG = "src/maxtext/configs/base.yml"
RUN = f"python3 -m {MODULE} {CFG}"
GRAIN = "dataset_type=grain grain_use_elastic_iterator=true packing=false"


def make(settings=None, *, pathways=True, elastic=True, command=f"{RUN} {GRAIN}", container_env=None):
    return maxtext_overrides(settings or {}, pathways=pathways, elastic=elastic, user_command=command,
                             container_env=container_env)


def words_after_config(command: str) -> list[str]:
    words = shlex.split(command)
    return words[words.index(CFG) + 1:]


# ---- mapping: every setting ----------------------------------------------------------------------------

@pytest.mark.parametrize(("settings", "expected"), [
    ({"checkpoint_period": 100}, ["enable_checkpointing=true", "checkpoint_period=100"]),
    ({"checkpoint_period": "250"}, ["enable_checkpointing=true", "checkpoint_period=250"]),
    ({"elastic_timeout_seconds": 600}, ["elastic_timeout_seconds=600"]),
    ({"elastic_max_retries": "3"}, ["elastic_max_retries=3"]),
    ({"elastic_min_slice_count": 2}, ["elastic_min_slice_count=2"]),
    ({"elastic_min_slice_count": -1}, ["elastic_min_slice_count=-1"]),
    ({"checkpoint_dir": "gs://bucket/qwen/ckpt"},
     ["enable_checkpointing=true", "base_output_directory=gs://bucket/qwen", "run_name=ckpt",
      "jax_cache_dir=gs://bucket/qwen/ckpt/xla-cache"]),
    ({"checkpoint_dir": "/mnt/runs/r1/"}, ["enable_checkpointing=true", "base_output_directory=/mnt/runs", "run_name=r1",
                                           "jax_cache_dir=/mnt/runs/r1/xla-cache"]),
    ({"compilation_cache_dir": "gs://bkt/cache"}, ["jax_cache_dir=gs://bkt/cache"]),
    ({"compilation_cache_dir": "off", "checkpoint_dir": "gs://bkt/q/r"},
     ["enable_checkpointing=true", "base_output_directory=gs://bkt/q", "run_name=r", "jax_cache_dir=''"]),
])
def test_each_setting_maps_to_its_maxtext_key(settings, expected):
    o = make(settings)
    assert o.errors == () and o.warnings == ()
    assert list(o.tokens) == ["elastic_enabled=true", "enable_single_controller=true", *expected]
    assert words_after_config(o.command) == [*o.tokens, *GRAIN.split()]


def test_every_setting_at_once_in_a_fixed_order():
    o = make({"checkpoint_dir": "gs://bkt/q/ckpt", "checkpoint_period": 100, "elastic_timeout_seconds": 300,
              "elastic_max_retries": 10, "elastic_min_slice_count": 2, "num_slices": 3, "slice_backend": "pathways",
              "elastic_enabled": True})
    assert o.errors == ()
    assert o.tokens == ("elastic_enabled=true", "enable_single_controller=true", "enable_checkpointing=true",
                        "base_output_directory=gs://bkt/q", "run_name=ckpt", "checkpoint_period=100",
                        "elastic_timeout_seconds=300", "elastic_max_retries=10", "elastic_min_slice_count=2",
                        "jax_cache_dir=gs://bkt/q/ckpt/xla-cache")
    assert set(o.keys) <= set(KEYS)
    assert o.checkpoints == "gs://bkt/q/ckpt/checkpoints/"


def test_elasticity_and_pathways_are_always_written_and_nothing_else_when_no_setting_is_given():
    assert make().tokens == ("elastic_enabled=true", "enable_single_controller=true")
    assert make(elastic=False).tokens == ("elastic_enabled=false", "enable_single_controller=true")
    assert make(pathways=False, elastic=False).tokens == ("elastic_enabled=false", "enable_single_controller=false")
    assert make({"checkpoint_dir": None, "checkpoint_period": None}).tokens == make().tokens


def test_the_derived_cache_yields_to_the_commands_own_and_a_given_one_does_not():
    """jax_cache_dir beside the checkpoints is a default: a --command or M_ env value of MaxText's own wins
    without a word; --compilation-cache-dir against another value in --command is refused, as every flag."""
    theirs = f"{RUN} {GRAIN} jax_cache_dir=/tmp/mine"
    o = make({"checkpoint_dir": "gs://bkt/q/ckpt"}, command=theirs)
    assert o.errors == () and "jax_cache_dir" not in o.keys
    o = make({"checkpoint_dir": "gs://bkt/q/ckpt"}, container_env={"M_JAX_CACHE_DIR": "/tmp/mine"})
    assert o.errors == () and "jax_cache_dir" not in o.keys
    o = make({"compilation_cache_dir": "gs://bkt/c"}, command=theirs)
    assert len(o.errors) == 1 and "--compilation-cache-dir gs://bkt/c" in o.errors[0]
    assert "jax_cache_dir=/tmp/mine" in o.errors[0]


def test_the_command_is_edited_only_after_the_config_file_of_the_maxtext_run():
    command = f"cd /app && JAX_X=1 {RUN} {GRAIN} 2>&1 | tee /tmp/log && echo done"
    o = make({"checkpoint_period": 100}, command=command)
    assert o.errors == ()
    assert o.command == (f"cd /app && JAX_X=1 {RUN} elastic_enabled=true enable_single_controller=true "
                         f"enable_checkpointing=true checkpoint_period=100 {GRAIN} 2>&1 | tee /tmp/log && echo done")
    (inv,) = find_invocations(o.command)
    assert inv.value("checkpoint_period") == "100" and inv.value("dataset_type") == "grain"


def test_checkpoint_dir_with_spaces_stays_one_word_each():
    o = make({"checkpoint_dir": "gs://bkt/my dir/run 1"})
    assert o.errors == ()
    assert "base_output_directory='gs://bkt/my dir'" in shlex.split(o.command)  # YAML-quoted, then one shell word
    assert "run_name='run 1'" in shlex.split(o.command)
    assert o.checkpoints == "gs://bkt/my dir/run 1/checkpoints/"


@pytest.mark.parametrize(("d", "base", "run"), [
    ("gs://bkt/ckpt", "gs://bkt", "ckpt"), ("gs://bkt/a/b/c/", "gs://bkt/a/b", "c"), ("/abs/x", "/abs", "x"),
    ("rel/x", "rel", "x"), ("gs://bkt/run-123", "gs://bkt", "run-123"),
])
def test_checkpoint_location(d, base, run):
    assert checkpoint_location(d) == (base, run)


# ---- conflicts with --command --------------------------------------------------------------------------

def test_a_different_value_in_the_command_is_refused_naming_both():
    o = make({"checkpoint_period": 100}, command=f"{RUN} {GRAIN} checkpoint_period=500")
    assert o.errors == ("--checkpoint-period 100: --command already sets checkpoint_period=500, but elxpk writes "
                        "checkpoint_period=100; drop checkpoint_period from --command, or drop --checkpoint-period",)
    assert o.command == f"{RUN} {GRAIN} checkpoint_period=500"  # nothing written on error


@pytest.mark.parametrize("theirs", ["checkpoint_period=100", "checkpoint_period=1_00", "checkpoint_period=100.0"])
def test_the_same_value_in_the_command_is_kept_and_not_repeated(theirs):
    o = make({"checkpoint_period": 100}, command=f"{RUN} {GRAIN} {theirs}")
    assert o.errors == ()
    assert "checkpoint_period" not in o.keys
    assert sum(w.startswith("checkpoint_period=") for w in shlex.split(o.command)) == 1


def test_same_bool_spelled_differently_is_the_same():
    o = make(command=f"{RUN} {GRAIN} elastic_enabled=True enable_single_controller=1")
    assert o.errors == () and o.keys == ()


def test_run_name_conflict_suggests_the_checkpoint_dir_that_agrees():
    o = make({"checkpoint_dir": "gs://bkt/q/ckpt"}, command=f"{RUN} {GRAIN} run_name=qwen-1")
    assert o.errors == ("--checkpoint-dir gs://bkt/q/ckpt: --command already sets run_name=qwen-1, but elxpk writes "
                        "run_name=ckpt (MaxText writes checkpoints to base_output_directory/run_name/checkpoints); "
                        "drop run_name from --command, or use --checkpoint-dir gs://bkt/q/qwen-1",)


def test_base_output_directory_conflict_suggests_the_checkpoint_dir_that_agrees():
    o = make({"checkpoint_dir": "gs://bkt/q/ckpt"}, command=f"{RUN} {GRAIN} base_output_directory=gs://other/")
    assert len(o.errors) == 1
    assert o.errors[0].endswith("or use --checkpoint-dir gs://other/ckpt")
    assert "base_output_directory=gs://other/" in o.errors[0]


def test_base_output_directory_with_trailing_slash_agrees():
    o = make({"checkpoint_dir": "gs://bkt/q/ckpt"}, command=f"{RUN} {GRAIN} base_output_directory=gs://bkt/q/ run_name=ckpt")
    assert o.errors == ()
    assert "base_output_directory" not in o.keys and "run_name" not in o.keys


def test_a_value_the_shell_decides_cannot_be_checked():
    o = make({"checkpoint_dir": "gs://bkt/q/ckpt"}, command=f"{RUN} {GRAIN} run_name=$RUN_NAME")
    assert o.errors == ("--checkpoint-dir gs://bkt/q/ckpt: --command sets run_name=$RUN_NAME, which the shell "
                        "expands, so elxpk cannot check it against run_name=ckpt (MaxText writes checkpoints to "
                        "base_output_directory/run_name/checkpoints); drop run_name from --command",)


def test_an_m_env_var_for_a_written_key_is_refused():
    o = make({"checkpoint_period": 100}, command=f"M_CHECKPOINT_PERIOD=100 {RUN} {GRAIN}")
    assert len(o.errors) == 1
    assert o.errors[0].startswith("--checkpoint-period 100: --command sets M_CHECKPOINT_PERIOD=100")
    assert o.errors[0].endswith("drop M_CHECKPOINT_PERIOD")


def test_elastic_enabled_in_the_command_against_the_launcher():
    o = make(elastic=False, command=f"{RUN} {GRAIN} elastic_enabled=true")
    assert o.errors == ("elastic training off (--elastic-slices 0): --command already sets elastic_enabled=true, "
                        "but elxpk writes elastic_enabled=false; set elasticity with --elastic-slices, not in --command",)


def test_single_controller_off_in_the_command_on_pathways():
    o = make(command=f"{RUN} {GRAIN} enable_single_controller=false")
    assert o.errors == ("Pathways: --command already sets enable_single_controller=false, but elxpk writes "
                        "enable_single_controller=true; drop it from --command (or use --no-pathways)",)


def test_single_controller_on_in_the_command_without_pathways():
    o = make(pathways=False, elastic=False, command=f"{RUN} {GRAIN} enable_single_controller=true")
    assert o.errors == ("--no-pathways: --command already sets enable_single_controller=true, but elxpk writes "
                        "enable_single_controller=false; drop it from --command (or drop --no-pathways)",)


def test_checkpointing_off_in_the_command_with_checkpoint_flags():
    o = make({"checkpoint_period": 50}, command=f"{RUN} {GRAIN} enable_checkpointing=false")
    assert o.errors == ("--checkpoint-period 50: --command already sets enable_checkpointing=false, but elxpk writes "
                        "enable_checkpointing=true; drop enable_checkpointing from --command, or drop the checkpoint "
                        "flags",)


def test_model_config_that_sets_a_written_key():
    command = f"{RUN} {GRAIN} model_name=gpt3-175b"
    o = make({"checkpoint_period": 100}, command=command)
    assert o.errors == ("--checkpoint-period 100: model_name=gpt3-175b sets checkpoint_period=10000 in its model "
                        "config, and MaxText refuses checkpoint_period=100 on top of it; add override_model_config=true "
                        "to --command",)
    assert make({"checkpoint_period": 100}, command=command + " override_model_config=true").errors == ()
    assert make({"checkpoint_period": 10_000}, command=command).errors == ()
    assert make({"checkpoint_period": 100}, command=f"{RUN} {GRAIN} model_name=qwen3-0.6b").errors == ()


# ---- refusals ------------------------------------------------------------------------------------------

def test_elasticity_without_pathways_is_refused():
    o = make(pathways=False, elastic=True)
    assert o.errors == ("--no-pathways with --elastic-slices: MaxText trains elastically only on Pathways (types.py: "
                        "elastic training requires enable_single_controller=true); drop --no-pathways or use "
                        "--elastic-slices 0",)
    assert o.command == f"{RUN} {GRAIN}"


@pytest.mark.parametrize(("settings", "message"), [
    ({"checkpoint_period": 0}, "--checkpoint-period 0: must be at least 1"),
    ({"checkpoint_period": "abc"}, "--checkpoint-period 'abc': not a whole number; give a whole number, at least 1"),
    ({"elastic_timeout_seconds": 0}, "--elastic-timeout-seconds 0: must be at least 1"),
    ({"elastic_max_retries": 0}, "--elastic-max-retries 0: must be at least 1"),
    ({"elastic_min_slice_count": 0}, "--elastic-min-slice-count 0: MaxText needs at least 1 or -1 (elastic_utils"),
    ({"elastic_min_slice_count": -2}, "--elastic-min-slice-count -2: MaxText needs at least 1 or -1"),
])
def test_values_outside_maxtexts_ranges_are_refused(settings, message):
    o = make(settings)
    assert len(o.errors) == 1 and o.errors[0].startswith(message), o.errors
    assert o.command == f"{RUN} {GRAIN}"


@pytest.mark.parametrize(("d", "message"), [
    ("gs://bucket", "--checkpoint-dir gs://bucket: give a directory inside the bucket, e.g. gs://bucket/my-run"),
    ("gs://bucket/", "--checkpoint-dir gs://bucket/: give a directory inside the bucket"),
    ("ckpt", "--checkpoint-dir ckpt: give a parent directory too"),
    ("gs://bkt/r\nx", "--checkpoint-dir gs://bkt/r\nx: it holds a line break or non-printing character"),
    ("gs://bkt/${x}/r", "--checkpoint-dir gs://bkt/${x}/r: MaxText (OmegaConf) reads ${...} as an interpolation"),
])
def test_checkpoint_dirs_that_cannot_become_base_and_run_name(d, message):
    o = make({"checkpoint_dir": d})
    assert len(o.errors) == 1 and o.errors[0].startswith(message), o.errors


@pytest.mark.parametrize(("extra", "message"), [
    ("checkpoint_period=0", "--command checkpoint_period=0: MaxText needs at least 1 (common/checkpointing.py"),
    ("dataset_type=csv", "--command dataset_type=csv: MaxText accepts synthetic, hf, grain, tfds, c4_mlperf, olmo_grain"),
    ("elastic_backup_kind=disk", "--command elastic_backup_kind=disk: MaxText accepts snapshot, checkpoint"),
    ("elastic_max_retries=x", "--command elastic_max_retries=x: must be a whole number"),
    ("packing=maybe", "--command packing=maybe: use true or false"),
])
def test_values_the_command_gives_are_checked_too(extra, message):
    o = make(command=f"{RUN} {GRAIN.replace('packing=false', '')} {extra}")
    assert any(e.startswith(message) for e in o.errors), o.errors


def test_command_that_does_not_run_maxtext_directly():
    assert make(command="python -m trainer --steps 5").errors[0].startswith("--command runs no MaxText trainer; run it "
                                                                             "directly: python3 -m maxtext")
    hidden = make(command=f"bash -c '{RUN}'").errors
    assert hidden[0].startswith("--command runs inside a quoted string (e.g. bash -c '...'), where elxpk cannot add")
    twice = make(command=f"{RUN} {GRAIN} && {RUN} {GRAIN}").errors
    assert twice == ("--command runs MaxText 2 times; elxpk adds its overrides to one run only, so run one MaxText "
                     "trainer per workload",)
    assert make(command=f"{RUN} run_name='x").errors == ("--command has an unclosed single quote; fix the quoting",)


def test_all_problems_are_reported_together():
    o = make({"checkpoint_period": 0, "elastic_min_slice_count": 0, "checkpoint_dir": "gs://bkt"}, pathways=False,
             command=f"{RUN} {GRAIN} dataset_type=csv")
    assert len(o.errors) == 5, o.errors
    assert all("\n" not in e for e in o.errors)


def test_unknown_setting_is_a_programming_error():
    with pytest.raises(ValueError, match="no MaxText mapping for setting"):
        make({"seed": 5})


# ---- the data-order warning (the Olmo lesson) ----------------------------------------------------------

@pytest.mark.parametrize(("extra", "what"), [
    ("", "dataset_type=synthetic"),
    ("dataset_type=hf", "dataset_type=hf"),
    ("dataset_type=tfds grain_use_elastic_iterator=true packing=false", "dataset_type=tfds"),
    ("dataset_type=grain", "grain without grain_use_elastic_iterator=true"),
    ("dataset_type=grain grain_use_elastic_iterator=false", "grain without grain_use_elastic_iterator=true"),
    ("dataset_type=$DS grain_use_elastic_iterator=true packing=false", "a dataset_type the shell decides"),
])
def test_elastic_without_grain_elastic_iterator_warns_and_shows_the_fix(extra, what):
    o = make({"checkpoint_period": 100}, command=f"{RUN} {extra}")
    assert o.errors == ()
    data = [w for w in o.warnings if "repeat or skip" in w]
    assert len(data) == 1, o.warnings
    assert data[0].startswith(f"--command reads {what} with elastic training on; ")
    assert data[0].endswith("Add dataset_type=grain grain_use_elastic_iterator=true to --command (the elastic "
                            "iterator also needs packing=false)")
    fixed = make({"checkpoint_period": 100}, command=f"{RUN} {GRAIN}")
    assert fixed.warnings == ()


def test_no_data_order_warning_without_elasticity():
    assert make(elastic=False, command=RUN).warnings == ()


@pytest.mark.parametrize("elastic", [True, False])
@pytest.mark.parametrize(("extra", "message"), [
    ("", "--command sets grain_use_elastic_iterator=true and keeps packing=True (base.yml); MaxText refuses that at "
         "start-up (`grain_use_elastic_iterator=True` requires `packing=False`.); add packing=false"),
    ("packing=false grain_file_type=parquet", "--command sets grain_use_elastic_iterator=true and sets "
     "grain_file_type=parquet; MaxText refuses that at start-up (`grain_use_elastic_iterator=True` only supports "
     "`grain_file_type=arrayrecord`.)"),
    ("packing=false use_truncation=false", "--command sets grain_use_elastic_iterator=true and sets "
     "use_truncation=false; MaxText refuses that"),
    ("packing=false grain_train_files='gs://bkt/a*;gs://bkt/c*'", "--command sets grain_use_elastic_iterator=true with a "
     "data mixture (';' in grain_train_files); MaxText refuses that"),
    ("packing=false grain_train_mixture_config_path=gs://bkt/mix.json", "--command sets grain_use_elastic_iterator=true "
     "with grain_train_mixture_config_path; MaxText refuses that"),
])
def test_elastic_iterator_rules_are_refusals_whatever_elasticity(extra, message, elastic):
    o = make(command=f"{RUN} dataset_type=grain grain_use_elastic_iterator=true {extra}", elastic=elastic)
    assert len(o.errors) == 1 and o.errors[0].startswith(message), o.errors


def test_elastic_iterator_keys_left_to_a_custom_config_are_not_judged():
    o = make(command=f"python3 -m {MODULE} /app/qwen.yml dataset_type=grain grain_use_elastic_iterator=true")
    assert o.errors == ()


def test_a_custom_config_file_may_set_the_data_keys_and_the_warning_says_so():
    o = make(command=f"python3 -m {MODULE} /app/qwen.yml")
    assert len(o.warnings) == 1
    assert o.warnings[0].startswith("--command reads dataset_type=synthetic (elxpk cannot see inside /app/qwen.yml) ")


# ---- --steps, M_ env vars of --env, and text values YAML would not read back (issue 19) ---------------

def test_steps_maps_to_maxtext_steps():
    assert words_after_config(make({"steps": "2000"}).command)[:3] == [
        "elastic_enabled=true", "enable_single_controller=true", "steps=2000"]


def test_steps_conflicting_with_the_command_is_refused():
    o = make({"steps": 100}, command=f"{RUN} {GRAIN} steps=2000")
    assert o.errors == ("--steps 100: --command already sets steps=2000, but elxpk writes steps=100; drop steps from "
                        "--command, or drop --steps",)
    assert make({"steps": 2000}, command=f"{RUN} {GRAIN} steps=2000").errors == ()


def test_an_m_env_var_of_a_key_elxpk_writes_is_refused():
    o = maxtext_overrides({"checkpoint_period": 100}, pathways=True, elastic=True, user_command=f"{RUN} {GRAIN}",
                          container_env={"M_CHECKPOINT_PERIOD": "5", "M_OTHER": "1"})
    assert o.errors == ("--checkpoint-period 100: --env M_CHECKPOINT_PERIOD=5 sets checkpoint_period for MaxText, "
                        "which refuses a key set both as M_CHECKPOINT_PERIOD and on its command line, where elxpk "
                        "writes checkpoint_period=100; drop --env M_CHECKPOINT_PERIOD",)


def test_an_m_env_var_of_a_key_the_command_sets_is_refused():
    o = maxtext_overrides({}, pathways=True, elastic=True, user_command=f"{RUN} {GRAIN} steps=10",
                          container_env={"M_STEPS": "5"})
    assert len(o.errors) == 1 and o.errors[0].startswith("--env M_STEPS=5: --command also sets steps=10")


@pytest.mark.parametrize("last", [".5", "0x1f", "12:30", "-", "[x]", "@r", "'r'", "123", "true", "null", "a #b",
                                  "x: y", "~", "{a}", "*x", "&x", "!x", "%x", "|", ">", "r'q", 'r"q', "a:"])
def test_checkpoint_dir_parts_reach_maxtext_as_the_same_text(last):
    o = make({"checkpoint_dir": f"gs://bkt/q/{last}"})
    assert o.errors == ()
    values = dict(w.split("=", 1) for w in words_after_config(o.command) if "=" in w)
    assert yaml.safe_load(values["run_name"]) == last
    assert o.checkpoints == f"gs://bkt/q/{last}/checkpoints/"
    base = make({"checkpoint_dir": f"{last}/run"})
    assert base.errors == () and yaml.safe_load(dict(
        w.split("=", 1) for w in words_after_config(base.command) if "=" in w)["base_output_directory"]) == last


@given(st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=30))
@example("gs://bkt/x:")
@example("a: b")
def test_yaml_text_reads_back_as_the_same_string_or_is_refused(value):
    try:
        written = yaml_text(value)
    except ValueError:
        assert "${" in value or not value.replace(" ", "").isprintable()
        return
    assert yaml.safe_load(written) == value
    assert read_text(written) == value
