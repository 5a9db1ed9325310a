"""spec_from_flags / parse_create: every error at once, one line each, naming the flag and the fix."""

from __future__ import annotations

import pytest

from elxpk.create.checks import parse_create, spec_from_flags
from elxpk.create.spec import CreateOptions
from elxpk.errors import UsageError
from elxpk_contract.command_line import config_from_args
from elxpk_contract.settings import default

BASE = dict(workload="run-1", tpu_type="v5litepod-16", command="python3 train.py")


def build(**flags):
    return parse_create(**{**BASE, **flags})[0]


def warnings(**flags) -> tuple[str, ...]:
    """The warnings, which parse_create returns beside the spec (not in it)."""
    return parse_create(**{**BASE, **flags}).warnings


def invocation(**flags) -> CreateOptions:
    return parse_create(**{**BASE, **flags})[1]


def errors(**flags) -> list[str]:
    with pytest.raises(UsageError) as info:
        build(**flags)
    return info.value.messages


def test_defaults_follow_xpk():
    spec = build()
    assert (spec.num_slices, spec.elastic_slices, spec.max_slice_restarts, spec.max_restarts) == (1, 0, 1, 0)
    assert (spec.priority, spec.queue, spec.termination_grace_period_seconds) == ("medium", "multislice-queue", 30)
    assert spec.ttl_seconds_after_finished == 43200 and spec.pathways and spec.settings == ()
    assert spec.setting("elastic_min_slice_count") == default("elastic_min_slice_count") == -1
    assert spec.worker_image == spec.server_image
    with pytest.raises(AttributeError):  # immutable (a NamedTuple; FrozenInstanceError is one too)
        spec.num_slices = 2  # type: ignore[misc]


def test_xpk_accepted_inputs_are_rejected_all_at_once():
    # Each of these renders silently in xpk, whose `workload create` checks none of them.
    found = errors(num_slices="2", elastic_slices="5", max_restarts="abc", termination_grace_period_seconds="abc")
    assert len(found) == 3  # each value alone first (the rows' reader, in the table's order), then the rules
    assert found[0].startswith("--max-restarts 'abc': not a whole number")
    assert found[1].startswith("--termination-grace-period-seconds 'abc': not a whole number")
    assert found[2].startswith("--elastic-slices 5: must be below --num-slices (2)")
    assert errors(num_slices="0")[0].startswith("--num-slices 0: must be at least 1")
    assert errors(elastic_slices="-1", num_slices="3")[0].startswith("--elastic-slices -1: must be 0 or more")


@pytest.mark.parametrize(
    ("flags", "flag"),
    [
        (dict(workload="Bad_Name"), "--workload"),
        (dict(workload="a" * 41), "--workload"),
        (dict(workload="1run"), "--workload"),
        (dict(workload="run-"), "--workload"),
        (dict(workload=None), "--workload"),
        (dict(tpu_type="v5p-9"), "--tpu-type"),
        (dict(tpu_type=None), "--tpu-type"),
        (dict(num_slices="1.5"), "--num-slices"),
        (dict(num_slices="3", elastic_slices="1", max_slice_restarts="0"), "--max-slice-restarts"),
        (dict(checkpoint_period="0"), "--checkpoint-period"),
        (dict(checkpoint_period="ten"), "--checkpoint-period"),
        (dict(elastic_timeout_seconds="0"), "--elastic-timeout-seconds"),
        (dict(elastic_max_retries="x"), "--elastic-max-retries"),
        (dict(priority="urgent"), "--priority"),
        (dict(queue="bad queue"), "--queue"),
        (dict(namespace="Team_A"), "--namespace"),
        (dict(command=None), "--command"),
        (dict(command="   "), "--command"),
        (dict(env=["1ABC=x"]), "--env"),
        (dict(env=["NOEQUALS"]), "--env"),
        (dict(env=["JAX_PLATFORMS=cpu"]), "--env"),
        (dict(env=["ELXPK_CHECKPOINT_PERIOD=5"]), "--env"),
        (dict(env=["A-B=1"]), "--env"),
        (dict(docker_image="has space:1"), "--docker-image"),
        (dict(docker_name="Jax_TPU"), "--docker-name"),
        (dict(pathways_gcs_location="/tmp/scratch"), "--pathways-gcs-location"),
        (dict(custom_proxy_server_args="--a='unbalanced"), "--custom-pathways-proxy-server-args"),
        (dict(output_format="xml"), "-o/--output"),
        (dict(dry_run=True, dry_run_server=True), "--dry-run"),
        (dict(output_manifest_file="/no/such/dir/m.yaml"), "--output-manifest-file"),
        (dict(slice_mtbf="3 fortnights"), "--slice-mtbf"),
        (dict(step_time="0s"), "--step-time"),
        (dict(env_file="/no/such/file.env"), "--env-file"),
        (dict(command="x\udcff"), "--command"),
    ],
)
def test_each_error_is_one_line_naming_its_flag(flags, flag):
    found = errors(**flags)
    assert len(found) == 1, found
    assert found[0].startswith(flag), found
    assert "\n" not in found[0]


