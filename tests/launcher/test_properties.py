"""Property tests: hostile strings round-trip exactly and never change the manifest's structure;
random valid specs render manifests that the JobSet CRD and the core schemas accept."""

from __future__ import annotations

import shlex

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elxpk.catalog import all_names
from elxpk.create.checks import spec_from_flags
from elxpk.create.render import render
from elxpk.create.spec import PRIORITIES
from elxpk.create.yamlquote import quote, written

HOSTILE = [
    "", " ", "\n", "a\nb: c", "key: value", "- item", "{{ spec.workload }}", "{% raw %}", '"', "'", "\\", "#x",
    " # comment", "---", "...", "&a *a", "!!python/object:os.system", "%YAML 1.2", "\t", "trailing ", " leading",
    "\u2028", "\u2029", "\x85", "\ufeff", "\x00", "\x7f", "\x9f", "\r\n", "😀", "中文", "null", "~", "true", "0x1F",
    "1e3", "=", "a" * 20000, "]", "}{", "`$(rm -rf /)`",
]
text = st.one_of(st.sampled_from(HOSTILE),
                 st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=200))
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(text)
def test_quote_round_trips_with_both_loaders(value):
    for loader in (yaml.CSafeLoader, yaml.SafeLoader):
        assert yaml.load(f"k: {quote(value)}\nlist:\n- {quote(value)}\n", Loader=loader) == {
            "k": value, "list": [value]}


@SETTINGS
@given(st.one_of(text, st.from_regex(r"-?[A-Za-z0-9_./-]{1,12}", fullmatch=True)))
def test_written_round_trips_with_both_loaders(value):
    """The GPU network's constants, plain where they can be (elxpk/create/gpu.py): read back as the same text,
    whatever the text, and never plain where a YAML 1.2 reader would take it for a number."""
    for loader in (yaml.CSafeLoader, yaml.SafeLoader):
        assert yaml.load(f"k: {written(value)}\nlist:\n- {written(value)}\n", Loader=loader) == {
            "k": value, "list": [value]}
    assert written("1e3") == '"1e3"' and written("128Gi") == "128Gi" and written('"-v 1 "') == "'\"-v 1 \"'"


def shape(node):
    """The structure with the scalars blanked out: mapping keys, list lengths, nesting."""
    if isinstance(node, dict):
        return {k: shape(v) for k, v in node.items()}
    if isinstance(node, list):
        return [shape(v) for v in node]
    return type(node).__name__


BENIGN = dict(workload="run-1", tpu_type="v5p-16", num_slices="2", command="x", env=["A=a", "B=b"],
              custom_worker_args="--w1 --w2", custom_proxy_server_args="--p", checkpoint_dir="d")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(command=text.filter(lambda s: s.strip()), values=st.lists(text, min_size=2, max_size=2),
       args=st.lists(text, min_size=2, max_size=2), proxy=text,
       ckpt=text.filter(lambda s: s.strip() and "\0" not in s),  # a NUL in a path is refused (test_hostile_*)
       no_pathways=st.booleans())
def test_hostile_values_round_trip_and_keep_the_structure(command, values, args, proxy, ckpt, no_pathways):
    flags = dict(BENIGN, no_pathways=no_pathways)
    hostile_flags = dict(flags, command=command, env=[f"A={values[0]}", f"B={values[1]}"],
                         custom_worker_args=shlex.join(args), custom_proxy_server_args=shlex.join([proxy]),
                         checkpoint_dir=ckpt)
    if no_pathways:  # Pathways-only flags are refused for multi-controller workloads
        for key in ("custom_worker_args", "custom_proxy_server_args"):
            del flags[key], hostile_flags[key]
    benign = render(spec_from_flags(**flags)).objects
    manifest = render(spec_from_flags(**hostile_flags))
    assert shape(manifest.objects) == shape(benign)
    (obj,) = manifest.objects
    assert list(yaml.safe_load_all(manifest.to_yaml())) == [obj]
    jobs = {j["name"]: j["template"]["spec"]["template"]["spec"] for j in obj["spec"]["replicatedJobs"]}
    user = jobs["slice-job" if no_pathways else "pathways-head"]["containers"][0]
    assert user["command"][-1] == command
    env = {e["name"]: e.get("value") for e in user["env"]}
    # A trainer setting is rendered as the trainer parses it (elxpk_contract.settings strips the text).
    assert (env["A"], env["B"], env["ELXPK_CHECKPOINT_DIR"]) == (values[0], values[1], ckpt.strip())
    if not no_pathways:
        assert jobs["worker"]["containers"][0]["args"][-2:] == args
        assert jobs["pathways-head"]["initContainers"][0]["args"][-1] == proxy


@st.composite
def valid_flags(draw):
    n = draw(st.integers(1, 6))
    no_pathways = draw(st.booleans())
    e = 0 if no_pathways else draw(st.integers(0, n - 1))
    headless = not no_pathways and draw(st.booleans())
    trainer = not headless and draw(st.booleans())
    min_count = draw(st.sampled_from([-1, *range(n - e, n)])) if e else -1
    flags = dict(
        workload=draw(st.from_regex(r"\A[a-z]([-a-z0-9]{0,38}[a-z0-9])?\Z")),
        tpu_type=draw(st.sampled_from(all_names())), num_slices=str(n), no_pathways=no_pathways,
        headless=headless, trainer=trainer, elastic_slices=str(e),
        max_slice_restarts=str(draw(st.integers(1, 100))), max_restarts=str(draw(st.integers(0, 50))),
        priority=draw(st.sampled_from(PRIORITIES)), elastic_min_slice_count=str(min_count),
        checkpoint_period=str(draw(st.integers(1, 10**6))),
        termination_grace_period_seconds=str(draw(st.integers(0, 3600))),
        env=[f"{k}={v}" for k, v in draw(st.dictionaries(st.from_regex(r"\A[A-Z_][A-Z0-9_]{0,20}\Z"), text,
                                                          max_size=3)).items()
             if k not in ("JAX_PLATFORMS", "JAX_BACKEND_TARGET", "PATHWAYS_HEAD", "XCLOUD_ENVIRONMENT",
                          "MEGASCALE_NUM_SLICES", "MEGASCALE_SLICE_ID") and not k.startswith("ELXPK_")],
    )
    if headless:  # no user container: the flags that configure it are refused
        for key in ("env", "checkpoint_period", "elastic_min_slice_count"):
            del flags[key]
    elif trainer:  # extra trainer arguments: what the trainer accepts (elxpk/create/trainer_args.py checks them)
        flags["command"] = f"--seed {draw(st.integers(0, 2**31))} --run-dir {draw(st.from_regex(r'[a-z/]{1,20}', fullmatch=True))}"
    else:
        flags["command"] = draw(text.filter(lambda s: s.strip()))
    if trainer:
        flags["docker_image"] = "gcr.io/p/trainer:1"
    return flags


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(valid_flags())
def test_random_valid_specs_render_schema_valid_manifests(jobset_validator, core_validator, flags):
    (obj,) = render(spec_from_flags(**flags)).objects
    assert jobset_validator(obj) == []
    assert core_validator(obj) == []
