"""`workload create --trainer maxtext`: the trainer settings become MaxText overrides in the rendered
command, MaxText's refusals exit 2 with the other flag errors, and settings no command reads are warned
about (issue 13). Everything goes through the real CLI entry point, `elxpk.cli.main.main`.
"""

from __future__ import annotations

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from elxpk.maxtext.command import find_invocations
from elxpk.maxtext.keys import KEYS, parse_value
from elxpk.maxtext.unread_settings import unread_settings_warnings
from elxpk_contract.settings import LAUNCHER_FLAG, env_name, exposed, flag_name
from tests.launcher.cases import CASES, MAXTEXT_DEMO_COMMAND
from tests.launcher.conftest import GOLDENS

DEMO = "maxtext-qwen3-v5litepod-16x3"
TRAIN = "python3 -m maxtext.trainers.pre_train.train src/maxtext/configs/base.yml"
GRAIN = "dataset_type=grain grain_use_elastic_iterator=true packing=false"
BASE = ["--workload=mt-run", "--tpu-type=v5litepod-16", "--num-slices=3", "--docker-image=gcr.io/p/maxtext:1",
        "--dry-run"]
ELASTIC = [*BASE, "--elastic-slices=1", "--max-slice-restarts=10"]


def user_container(manifest: dict) -> dict:
    jobs = {job["name"]: job for job in manifest["spec"]["replicatedJobs"]}
    pod = jobs["pathways-head" if "pathways-head" in jobs else "slice-job"]["template"]["spec"]["template"]["spec"]
    (box,) = [c for c in pod["containers"] if not c["name"].startswith("pathways-")]
    return box


def rendered_command(text: str) -> str:
    """The user command the container runs: the last argument of the wrapper (elxpk/create/render.py)."""
    return user_container(yaml.safe_load(text))["command"][-1]


def added_overrides(rendered: str, typed: str) -> dict[str, str]:
    """key -> value of every `key=value` word elxpk added to the MaxText run in `typed`."""
    (mine,) = find_invocations(rendered)
    (theirs,) = find_invocations(typed)
    added = {k: w for k, w in mine.overrides.items() if k not in theirs.overrides}
    # Nothing else changed: the typed command is the rendered one without the added words.
    stripped = rendered
    for word in sorted(added.values(), key=lambda w: w.start, reverse=True):
        stripped = stripped[:word.start - 1] + stripped[word.end:]  # the word and the space before it
    assert stripped == typed
    return {k: w.value.split("=", 1)[1] for k, w in added.items()}


# ---- the demo golden against the vendored MaxText key table ---------------------------------------------

def test_demo_golden_adds_only_maxtext_keys_with_values_maxtext_accepts():
    added = added_overrides(rendered_command((GOLDENS / f"{DEMO}.yaml").read_text(encoding="utf-8")),
                            MAXTEXT_DEMO_COMMAND)
    assert added, "the demo golden adds no override"
    for key, text in added.items():
        assert key in KEYS, f"{key} is not a key of MaxText's base.yml (elxpk/maxtext/keys.py)"
        value = parse_value(key, text)
        assert KEYS[key].problem(value) is None, f"{key}={text}: {KEYS[key].problem(value)}"
    argv = CASES[DEMO]
    flag = {a.split("=", 1)[0]: a.split("=", 1)[1] for a in argv if a.startswith("--") and "=" in a}
    directory = flag["--checkpoint-dir"]
    assert added == {
        "elastic_enabled": "true", "enable_single_controller": "true", "enable_checkpointing": "true",
        "base_output_directory": directory.rsplit("/", 1)[0], "run_name": directory.rsplit("/", 1)[1],
        "checkpoint_period": flag["--checkpoint-period"],
        "elastic_timeout_seconds": flag["--elastic-timeout-seconds"],
        "elastic_max_retries": flag["--elastic-max-retries"],
        "jax_cache_dir": f"{directory}/xla-cache",  # beside MaxText's checkpoints, base/run/checkpoints
    }


def test_demo_golden_keeps_the_elxpk_env_too():
    """The ELXPK_* mapping stays on the container with --trainer maxtext (harmless: MaxText never reads it)."""
    box = user_container(yaml.safe_load((GOLDENS / f"{DEMO}.yaml").read_text(encoding="utf-8")))
    env = {e["name"]: e.get("value") for e in box["env"]}
    assert env[env_name("checkpoint_period")] == "100" and env[env_name("elastic_enabled")] == "true"


