"""The rendered JobSet's shape, flag by flag (the issue's checklist), on parsed objects."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from elxpk.create import template_build
from elxpk.create.checks import spec_from_flags
from elxpk.create.render import command_argv, render
from elxpk.create.template_build import TEMPLATES, environment, generate, module_name
from elxpk_contract.command_line import config_from_args
from elxpk_contract.settings import LAUNCHER_DERIVED, env_name, exposed


def jobset(**flags) -> dict:
    base = dict(workload="run-1", tpu_type="v5litepod-16", command="python3 train.py")
    (obj,) = render(spec_from_flags(**{**base, **flags})).objects
    return obj


def jobs(obj: dict) -> dict[str, dict]:
    return {job["name"]: job for job in obj["spec"]["replicatedJobs"]}


def pod(job: dict) -> dict:
    return job["template"]["spec"]["template"]["spec"]


def env_of(container: dict) -> dict[str, str]:
    return {e["name"]: e.get("value") for e in container.get("env", [])}


def test_pathways_head():
    obj = jobset(num_slices="3", elastic_slices="1")
    head = jobs(obj)["pathways-head"]
    assert head["replicas"] == 1
    spec = pod(head)
    assert spec["nodeSelector"] == {"cloud.google.com/gke-nodepool": "cpu-np"}
    proxy, rm = spec["initContainers"]
    assert (proxy["name"], proxy["restartPolicy"], proxy["ports"][0]["containerPort"]) == ("pathways-proxy", "Always", 29000)
    assert (rm["name"], rm["restartPolicy"], rm["ports"][0]["containerPort"]) == ("pathways-rm", "Always", 29001)
    assert "--instance_count=3" in rm["args"] and "--instance_type=tpuv5e:4x4" in rm["args"]
    assert "--num_elastic_slices=1" in proxy["args"]
    (user,) = spec["containers"]
    env = env_of(user)
    assert env["JAX_PLATFORMS"] == "proxy"
    assert env["JAX_BACKEND_TARGET"] == "grpc://$(PATHWAYS_HEAD):29000"
    assert user["command"][-1] == "python3 train.py"


def test_pathways_workers():
    obj = jobset(num_slices="3", tpu_type="v5p-16")
    worker = jobs(obj)["worker"]
    assert worker["replicas"] == 3
    job = worker["template"]["spec"]
    assert (job["completionMode"], job["completions"], job["parallelism"]) == ("Indexed", 2, 2)
    spec = pod(worker)
    assert spec["restartPolicy"] == "OnFailure"
    assert spec["nodeSelector"] == {"cloud.google.com/gke-tpu-accelerator": "tpu-v5p-slice",
                                    "cloud.google.com/gke-tpu-topology": "2x2x2"}
    assert {"operator": "Exists", "key": "google.com/tpu"} in spec["tolerations"]
    (container,) = spec["containers"]
    assert container["resources"]["limits"]["google.com/tpu"] == "4"
    assert {"MEGASCALE_NUM_SLICES", "MEGASCALE_SLICE_ID", "MEGASCALE_COORDINATOR_ADDRESS"} <= set(env_of(container))
    assert spec["priorityClassName"] == "medium"


def test_jobset_level():
    obj = jobset(queue="team-q", priority="very-high", max_restarts="7", ttl_seconds_after_finished="60")
    assert obj["apiVersion"] == "jobset.x-k8s.io/v1alpha2"
    assert obj["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": "team-q", "xpk.google.com/workload": "run-1"}
    spec = obj["spec"]
    assert spec["coordinator"] == {"replicatedJob": "pathways-head"}
    assert spec["startupPolicy"] == {"startupPolicyOrder": "InOrder"}
    assert spec["successPolicy"] == {"operator": "All", "targetReplicatedJobs": ["pathways-head"]}
    policy = {k: v for k, v in spec["failurePolicy"].items() if k != "rules"}  # rules: test_failure_policy.py
    assert policy == {"restartStrategy": "Recreate", "maxRestarts": 7}  # xpk drops it
    assert spec["ttlSecondsAfterFinished"] == 60
    assert pod(jobs(obj)["worker"])["priorityClassName"] == "very-high"


@pytest.mark.parametrize(("flags", "backoff"), [
    (dict(num_slices="3", elastic_slices="1", max_slice_restarts="10"), 40),
    (dict(num_slices="3", max_slice_restarts="10"), 16),
])
def test_worker_backoff(flags, backoff):
    assert jobs(jobset(**flags))["worker"]["template"]["spec"]["backoffLimit"] == backoff


def test_not_elastic_has_no_elastic_proxy_arg():
    proxy = pod(jobs(jobset(num_slices="3"))["pathways-head"])["initContainers"][0]
    assert not [a for a in proxy["args"] if a.startswith("--num_elastic_slices")]


def test_headless():
    obj = jobset(command=None, headless=True, num_slices="2")
    spec = pod(jobs(obj)["pathways-head"])
    assert "initContainers" not in spec
    assert [c["name"] for c in spec["containers"]] == ["pathways-proxy", "pathways-rm"]
    assert all("restartPolicy" not in c for c in spec["containers"])
    assert "successPolicy" not in obj["spec"]


def test_multi_controller():
    obj = jobset(no_pathways=True, num_slices="2", max_restarts="4", tpu_type="v5p-16")
    assert list(jobs(obj)) == ["slice-job"]
    job = jobs(obj)["slice-job"]
    assert job["replicas"] == 2
    assert (job["template"]["spec"]["completions"], job["template"]["spec"]["parallelism"]) == (2, 2)
    (container,) = pod(job)["containers"]
    assert container["command"][-1] == "python3 train.py"
    assert env_of(container)["ELXPK_SLICE_BACKEND"] == "multi-controller"
    assert obj["spec"]["failurePolicy"]["maxRestarts"] == 4
    assert "coordinator" not in obj["spec"]


def test_trainer_settings_mapping():
    """docs/interfaces.md: ELXPK_* env on the container that runs the user command."""
    obj = jobset(num_slices="3", elastic_slices="1", max_slice_restarts="10", trainer=True, command=None,
                 docker_image="gcr.io/p/trainer:1", checkpoint_dir="gs://bkt/ckpt", checkpoint_period="100",
                 elastic_min_slice_count="2", elastic_timeout_seconds="300", elastic_max_retries="10")
    head = pod(jobs(obj)["pathways-head"])
    (user,) = head["containers"]
    assert user["command"][-1] == "python -m trainer"
    env = env_of(user)
    assert {k: v for k, v in env.items() if k.startswith("ELXPK_")} == {
        "ELXPK_CHECKPOINT_DIR": "gs://bkt/ckpt",
        "ELXPK_CHECKPOINT_PERIOD": "100",
        "ELXPK_ELASTIC_ENABLED": "true",
        "ELXPK_ELASTIC_MIN_SLICE_COUNT": "2",
        "ELXPK_ELASTIC_TIMEOUT_SECONDS": "300",
        "ELXPK_ELASTIC_MAX_RETRIES": "10",
        "ELXPK_NUM_SLICES": "3",
        "ELXPK_SLICE_BACKEND": "pathways",
        "ELXPK_TERMINATION_GRACE_SECONDS": "30",  # --termination-grace-period-seconds: the drain's budget
        "ELXPK_RUN_DIR": "gs://bkt/ckpt/elxpk-run",  # the records beside the checkpoints: they outlive the pods
    }
    # Single controller: the workers run Pathways servers, not the trainer.
    worker = pod(jobs(obj)["worker"])["containers"][0]
    assert not [k for k in env_of(worker) if k.startswith("ELXPK_")]


def test_unset_trainer_settings_are_left_to_trainer_defaults():
    env = env_of(pod(jobs(jobset())["pathways-head"])["containers"][0])
    # Only what the launcher derives from its own flags; every "launcher" setting not given is left out.
    assert {k for k in env if k.startswith("ELXPK_")} == {env_name(f.name) for f in exposed(LAUNCHER_DERIVED)} == {
        "ELXPK_SLICE_BACKEND", "ELXPK_NUM_SLICES", "ELXPK_ELASTIC_ENABLED", "ELXPK_TERMINATION_GRACE_SECONDS"}
    assert env["ELXPK_ELASTIC_ENABLED"] == "false"


@pytest.mark.parametrize("flags", [
    dict(),
    dict(num_slices="3", elastic_slices="1", checkpoint_dir="gs://bkt/c", checkpoint_period="7",
         elastic_min_slice_count="2", elastic_timeout_seconds="60", elastic_max_retries="4"),
    dict(no_pathways=True, num_slices="2", checkpoint_period="50"),
])
def test_the_trainer_reads_back_what_the_launcher_rendered(flags):
    spec = spec_from_flags(workload="run-1", tpu_type="v5litepod-16", command="python3 train.py", **flags)
    (obj,) = render(spec).objects
    job = "slice-job" if flags.get("no_pathways") else "pathways-head"
    env = {k: v for k, v in env_of(pod(jobs(obj)[job])["containers"][0]).items() if k.startswith("ELXPK_")}
    config = config_from_args([], environ={**env, "ELXPK_GLOBAL_BATCH": "96"})
    for name, value in spec.settings:
        assert getattr(config, name) == value
    assert (config.num_slices, config.slice_backend, config.elastic_enabled) == (
        spec.num_slices, spec.slice_backend, spec.elastic)


def test_render_writes_nothing(tmp_path):
    """render() is pure: a fresh process with an empty HOME (and no XDG cache dir) leaves it empty."""
    home = tmp_path / "home"
    home.mkdir()
    code = ("from elxpk.create.render import render; from elxpk.create.checks import spec_from_flags; "
            "render(spec_from_flags(workload='w', tpu_type='v5p-8', command='x')); "
            "render(spec_from_flags(workload='w', tpu_type='v5p-8', command='x', no_pathways=True))")
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert list(home.rglob("*")) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home"]


def test_user_env_follows_trainer_env():
    user = pod(jobs(jobset(env=["A=1", "B=two words"]))["pathways-head"])["containers"][0]
    assert user["env"][-2:] == [{"name": "A", "value": "1"}, {"name": "B", "value": "two words"}]


def test_images_and_custom_args():
    obj = jobset(proxy_server_image="p:1", server_image="s:1", custom_worker_args="--x=1 --y",
                 custom_server_args="--rm", custom_proxy_server_args="--px")
    head = pod(jobs(obj)["pathways-head"])
    proxy, rm = head["initContainers"]
    worker = pod(jobs(obj)["worker"])["containers"][0]
    assert (proxy["image"], rm["image"], worker["image"]) == ("p:1", "s:1", "s:1")
    assert (proxy["args"][-1], rm["args"][-1], worker["args"][-2:]) == ("--px", "--rm", ["--x=1", "--y"])
    assert pod(jobs(jobset(worker_image="w:2"))["worker"])["containers"][0]["image"] == "w:2"


def test_render_is_pure_and_deterministic():
    spec = spec_from_flags(workload="run-1", tpu_type="v5p-8", command="x")
    first, second = render(spec), render(spec)
    assert first.text == second.text and first.objects == second.objects


def test_the_user_command_is_an_argument_not_part_of_the_script():
    spec = spec_from_flags(workload="run-1", tpu_type="v5p-8", command='echo "$0"; exit 3')
    argv = command_argv(spec)
    assert argv[:2] == ("bash", "-c") and argv[-1] == 'echo "$0"; exit 3'
    assert 'bash -c "$1"' in argv[2]


def test_the_wrapper_forwards_the_exit_code():
    spec = spec_from_flags(workload="run-1", tpu_type="v5p-8", command="echo hi; exit 3")
    done = subprocess.run(list(command_argv(spec)), capture_output=True, text=True, timeout=30)
    assert done.returncode == 3
    assert "hi" in done.stdout and "EXIT_CODE=3" in done.stdout


def test_templates_refuse_unquoted_values():
    env = environment()
    with pytest.raises(TypeError, match="without [|]q or [|]num"):
        env.from_string("name: {{ value }}").render(value="x\ny: 1")
    with pytest.raises(TypeError):
        env.from_string("n: {{ value|num }}").render(value="3")
    assert env.from_string("n: {{ value|num }} s: {{ value|string|q }}").render(value=3) == 'n: 3 s: "3"'


def test_rendering_imports_no_cluster_or_jax_code():
    code = (
        "import sys\n"
        "from elxpk.cli.main import main\n"
        "rc = main(['workload', 'create', '--workload', 'w', '--tpu-type', 'v5p-8', '--command', 'x', '--dry-run'])\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('jax', 'jaxlib', 'kubernetes', 'google', 'orbax'))\n"
        # Start-up budget: `elxpk workload ...` builds only the workload group, not every other command.
        "bad += sorted(m for m in ('elxpk.cli.local', 'elxpk.cli.plan', 'elxpk.cli.report') if m in sys.modules)\n"
        # ... and a TPU workload's render neither the GPU catalog nor the trainer's fault parser (lazy imports),
        # nor the TrainerConfig dataclass: the settings table's rows come from elxpk_contract.setting_rules.
        "bad += sorted(m for m in ('elxpk.create.gpu', 'elxpk_contract.faults', 'elxpk_contract.settings')\n"
        "              if m in sys.modules)\n"
        # ... nor Jinja (the precompiled templates run on elxpk/create/template_runtime.py) nor hashlib (its
        # OpenSSL load; only a long workload name's subdomain hashes), ~a fifth of the command's start-up.
        "bad += sorted(m for m in ('jinja2', 'markupsafe', 'hashlib') if m in sys.modules)\n"
        "print(rc, bad, file=sys.stderr)\n"
        "sys.exit(rc or len(bad))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().endswith("0 []")


# What a render that needs no MaxText loads of elxpk/maxtext/ (issue 53: the launcher module, with MaxText's
# overrides, key table and the contract's TrainerConfig, came with every create given settings or elastic
# slices): a `--command` given settings reads only the command parser; the bundled trainer, nothing of it.
_MAXTEXT_ONLY = ("elxpk.maxtext.launcher", "elxpk.maxtext.overrides", "elxpk.maxtext.keys", "elxpk.maxtext.data_rules",
                 "elxpk_contract.settings", "elxpk_storage.run_records")


@pytest.mark.parametrize(("flags", "unwanted"), [
    (["--command", "x", "--num-slices", "2", "--elastic-slices", "1"], _MAXTEXT_ONLY),
    (["--trainer", "elxpk", "--docker-image", "img", "--checkpoint-dir", "gs://my-bucket/run", "--command", "--steps=5"],
     ("elxpk.maxtext",)),
], ids=["elastic-command", "bundled-trainer"])
def test_a_render_without_maxtext_imports_none_of_it(flags, unwanted):
    code = (
        "import sys\n"
        "from elxpk.cli.main import main\n"
        "rc = main(['workload', 'create', '--workload', 'w', '--tpu-type', 'v5p-8', '--dry-run', *sys.argv[2:]])\n"
        "print(rc, sorted(m for m in sys.argv[1].split(',') if m in sys.modules), file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code, ",".join(unwanted), *flags], capture_output=True, text=True,
                          timeout=60)
    assert done.stderr.strip().endswith("0 []"), done.stderr


def test_start_up_is_not_spent_in_the_cyclic_collector():
    """elxpk/cli/main.py raises the collector's first threshold for start-up: a dry-run's ~35,000 long-lived
    objects are walked a few times at most (the default walks them ~50 times), and an in-process caller
    gets the default back."""
    code = (
        "import gc, io, sys\n"
        "default = gc.get_threshold()\n"
        "before = gc.get_stats()[0]['collections']\n"
        "from elxpk.cli.main import main\n"
        "sys.stdout = io.StringIO()\n"
        "rc = main(['workload', 'create', '--workload', 'w', '--tpu-type', 'v5p-8', '--command', 'x', '--dry-run'])\n"
        "print(rc, gc.get_stats()[0]['collections'] - before, gc.get_threshold() == default, file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    rc, collections, restored = done.stderr.split()
    assert (rc, restored) == ("0", "True"), done.stderr
    assert int(collections) <= 5


@pytest.mark.parametrize("template", TEMPLATES)
def test_compiled_templates_are_fresh(template):
    """elxpk/create/compiled_templates holds Jinja's compiled form of elxpk/create/templates/ (a stale one is
    only slower). After editing a template: .venv/bin/python -m elxpk.create.template_build

    Only the template's source decides freshness: the compiled code runs on elxpk/create/template_runtime.py,
    not on the installed Jinja, so a new Jinja on a clean clone must not fail this test (the code is
    compared only when this Jinja is the one that generated it)."""
    import importlib

    import jinja2

    committed = importlib.import_module(f"{template_build.PACKAGE}.{module_name(template)}")
    assert committed.SOURCE == template_build.source(template), \
        "stale: run .venv/bin/python -m elxpk.create.template_build"
    assert template_build.fresh(template) is committed
    if committed.JINJA_VERSION == jinja2.__version__:
        generated = Path(committed.__file__).read_text(encoding="utf-8")
        assert generated == generate(environment(), template)


def test_a_stale_compiled_template_is_not_used(tmp_path):
    """One module that no longer holds its template's source: none is used (an include runs in its parent's
    runtime), and render() compiles every template with Jinja instead (same text: test_template_runtime.py)."""
    import shutil

    shutil.copytree(template_build.templates_dir(), tmp_path, dirs_exist_ok=True)
    assert template_build.precompiled(tmp_path) is not None
    (tmp_path / "_pod_failure_rules.yaml.j2").write_text("edited {{ 1|num }}\n", encoding="utf-8")
    assert template_build.fresh("_pod_failure_rules.yaml.j2", tmp_path) is None
    assert template_build.fresh("pathways.yaml.j2", tmp_path) is not None
    assert template_build.precompiled(tmp_path) is None