@pytest.mark.parametrize("key", ["server_image", "proxy_server_image", "worker_image", "pathways_gcs_location",
                                 "custom_proxy_server_args", "custom_server_args", "custom_worker_args"])
def test_pathways_flags_are_refused_for_multi_controller(key):
    (line,) = errors(no_pathways=True, **{key: "gs://x" if key == "pathways_gcs_location" else "img:1"})
    assert line.endswith("only for Pathways workloads; drop it or drop --no-pathways")


@pytest.mark.parametrize("key", ["checkpoint_dir", "checkpoint_period", "elastic_max_retries"])
def test_trainer_settings_are_refused_when_headless(key):
    (line,) = errors(command=None, headless=True, **{key: "5"})
    assert line.endswith("a --headless workload has no user container to pass it to; drop it")


@pytest.mark.parametrize(("key", "flag"), [("env", "--env"), ("docker_image", "--docker-image"),
                                           ("docker_name", "--docker-name"), ("command", "--command")])
def test_flags_xpk_ignores_when_headless_are_a_warning(key, flag):
    # xpk's create-pathways --headless renders no user container and ignores these: a script must still run.
    given = {"headless": True, "command": None, key: ["A=1"] if key == "env" else "jax-x"}
    spec = build(**given)
    assert spec.headless and spec.command is None and spec.env == ()
    (warning,) = warnings(**given)
    assert warning.startswith(f"{flag}: ignored, a --headless workload has no user container")


def test_slice_restarts_without_elasticity_warn():
    (warning,) = warnings(max_slice_restarts="5")
    assert warning.startswith("--max-slice-restarts only counts with --elastic-slices > 0")


def test_elastic_slices_need_pathways():
    assert errors(num_slices="3", elastic_slices="1", no_pathways=True)[0].startswith("--elastic-slices 1: needs Pathways")


def test_headless_rules():
    assert build(command=None, headless=True).command is None
    assert errors(command=None, headless=True, no_pathways=True)[0].startswith("--headless: only with Pathways")
    assert errors(command=None, headless=True, trainer=True, docker_image="img:1")[0].startswith("--trainer")


def test_trainer_fills_the_command_and_needs_an_image():
    spec = build(command=None, trainer=True, docker_image="gcr.io/p/trainer:1")
    assert spec.command == "python -m trainer"
    assert build(command="--steps 10", trainer=True, docker_image="i:1").command == "python -m trainer --steps 10"
    assert errors(command=None, trainer=True)[0].startswith("--trainer: needs --docker-image")


class TestElasticMinSliceCount:
    """-1 or 1..num_slices - 1; below num_slices - elastic_slices it is redundant (a warning, MaxText accepts it):
    Pathways fails the program before fewer than N - E slices remain, so no attempt finds fewer."""

    def test_accepted(self):
        for n, e, k in (("4", "2", 2), ("4", "2", 3), ("4", "0", -1)):
            spec = build(num_slices=n, elastic_slices=e, elastic_min_slice_count=str(k))
            assert spec.setting("elastic_min_slice_count") == k

    def test_out_of_range(self):
        for value in ("0", "4", "-2"):
            found = errors(num_slices="4", elastic_slices="1", elastic_min_slice_count=value)
            assert found[0].startswith(f"--elastic-min-slice-count {value}: use -1 (wait for all 4 slices) or 1..3")

    def test_below_what_pathways_keeps_is_a_redundancy_warning(self):
        spec = build(num_slices="4", elastic_slices="1", elastic_min_slice_count="2")
        assert spec.setting("elastic_min_slice_count") == 2  # rendered as asked
        given = warnings(num_slices="4", elastic_slices="1", elastic_min_slice_count="2")
        (line,) = [w for w in given if w.startswith("--elastic-min-slice-count 2")]
        assert line == ("--elastic-min-slice-count 2: below num_slices - elastic_slices = 3, so it never takes effect: "
                        "Pathways fails the program before fewer than 3 slices remain (it tolerates losing 1), so "
                        "every attempt finds at least 3; it is redundant, use 3..3 or -1 to say what happens")

    def test_not_elastic_is_redundant_too(self):
        (line,) = [w for w in warnings(num_slices="4", elastic_min_slice_count="2")
                   if w.startswith("--elastic-min-slice-count 2")]
        assert line.endswith("(it tolerates losing 0), so every attempt finds at least 4; it is redundant, use -1 "
                             "to say what happens")