def test_every_launcher_setting_reaches_maxtext_under_its_maxtext_name(cli):
    values = {"checkpoint_dir": "gs://bkt/q/run-a", "checkpoint_period": "50", "elastic_min_slice_count": "2",
              "elastic_timeout_seconds": "120", "elastic_max_retries": "10", "steps": "2000",
              "compilation_cache_dir": "gs://bkt/q/cache", "gradient_accumulation_steps": "4"}
    mapped = [f for f in exposed(LAUNCHER_FLAG) if f.maxtext]
    assert set(values) == {f.name for f in mapped}, "a new launcher setting needs a case here"
    flags = [f"{flag_name(name)}={value}" for name, value in values.items()]
    command = f"{TRAIN} {GRAIN}"
    result = cli("workload", "create", *ELASTIC, "--trainer", "maxtext", "--command", command, *flags)
    assert result.code == 0, result.err
    added = added_overrides(rendered_command(result.out), command)
    for f in mapped:
        if f.name == "checkpoint_dir":  # MaxText derives checkpoint_dir from these two
            assert (added["base_output_directory"], added["run_name"]) == ("gs://bkt/q", "run-a")
        else:
            assert added[f.maxtext] == values[f.name]
    assert result.err == ""  # grain with the elastic iterator: no data-order warning


def test_a_launcher_setting_without_a_maxtext_key_is_env_only(cli):
    unmapped = [f.name for f in exposed(LAUNCHER_FLAG) if not f.maxtext]
    assert "stall_timeout_seconds" in unmapped
    command = f"{TRAIN} {GRAIN}"
    result = cli("workload", "create", *ELASTIC, "--trainer", "maxtext", "--command", command,
                 "--stall-timeout-seconds=1800")
    assert result.code == 0, result.err
    assert added_overrides(rendered_command(result.out), command) == added_overrides(
        rendered_command(cli("workload", "create", *ELASTIC, "--trainer", "maxtext", "--command", command).out),
        command)
    assert "--stall-timeout-seconds: elxpk passes it to no MaxText key (give MaxText's own keys in --command)" in result.err
    assert env_name("stall_timeout_seconds") in result.err


def test_spellings_of_trainer(cli):
    command = ["--command", f"{TRAIN} {GRAIN}"]
    spaced = cli("workload", "create", *ELASTIC, "--trainer", "maxtext", *command)
    joined = cli("workload", "create", *ELASTIC, "--trainer=maxtext", *command)
    assert spaced.code == joined.code == 0 and spaced.out == joined.out
    # The bundled trainer's batch divides over 3 x 16 chips (the default 16 is refused: trainer_refusals).
    bare = cli("workload", "create", *BASE, "--global-batch=48", "--trainer")  # bare, and last: the bundled trainer
    named = cli("workload", "create", *BASE, "--global-batch=48", "--trainer", "elxpk")
    assert bare.code == named.code == 0 and bare.out == named.out
    assert rendered_command(bare.out) == "python -m trainer"
    # Bare --trainer before another flag; and a --command whose value reads --trainer stays a command.
    before = cli("workload", "create", "--trainer", "--global-batch=48", *BASE)
    assert before.code == 0 and before.out == bare.out
    literal = cli("workload", "create", *BASE, "--command", "--trainer")
    assert literal.code == 0 and rendered_command(literal.out) == "--trainer"


# ---- refusals: exit 2, every problem at once, nothing written ------------------------------------------

def test_conflicting_override_names_both_and_writes_nothing(cli, tmp_path):
    out_file = tmp_path / "jobset.yaml"
    result = cli("workload", "create", *ELASTIC, "--trainer", "maxtext", "--checkpoint-period=100",
                 "--command", f"{TRAIN} checkpoint_period=500 {GRAIN}", "--priority=urgent",
                 "--output-manifest-file", str(out_file))
    assert result.code == 2 and result.out == "" and not out_file.exists()
    lines = result.error_lines
    conflict = [line for line in lines if "checkpoint_period=500" in line]
    assert len(conflict) == 1 and conflict[0].startswith("error: --checkpoint-period 100:")
    assert "elxpk writes checkpoint_period=100" in conflict[0]
    assert any(line.startswith("error: --priority") for line in lines)  # reported with the other flags
    assert len(lines) == 2


