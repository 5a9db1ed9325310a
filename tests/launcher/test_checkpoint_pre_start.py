"""`workload create --trainer maxtext --checkpoint-pre-start IMAGE`: off by default; where the init container
goes in each shape; the refusals (exit 2, one line naming the flag, nothing printed). That its command works is
tests/process/test_checkpoint_prestart.py; that the API server admits it, tests/realcluster/test_pre_start_real.py."""

from __future__ import annotations

import pytest
import yaml

from tests.launcher.cases import MAXTEXT_DEMO_COMMAND

IMAGE = "gcr.io/my-project/elxpk-trainer:0.1.0"
MAXTEXT = ["--workload=mt", "--tpu-type=v5p-16", "--num-slices=2", "--trainer=maxtext",
           "--command", MAXTEXT_DEMO_COMMAND, "--dry-run"]


def init_containers(text: str) -> dict[str, list[str]]:
    """replicatedJob -> names of its pods' init containers."""
    jobset = yaml.safe_load(text)
    return {r["name"]: [c["name"] for c in r["template"]["spec"]["template"]["spec"].get("initContainers", [])]
            for r in jobset["spec"]["replicatedJobs"]}


def test_off_by_default(cli):
    done = cli("workload", "create", *MAXTEXT, "--checkpoint-dir=gs://bkt/runs/r1")
    assert done.code == 0, done.err
    assert "elxpk-pre-start" not in done.out


@pytest.mark.parametrize(("shape", "where"), [(["--no-pathways"], {"slice-job": ["elxpk-pre-start"]}),
                                              ([], {"pathways-head": ["elxpk-pre-start", "pathways-proxy",
                                                                      "pathways-rm"], "worker": []})])
def test_one_init_container_before_the_rest_on_the_pod_that_runs_maxtext(cli, shape, where):
    done = cli("workload", "create", *MAXTEXT, *shape, "--checkpoint-dir=gs://bkt/runs/r1",
               f"--checkpoint-pre-start={IMAGE}")
    assert done.code == 0, done.err
    assert init_containers(done.out) == where


@pytest.mark.parametrize(("flags", "line"), [
    (["--checkpoint-pre-start", IMAGE], "--checkpoint-pre-start: needs --checkpoint-dir"),
    (["--checkpoint-pre-start", "Not An Image", "--checkpoint-dir=gs://bkt/r"], "--checkpoint-pre-start 'Not An Image'"),
])
def test_refusals_name_the_flag(cli, flags, line):
    done = cli("workload", "create", *MAXTEXT, *flags)
    assert done.code == 2 and done.out == "", done.err
    errors = [text for text in done.err.splitlines() if text.startswith("error: ")]
    assert len(errors) == 1 and errors[0].startswith(f"error: {line}"), done.err


def test_refused_without_maxtext(cli):
    done = cli("workload", "create", "--workload=w", "--tpu-type=v5p-8", "--command=python3 t.py",
               "--checkpoint-dir=gs://bkt/r", f"--checkpoint-pre-start={IMAGE}", "--dry-run")
    assert done.code == 2 and done.out == ""
    assert "--checkpoint-pre-start: only with --trainer maxtext" in done.err