def test_retries_beyond_the_slice_restarts_is_a_warning():
    found = warnings(num_slices="3", elastic_slices="1", max_slice_restarts="2", elastic_max_retries="10")
    # The second warning: python3 train.py is not known to read ELXPK_ELASTIC_MAX_RETRIES (issue 13).
    assert len(found) == 2 and found[1].startswith("--elastic-max-retries 10 allows 9")
    enough = warnings(num_slices="3", elastic_slices="1", max_slice_restarts="9", elastic_max_retries="10")
    assert [w for w in enough if "in-process recoveries" in w] == [] and len(enough) == 1


@pytest.mark.parametrize(("elastic", "restarts", "want"), [("1", "10", 40), ("1", "1", 4), ("0", "10", 16)])
def test_worker_backoff_is_xpks_formula(elastic, restarts, want):
    # v5litepod-16: 4 VMs per slice. Elastic: restarts x VMs; otherwise 4 x VMs.
    spec = build(num_slices="3", elastic_slices=elastic, max_slice_restarts=restarts)
    assert spec.worker_backoff_limit == want


def test_env_file_then_env_later_wins(tmp_path):
    env_file = tmp_path / "run.env"
    env_file.write_text("# comment\n\nA=1\nB=from file\n", encoding="utf-8")
    spec = build(env_file=str(env_file), env=["B=from flag", "C=x=y"])
    assert spec.env == (("A", "1"), ("B", "from flag"), ("C", "x=y"))


def test_durations_land_in_seconds():
    run = invocation(slice_mtbf="3d", step_time="1.5s")
    assert (run.slice_mtbf_seconds, run.step_time_seconds) == (3 * 86400, 1.5)


def test_invocation_options_are_not_part_of_the_spec():
    spec, run, _ = parse_create(**BASE, dry_run=True, replace=True, output_format="JSON",
                                output_manifest_file="m.yaml")
    assert (run.dry_run, run.replace, run.output_format, run.output_manifest_file) == ("client", True, "json",
                                                                                     "m.yaml")
    assert spec == parse_create(**BASE)[0]
    with pytest.raises(TypeError):
        spec_from_flags(**BASE, dry_run=True)


@pytest.mark.parametrize(("key", "flag"), [("workload", "--workload"), ("namespace", "--namespace"),
                                           ("queue", "--queue"), ("docker_name", "--docker-name")])
def test_a_trailing_newline_is_not_part_of_a_valid_name(key, flag):
    (line,) = errors(**{key: "run-1\n"})
    assert line.startswith(flag)


@pytest.mark.parametrize(("flags", "raw"), [
    (dict(elastic_timeout_seconds="1.5"), ["--elastic-timeout-seconds", "1.5"]),
    (dict(checkpoint_period="0"), ["--checkpoint-period", "0"]),
    (dict(elastic_max_retries="ten"), ["--elastic-max-retries", "ten"]),
    (dict(num_slices="3", elastic_slices="2", elastic_min_slice_count="3"),
     ["--num-slices", "3", "--elastic-min-slice-count", "3"]),
])
def test_launcher_and_trainer_refuse_the_same_values_with_the_same_message(flags, raw):
    (line,) = errors(**flags)
    with pytest.raises(UsageError) as trainer:
        config_from_args(raw)
    assert line in trainer.value.messages


def test_settings_keep_the_values_the_trainer_parses():
    spec = build(num_slices="3", elastic_slices="1", checkpoint_dir="gs://bkt/c", checkpoint_period="100",
                 elastic_min_slice_count="2", elastic_timeout_seconds="300", elastic_max_retries="1")
    assert spec.settings == (("checkpoint_dir", "gs://bkt/c"), ("checkpoint_period", 100),
                             ("elastic_min_slice_count", 2), ("elastic_timeout_seconds", 300),
                             ("elastic_max_retries", 1))


def test_a_kubernetes_reference_to_no_env_var_warns():
    # Kubernetes expands $(NAME) when NAME is an env var of the container and leaves it as is otherwise.
    found = warnings(command="echo $(HOSTNAME) $(MY_VAR) $$(ESCAPED) $(ELXPK_NUM_SLICES)", env=["MY_VAR=1",
                                                                                          "B=$(NOPE)"])
    assert [w.split(":")[0] for w in found] == ["--command", "--env B"]
    assert "$(HOSTNAME) names no env var of the container" in found[0]
    assert "$(NOPE)" in found[1]
    assert warnings(command="echo $(MY_VAR)", env=["MY_VAR=1"]) == ()


def test_custom_args_split_like_a_shell():
    spec = build(custom_worker_args="--a=1  --b='x y' \"--c\"")
    assert spec.custom_worker_args == ("--a=1", "--b=x y", "--c")


def test_unknown_keys_are_a_programming_error():
    with pytest.raises(TypeError):
        build(num_slice="2")