def test_elastic_with_no_pathways_is_refused(cli):
    result = cli("workload", "create", *ELASTIC, "--no-pathways", "--trainer", "maxtext",
                 "--command", f"{TRAIN} {GRAIN}")
    assert result.code == 2 and result.out == ""
    assert [line for line in result.error_lines if "--elastic-slices" in line and "--no-pathways" in line]


def test_maxtext_out_of_range_and_command_values_are_refused(cli):
    result = cli("workload", "create", *ELASTIC, "--trainer", "maxtext", "--elastic-min-slice-count=2",
                 "--command", f"{TRAIN} dataset_type=parquet grain_use_elastic_iterator=true packing=false")
    assert result.code == 2
    assert result.error_lines == ["error: --command dataset_type=parquet: MaxText accepts "
                                  + ", ".join(KEYS["dataset_type"].choices)]


def test_trainer_maxtext_needs_a_maxtext_command(cli):
    missing = cli("workload", "create", *BASE, "--trainer", "maxtext")
    assert missing.code == 2 and missing.error_lines[0].startswith("error: --trainer maxtext: needs --command")
    other = cli("workload", "create", *BASE, "--trainer", "maxtext", "--command", "python3 train.py")
    assert other.code == 2 and "--command runs no MaxText trainer" in other.err
    hidden = cli("workload", "create", *BASE, "--trainer", "maxtext", "--command", f"bash -c '{TRAIN}'")
    assert hidden.code == 2 and "inside a quoted string" in hidden.err
    headless = cli("workload", "create", *BASE, "--trainer", "maxtext", "--headless")
    assert headless.code == 2 and "--trainer maxtext: needs the user container" in headless.err


def test_unknown_trainer_is_refused(cli):
    result = cli("workload", "create", *BASE, "--trainer", "pytorch", "--command", "python3 train.py")
    assert result.code == 2 and result.error_lines == [
        "error: --trainer 'pytorch': use one of elxpk, maxtext; --trainer alone (or --trainer elxpk) for the "
        "bundled trainer, --trainer maxtext for a MaxText --command"]


# ---- no silent drops: warnings on stderr, the manifest still rendered -----------------------------------

def warnings(result) -> list[str]:
    return [line for line in result.err.splitlines() if line.startswith("warning: ")]


def test_settings_with_an_unknown_command_reach_it_only_as_env(cli):
    result = cli("workload", "create", *BASE, "--command", "python3 my_train.py", "--checkpoint-period=100",
                 "--elastic-max-retries=3")
    assert result.code == 0 and result.out
    line, retries = warnings(result)  # retries: not elastic, see tests/launcher/test_budget_checks.py
    assert retries.startswith("warning: --elastic-max-retries 3: the trainer retries in process only with")
    assert line.startswith("warning: --checkpoint-period, --elastic-max-retries: --command is neither")
    assert "ELXPK_CHECKPOINT_PERIOD, ELXPK_ELASTIC_MAX_RETRIES" in line and "must read" in line


def test_maxtext_command_without_trainer_maxtext_suggests_it(cli):
    result = cli("workload", "create", *ELASTIC, "--command", f"{TRAIN} {GRAIN}", "--checkpoint-period=100")
    assert result.code == 0
    (line,) = warnings(result)
    assert line.startswith("warning: --checkpoint-period, --elastic-slices 1: --command runs MaxText")
    assert "add --trainer maxtext" in line
    # Elasticity alone is dropped too: MaxText keeps elastic_enabled=false without the override.
    alone = cli("workload", "create", *ELASTIC, "--command", f"{TRAIN} {GRAIN}")
    assert [w for w in warnings(alone) if "add --trainer maxtext" in w]


def test_the_warning_names_the_values_the_command_sets_itself(cli):
    """MaxText's elastic guide writes checkpoint_period=100 and elastic_enabled=true into its command: the
    warning about --checkpoint-period quotes those, not MaxText's defaults, and --elastic-slices, which
    the command's own elastic_enabled=true already matches, is not called dropped."""
    own = f"{TRAIN} {GRAIN} checkpoint_period=100 elastic_enabled=true"
    result = cli("workload", "create", *ELASTIC, "--command", own, "--checkpoint-period=100")
    (line,) = warnings(result)
    assert line.startswith("warning: --checkpoint-period: --command runs MaxText")
    assert "(checkpoint_period 100 (the command sets it), elastic_enabled true (the command sets it))" in line
    assert warnings(cli("workload", "create", *ELASTIC, "--command", own)) == []
    # elastic_enabled=false in the command: elasticity is still dropped, and said so.
    off = cli("workload", "create", *ELASTIC, "--command", f"{TRAIN} {GRAIN} elastic_enabled=false")
    (line,) = warnings(off)
    assert line.startswith("warning: --elastic-slices 1: --command runs MaxText")
    assert "checkpoint_period 10000, elastic_enabled false (the command sets it)" in line


