"""`python -m elxpk.checkpoints DIR`, MaxText's pre-start step, run as the init container runs it: from the
files trainer/Dockerfile copies into the image and nothing else of this checkout, on directories orbax's own
writer made and a save of it SIGKILLed mid-write."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import dockerfile
import pytest

from tests.conftest import REPO_ROOT
from tests.process.conftest import as_a_plain_user
from tests.process.test_checkpoint_inspect import killed_orbax_dir, orbax_dir, orbax_latest  # noqa: F401

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def image_root(tmp_path_factory) -> Path:
    """/opt/elxpk of the trainer image: every COPY of trainer/Dockerfile, mirrored."""
    root = tmp_path_factory.mktemp("image") / "opt" / "elxpk"
    for command in dockerfile.parse_file(str(REPO_ROOT / "trainer" / "Dockerfile")):
        if command.cmd != "COPY":
            continue
        *sources, target = command.value
        assert target.startswith("/opt/elxpk/"), target
        where = root / target.removeprefix("/opt/elxpk/")
        for source in sources:
            path = REPO_ROOT / source.rstrip("/")
            if path.is_dir():
                shutil.copytree(path, where, dirs_exist_ok=True,
                                ignore=shutil.ignore_patterns("__pycache__"))
            else:
                where.mkdir(parents=True, exist_ok=True)
                shutil.copy(path, where / path.name)
    return root


def pre_start(image_root: Path, directory: Path | str, cwd: Path, *flags: str) -> subprocess.CompletedProcess:
    """The init container's command; `-S` and an explicit path: the image's files first, then only the
    third-party packages (etils, gcsfs) the image installs, never this checkout."""
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{image_root}:{sysconfig.get_paths()['purelib']}"}
    return subprocess.run([sys.executable, "-S", "-m", "elxpk.checkpoints", str(directory), *flags], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=300, check=False)


def test_a_first_run_has_nothing_to_check(image_root, tmp_path):
    done = pre_start(image_root, tmp_path / "run-that-never-saved", tmp_path)
    assert done.returncode == 0, done.stderr
    assert "holds no checkpoint yet: nothing to check" in done.stdout
    logs_only = tmp_path / "run"
    (logs_only / "tensorboard").mkdir(parents=True)  # MaxText's run directory before its first save
    done = pre_start(image_root, logs_only, tmp_path)
    assert done.returncode == 0 and "nothing to check" in done.stdout, done.stderr


def test_the_torn_save_moves_aside_and_orbax_restores_the_newest_whole_step(image_root, killed_orbax_dir,  # noqa: F811
                                                                            tmp_path):
    source, torn = killed_orbax_dir
    run = tmp_path / "run"
    shutil.copytree(source, run / "checkpoints")
    done = pre_start(image_root, run, tmp_path)  # MaxText's base_output_directory/run_name, as rendered
    assert done.returncode == 0, done.stderr
    assert f"moved: {torn} -> " in done.stdout and "restore: step 4" in done.stdout, done.stdout
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["2", "4", "elxpk-quarantine"]
    assert orbax_latest(run / "checkpoints")["restored_step"] == 4  # orbax restores the step whole
    again = pre_start(image_root, run, tmp_path)  # a later restart: nothing more to move
    assert again.returncode == 0 and "moved:" not in again.stdout, again.stdout


def test_a_healthy_directory_is_left_as_it_is(image_root, orbax_dir, tmp_path):  # noqa: F811
    before = sorted(p.name for p in orbax_dir.iterdir())
    done = pre_start(image_root, orbax_dir, tmp_path, "--checkpoint-period", "2")
    assert done.returncode == 0 and "healthy" in done.stdout, done.stdout
    assert sorted(p.name for p in orbax_dir.iterdir()) == before


def test_bad_input_exits_2_with_one_line(image_root, tmp_path):
    a_file = tmp_path / "f"
    a_file.write_text("x")
    done = pre_start(image_root, a_file, tmp_path)
    assert done.returncode == 2 and done.stderr.strip().count("\n") == 0 and "is a file" in done.stderr
    done = pre_start(image_root, tmp_path, tmp_path, "--checkpoint-period", "two")
    assert done.returncode == 2 and "--checkpoint-period" in done.stderr, done.stderr


MAXTEXT = "python3 -m maxtext.trainers.pre_train.train src/maxtext/configs/base.yml"


def rendered_pre_start(run: Path, *shape: str) -> list[str]:
    """The init container's command of `workload create --trainer maxtext --checkpoint-pre-start --dry-run`."""
    import yaml

    done = subprocess.run([str(Path(sys.executable).parent / "elxpk"), "workload", "create", "--workload=mt",
                           "--trainer=maxtext", "--command", MAXTEXT, f"--checkpoint-dir={run}",
                           "--checkpoint-pre-start=gcr.io/p/elxpk-trainer:0.1.0", "--dry-run", *shape],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    jobset = yaml.safe_load(done.stdout)
    pods = [r["template"]["spec"]["template"]["spec"] for r in jobset["spec"]["replicatedJobs"]]
    boxes = [c for pod in pods for c in pod.get("initContainers", []) if c["name"] == "elxpk-pre-start"]
    assert len(boxes) == 1 and boxes[0]["image"] == "gcr.io/p/elxpk-trainer:0.1.0", boxes
    return list(boxes[0]["command"])


@pytest.mark.parametrize("shape", [["--tpu-type=v5p-16", "--num-slices=2", "--no-pathways"],
                                   ["--tpu-type=v5p-16", "--num-slices=2"]], ids=["multi-controller", "pathways"])
def test_the_rendered_init_container_command_quarantines_on_the_first_pod_only(image_root, killed_orbax_dir,  # noqa: F811
                                                                                tmp_path, shape):
    source, torn = killed_orbax_dir
    run = tmp_path / "run"
    shutil.copytree(source, run / "checkpoints")
    command = rendered_pre_start(run, *shape)
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",  # `python` as the image's PATH has it
           "PYTHONPATH": f"{image_root}:{sysconfig.get_paths()['purelib']}", "PYTHONNOUSERSITE": "1"}
    for other in ({"ELXPK_JOB_INDEX": "1", "JOB_COMPLETION_INDEX": "0"},
                  {"ELXPK_JOB_INDEX": "0", "JOB_COMPLETION_INDEX": "1"}):
        skipped = subprocess.run(command, env={**env, **other}, cwd=tmp_path, capture_output=True, text=True,
                                 timeout=300, check=False)
        assert skipped.returncode == 0 and "nothing to do here" in skipped.stdout, skipped.stderr
        assert (run / "checkpoints" / torn).exists()
    first = subprocess.run(command, env={**env, "ELXPK_JOB_INDEX": "0", "JOB_COMPLETION_INDEX": "0"}, cwd=tmp_path,
                           capture_output=True, text=True, timeout=300, check=False)
    assert first.returncode == 0, first.stderr
    assert f"moved: {torn} -> " in first.stdout and "restore: step 4" in first.stdout, first.stdout
    assert orbax_latest(run / "checkpoints")["restored_step"] == 4


def test_a_storage_failure_moves_nothing_and_exits_1_in_one_line(image_root, killed_orbax_dir, tmp_path):  # noqa: F811
    """A step's metadata denied to the reader (mode 000, without root's overrides) is the storage's failure,
    not a torn or unreadable step: one line naming the class, exit 1 (the init container fails, the restart
    runs it again), nothing moved; once it reads, the torn save is moved as usual."""
    source, torn = killed_orbax_dir
    run = tmp_path / "run"
    shutil.copytree(source, run / "checkpoints")
    denied = run / "checkpoints" / "4" / "_CHECKPOINT_METADATA"
    denied.chmod(0)
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{image_root}:{sysconfig.get_paths()['purelib']}"}
    try:
        done = subprocess.run([*as_a_plain_user(), sys.executable, "-S", "-m", "elxpk.checkpoints", str(run)],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)
    finally:
        denied.chmod(0o644)
    assert done.returncode == 1, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"error: DIR {run}: storage access denied: PermissionError: ") and \
        line.endswith("no step was set aside for it; run again once the storage answers"), line
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["2", "4", torn]
    again = pre_start(image_root, run, tmp_path)
    assert again.returncode == 0 and f"moved: {torn} -> " in again.stdout, again.stderr
