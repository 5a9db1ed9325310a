"""What the cluster would refuse is refused before anything is printed, written or sent (#21): an object
over the API server's size limit, an image reference the kubelet cannot parse, a flag given twice."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from elxpk.admission.image_ref import image_problem
from elxpk.admission.object_size import OBJECT_MAX_BYTES
from elxpk.cli.commands import build_app
from elxpk.cli.main import main

ELXPK = Path(sys.executable).parent / "elxpk"
GOOD = ["--workload", "run-1", "--tpu-type", "v5p-8", "--command", "python3 train.py"]


def run(*argv: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(ELXPK), *argv], capture_output=True, text=True, timeout=60, **kwargs)


def test_an_env_that_makes_the_jobset_too_big_is_refused_and_nothing_written(tmp_path):
    env_file = tmp_path / "big.env"
    env_file.write_text("BLOB=" + "x" * (OBJECT_MAX_BYTES + 1) + "\n")
    out = tmp_path / "m.yaml"
    done = run("workload", "create", *GOOD, "--env-file", str(env_file), "--output-manifest-file", str(out),
               "--dry-run")
    assert done.returncode == 2 and done.stdout == "" and not out.exists()
    assert done.stderr.count("\n") == 1 and "the API server stores for one object" in done.stderr
    assert "the largest --env value is BLOB" in done.stderr
    env_file.write_text("BLOB=" + "x" * (OBJECT_MAX_BYTES // 2) + "\n")  # within the limit: rendered
    assert run("workload", "create", *GOOD, "--env-file", str(env_file), "--dry-run").returncode == 0


def test_the_checks_warnings_come_before_a_later_stages_refusal(cli, tmp_path):
    # One pass (elxpk/create/pipeline.py): the check stage's warning is printed as found, then the admit
    # stage refuses the rendered object's size; nothing reaches stdout or the output file.
    env_file = tmp_path / "big.env"
    env_file.write_text("BLOB=" + "x" * (OBJECT_MAX_BYTES + 1) + "\n")
    out = tmp_path / "m.yaml"
    result = cli("workload", "create", "--workload", "run-1", "--tpu-type", "v5p-8", "--command", "echo $(NOPE)",
                 "--env-file", str(env_file), "--output-manifest-file", str(out), "--dry-run")
    assert result.code == 2 and result.out == "" and not out.exists()
    lines = result.err.splitlines()
    assert len(lines) == 2 and lines[0].startswith("warning: --command: $(NOPE) names no env var")
    assert lines[1].startswith("error: the rendered JobSet is ") and "the largest --env value is BLOB" in lines[1]


def test_validate_refuses_an_object_over_the_size_limit(tmp_path):
    import yaml

    manifest = tmp_path / "cm.yaml"
    golden = (Path(__file__).parent / "goldens" / "pathways-v5p-8.yaml").read_text()  # a file holds a JobSet
    manifest.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big"},
                                        "data": {"blob": "x" * (OBJECT_MAX_BYTES + 1)}}) + "---\n" + golden)
    done = run("workload", "validate", str(manifest))
    assert done.returncode == 1 and "Too large" in done.stdout


@pytest.mark.parametrize("image", ["UPPER/Img:Tag", "gcr.io/p/Img:1", "img:tag:tag", "img@sha256:abc", "a//b",
                                   "img:" + "t" * 129, "-img", "img:", " img", "a" * 64, "ima ge"])
def test_an_image_the_kubelet_cannot_parse_is_refused(image):
    assert image_problem(image) is not None
    code = main(["workload", "create", *GOOD, "--docker-image", image, "--dry-run"])
    assert code == 2


@pytest.mark.parametrize("image", ["python:3.10", "gcr.io/my-project/my-image:tag", "Registry.Example.com/a/b:v1",
                                   "localhost:5000/a_b/c-d.e:1.0", "us-docker.pkg.dev/p/r/img@sha256:" + "0" * 64,
                                   "[::1]:5000/img:latest", "img"])
def test_a_valid_image_is_accepted(image):
    assert image_problem(image) is None


def _create_options() -> list[tuple[str, object]]:
    """Every single-valued option of `workload create` (its click parameters, as built for the command line)."""
    import typer.main

    root = typer.main.get_command(build_app(["workload", "create"]))
    click_command = root.commands["workload"].commands["create"]  # type: ignore[attr-defined]
    options = []
    for param in click_command.params:
        if param.param_type_name != "option" or param.multiple or param.name == "help":
            continue
        options.append((max(param.opts, key=len), param))
    return options


def test_every_create_flag_given_twice_is_refused_naming_it(capsys):
    flags = _create_options()
    assert len(flags) > 40  # the cluster, trainer-setting and create flags
    for flag, param in flags:
        value = [] if param.is_flag else ["1"]
        code = main(["workload", "create", *GOOD, flag, *value, flag, *value])
        err = capsys.readouterr().err
        assert code == 2 and f"error: {flag}: given " in err, (flag, err)
    done = run("workload", "create", *GOOD, "--tpu-type", "v5p-16", "--dry-run")
    assert done.returncode == 2 and done.stderr == ("error: --tpu-type: given 2 times; give it once (only one "
                                                    "value can apply)\n")


def test_repeatable_flags_stay_repeatable():
    import yaml

    done = run("workload", "create", *GOOD, "--env", "A=1", "--env", "B=2", "--dry-run", "-o", "json")
    assert done.returncode == 0, done.stderr
    names = {var["name"] for job in yaml.safe_load(done.stdout)["spec"]["replicatedJobs"]
             for c in job["template"]["spec"]["template"]["spec"]["containers"] for var in c.get("env", [])}
    assert {"A", "B"} <= names
