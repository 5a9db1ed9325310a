"""`workload create` and `workload validate` refuse what the bundled trainer would refuse when it starts on its
slices (elxpk/create/trainer_refusals.py): the global batch over every device of every slice count the run
may train on, and the trainer's other checks of its settings; and create refuses a slice count past GKE's
node limit. The oracle of the batch rule is written out here, not read from the contract."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elxpk import catalog
from elxpk.create.cross_rules import GKE_MAX_NODES
from elxpk.create.trainer_refusals import trainer_argv, trainer_problems

ELXPK = str(Path(sys.executable).with_name("elxpk"))
IMAGE = "--docker-image=gcr.io/p/elxpk-trainer:1"


def _create(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([ELXPK, "workload", "create", "--workload", "w", *argv, "--dry-run"], capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)


def _slice_counts(num_slices: int, min_count: int) -> range:
    low = num_slices if min_count == -1 else min_count
    return range(low, num_slices + 1)


def test_the_readme_shape_with_the_default_batch_is_refused_with_the_flag_and_the_fix():
    done = _create("--tpu-type", "v5litepod-16", "--num-slices", "3", "--elastic-slices", "1", "--trainer", IMAGE)
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""  # nothing printed: the manifest is not written
    assert done.stderr.splitlines() == [
        "error: --global-batch 16: must divide evenly over 3 slice(s) x 16 devices (v5litepod-16 has 16 per slice); "
        "use a multiple of 48"]


def test_a_batch_that_divides_renders_with_a_hint_that_the_fit_was_not_checked():
    done = _create("--tpu-type", "v5litepod-16", "--num-slices", "3", "--trainer", IMAGE, "--global-batch", "96")
    assert done.returncode == 0, done.stderr
    assert "kind: JobSet" in done.stdout
    assert "hint: whether the train step fits v5litepod-16's memory was not checked; add --check-fit" in done.stderr


def test_a_user_command_gets_no_fit_hint():
    done = _create("--tpu-type", "v5litepod-16", "--command", "python3 train.py", IMAGE)
    assert done.returncode == 0, done.stderr
    assert "hint:" not in done.stderr


def test_the_trainer_arguments_of_the_command_are_checked_too():
    """gcluster's and xpk's spelling run the trainer through --command: its own --global-batch counts."""
    done = _create("--tpu-type", "v5litepod-16", "--num-slices", "2", IMAGE, "--command",
                   "python3 -m trainer --global-batch 24")
    assert done.returncode == 2
    assert "error: --global-batch 24: must divide evenly over 2 slice(s) x 16 devices" in done.stderr
    assert _create("--tpu-type", "v5litepod-16", "--num-slices", "2", IMAGE, "--command",
                   "python3 -m trainer --global-batch 32").returncode == 0


def test_a_resize_needs_the_batch_to_divide_over_every_slice_count():
    base = ("--tpu-type", "v5litepod-8", "--num-slices", "3", "--elastic-slices", "2", "--trainer", IMAGE,
            "--elastic-min-slice-count", "1")
    done = _create(*base, "--global-batch", "48")  # 1, 2 or 3 slices of 8 devices: 48 divides over each
    assert done.returncode == 0, done.stderr
    done = _create(*base, "--global-batch", "24")  # 24 % 16 != 0
    assert done.returncode == 2
    assert "over 2 slice(s) x 8 devices" in done.stderr and "use a multiple of 48" in done.stderr


def test_the_trainer_s_other_checks_run_too():
    """A setting valid alone that the trainer refuses with another: --checkpoint-dir on a scheme it cannot write."""
    done = _create("--tpu-type", "v5litepod-16", "--trainer", IMAGE, "--command", "--run-dir s3://b/run")
    assert done.returncode == 2
    assert "--run-dir 's3://b/run': the records go to a local directory or to gs://" in done.stderr


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tpu=st.sampled_from(["v5litepod-8", "v5litepod-16", "v6e-4", "v5p-8", "tpu7x-8"]),
       num_slices=st.integers(1, 5), batch=st.integers(1, 400), resize=st.booleans(), data=st.data())
def test_create_refuses_a_batch_exactly_when_some_slice_count_does_not_divide_it(cli, tpu, num_slices, batch,
                                                                                  resize, data):
    elastic = num_slices - 1
    min_count = data.draw(st.integers(1, num_slices - 1)) if resize and num_slices > 1 else -1
    argv = ["workload", "create", "--workload", "w", "--tpu-type", tpu, "--num-slices", str(num_slices), "--trainer",
            IMAGE, "--global-batch", str(batch), "--dry-run"]
    if elastic:
        argv += ["--elastic-slices", str(elastic), "--max-slice-restarts", "3"]
    if min_count != -1:
        argv += ["--elastic-min-slice-count", str(min_count)]
    row = catalog.lookup(tpu)
    devices = row.chips_per_slice * (2 if tpu.startswith("tpu7x") else 1)
    divides = all(batch % (n * devices) == 0 for n in _slice_counts(num_slices, min_count))
    result = cli(*argv)
    assert (result.code == 0) == divides, (argv, result.err)
    if not divides:
        assert result.code == 2 and result.error_lines[0].startswith(f"error: --global-batch {batch}: ")


def test_jax_devices_per_slice_of_the_catalog():
    assert catalog.lookup("v5litepod-16").devices_per_slice == 16
    assert catalog.lookup("v5p-8").devices_per_slice == 4  # megacore: one device per chip
    assert catalog.lookup("v4-8").devices_per_slice == 4
    assert catalog.lookup("tpu7x-8").devices_per_slice == 8  # each TensorCore (chiplet) is a device


def test_a_slice_count_past_gke_s_node_limit_is_refused():
    most = GKE_MAX_NODES // 4  # v5litepod-16: 4 VMs, one node each
    done = _create("--tpu-type", "v5litepod-16", "--num-slices", str(most + 1), "--command", "python3 x.py", IMAGE)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"error: --num-slices {most + 1}: {most + 1} x 4 VM(s) of v5litepod-16 needs {4 * (most + 1):,} nodes, past "
        f"GKE's limit of {GKE_MAX_NODES:,} nodes per cluster; use at most {most:,} slices of it"]
    assert _create("--tpu-type", "v5litepod-16", "--num-slices", str(most), "--command", "python3 x.py",
                   IMAGE).returncode == 0


def _rendered(tmp_path: Path, *argv: str) -> tuple[Path, dict]:
    done = _create("--tpu-type", "v5litepod-16", "--num-slices", "3", "--trainer", IMAGE, *argv)
    assert done.returncode == 0, done.stderr
    path = tmp_path / "jobset.yaml"
    path.write_text(done.stdout)
    return path, yaml.safe_load(done.stdout)


def _validate(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([ELXPK, "workload", "validate", str(path)], capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)


def _trainer_env(jobset: dict) -> list[dict]:
    for rjob in jobset["spec"]["replicatedJobs"]:
        for box in rjob["template"]["spec"]["template"]["spec"]["containers"]:
            if any(e["name"].startswith("ELXPK_") for e in box.get("env", [])):
                return box["env"]
    raise AssertionError("no trainer container")


def test_validate_reports_a_batch_the_trainer_refuses_naming_its_env_var(tmp_path):
    path, jobset = _rendered(tmp_path, "--global-batch", "48")
    assert _validate(path).returncode == 0
    for entry in _trainer_env(jobset):
        if entry["name"] == "ELXPK_GLOBAL_BATCH":
            entry["value"] = "40"
    path.write_text(yaml.safe_dump(jobset))
    done = _validate(path)
    assert done.returncode == 1
    [line] = done.stdout.splitlines()
    assert line.startswith(f"{path}: the trainer refuses at its start: spec.replicatedJobs[0].template.spec.template."
                           "spec.containers[0]: ELXPK_GLOBAL_BATCH 40: must divide evenly over 3 slice(s) x 16 "
                           "devices (v5litepod-16 has 16 per slice); use a multiple of 48"), line


def test_validate_reads_the_slice_count_from_the_worker_replicas(tmp_path):
    """A hand-edited JobSet whose env no longer says how many slices the workers are."""
    path, jobset = _rendered(tmp_path, "--global-batch", "48")
    worker = next(r for r in jobset["spec"]["replicatedJobs"] if r["name"] == "worker")
    worker["replicas"] = 2
    path.write_text(yaml.safe_dump(jobset))
    done = _validate(path)
    assert done.returncode == 1
    assert "ELXPK_NUM_SLICES 3: v5litepod-16 has 2 slice(s); set ELXPK_NUM_SLICES (ELXPK_NUM_SLICES) to 2" \
        in done.stdout, done.stdout


def test_problems_are_empty_without_a_trainer_and_name_a_flag_given_on_the_command_line(tmp_path):
    _, jobset = _rendered(tmp_path, "--command", "--global-batch 48")
    assert trainer_problems(jobset) == []
    for rjob in jobset["spec"]["replicatedJobs"]:
        for box in rjob["template"]["spec"]["template"]["spec"]["containers"]:
            box["command"] = [w.replace("--global-batch 48", "--global-batch 40") for w in box.get("command", [])]
    [(_, message)] = trainer_problems(jobset, by_env=True)
    assert message.startswith("--global-batch 40: must divide evenly")
    assert trainer_problems({"kind": "JobSet", "spec": {"replicatedJobs": [{"name": "x"}]}}) == []


def test_the_trainer_command_is_found_however_it_is_spelled():
    assert trainer_argv(["python", "-m", "trainer", "--steps", "5"]) == ("--steps", "5")
    assert trainer_argv(["bash", "-c", "wrapper", "elxpk", "python -m trainer --steps 5"]) == ("--steps", "5")
    assert trainer_argv(["sh", "-c", "cd /app && /usr/bin/python3.11 -m trainer --seed=3; echo done"]) == ("--seed=3",)
    assert trainer_argv(["sh", "-c", "python3 -m trainer --data 'a b.npy'|tee log"]) == ("--data", "a b.npy")
    assert trainer_argv(["python3", "-m", "trainer"]) == ()
    for other in (["python3", "-m", "trainer_x"], ["python3", "train.py", "-m", "trainer"],
                  ["bash", "-c", "python3 -m maxtext.train trainer"], ["sh", "-c", "python -m trainer 'open"], []):
        assert trainer_argv(other) is None, other


_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
                     max_leaves=30)


@settings(max_examples=200, deadline=None)
@given(template=_JSON, env=_JSON, replicas=_JSON)
def test_any_shape_of_manifest_is_read_without_raising(template, env, replicas):
    """validate reads any YAML: a malformed JobSet is its schema's to report, never a crash here."""
    box = {"name": "t", "command": ["python", "-m", "trainer"], "env": env}
    jobset = {"kind": "JobSet", "spec": {"replicatedJobs": [
        {"name": "w", "replicas": replicas, "template": template},
        {"name": "h", "template": {"spec": {"template": {"spec": {"containers": [box], "nodeSelector": {
            "cloud.google.com/gke-tpu-accelerator": "tpu-v5-lite-podslice", "cloud.google.com/gke-tpu-topology": "4x4"
        }}}}}}]}}
    for by_env in (False, True):
        assert isinstance(trainer_problems(jobset, by_env=by_env), list)


@pytest.mark.parametrize(("trainer", "command", "expected"), [
    (True, "python -m trainer --steps 5", ["--steps", "5"]),
    (False, "python3 -m trainer --global-batch 48", ["--global-batch", "48"]),  # gcluster's -e
    (False, "/usr/bin/python3.12 -m trainer", []),
    (False, "bash -c 'pip list && python3 -m trainer --steps 2'", ["--steps", "2"]),
    (False, "python3 -m maxtext.trainers.pre_train.train base.yml", None),
    (False, "", None),
])
def test_check_fit_finds_the_bundled_trainer_as_the_refusals_do(trainer, command, expected):
    from types import SimpleNamespace

    from elxpk.create.fit_check import bundled_trainer_args

    assert bundled_trainer_args(SimpleNamespace(trainer=trainer, command=command)) == expected