@settings(max_examples=60, deadline=None)
@given(period=st.one_of(st.none(), st.integers(1, 10**6)), elastic=st.one_of(st.none(), st.booleans()),
       slices=st.integers(0, 3), flag=st.booleans())
def test_the_warning_reads_whatever_the_command_sets(period, elastic, slices, flag):
    """Every combination of what the command writes and what the flags ask: the warning quotes the command's
    own values where it writes them, MaxText's defaults elsewhere, and names --elastic-slices exactly when
    the command leaves MaxText's elasticity off."""
    written = [*([f"checkpoint_period={period}"] if period is not None else []),
               *([f"elastic_enabled={str(elastic).lower()}"] if elastic is not None else [])]
    lines = unread_settings_warnings(" ".join([TRAIN, *written]), [("checkpoint_period", 5)] if flag else [], slices)
    dropped = bool(slices) and elastic is not True
    if not flag and not dropped:
        assert lines == []
        return
    (line,) = lines
    assert (f"--elastic-slices {slices}" in line) == dropped
    assert (f"checkpoint_period {period} (the command sets it)" if period is not None
            else "checkpoint_period 10000,") in line
    assert (f"elastic_enabled {str(elastic).lower()} (the command sets it)" if elastic is not None
            else "elastic_enabled false)") in line


def test_a_value_the_shell_decides_is_named_as_such():
    (line,) = unread_settings_warnings(f"{TRAIN} checkpoint_period=$PERIOD", [("checkpoint_period", 5)], 0)
    assert "checkpoint_period as the command's shell sets it" in line


def test_no_warning_when_nothing_is_dropped(cli):
    plain = cli("workload", "create", *BASE, "--command", "python3 my_train.py")
    bundled = cli("workload", "create", *BASE, "--trainer", "--checkpoint-period=100")
    maxtext = cli("workload", "create", *BASE, "--command", TRAIN)  # no settings, no elasticity
    assert [warnings(r) for r in (plain, bundled, maxtext)] == [[], [], []]


def test_data_order_warning_goes_to_stderr(cli):
    result = cli("workload", "create", *ELASTIC, "--trainer", "maxtext", "--command", f"{TRAIN} dataset_type=hf")
    assert result.code == 0 and result.out
    (line,) = warnings(result)
    assert "dataset_type=hf with elastic training on" in line
    assert "dataset_type=grain grain_use_elastic_iterator=true" in line


def test_an_m_env_var_of_a_key_elxpk_writes_is_refused(cli):
    """Issue 21: MaxText refuses a key set both as M_<KEY> and on its command line."""
    result = cli("workload", "create", *ELASTIC, "--trainer", "maxtext", "--command", f"{TRAIN} {GRAIN}",
                 "--env", "M_CHECKPOINT_PERIOD=5", "--checkpoint-period", "100")  # ELASTIC has --dry-run
    assert result.code == 2 and result.out == ""
    assert result.error_lines == [
        "error: --checkpoint-period 100: --env M_CHECKPOINT_PERIOD=5 sets checkpoint_period for MaxText, which "
        "refuses a key set both as M_CHECKPOINT_PERIOD and on its command line, where elxpk writes "
        "checkpoint_period=100; drop --env M_CHECKPOINT_PERIOD"]


def test_a_min_slice_count_below_what_pathways_keeps_is_rendered_with_a_warning(cli):
    result = cli("workload", "create", *ELASTIC, "--trainer", "maxtext", "--command", f"{TRAIN} {GRAIN}",
                 "--elastic-min-slice-count", "1")  # ELASTIC has --dry-run: a flag given twice is refused
    assert result.code == 0, result.err
    assert "elastic_min_slice_count=1" in rendered_command(result.out)
    assert "warning: --elastic-min-slice-count 1: below num_slices - elastic_slices = 2, so it never takes effect" \
        in result.err
