"""`--service-account`: the pods' ServiceAccount, xpk's default in xpk's spellings (GPU pods name `xpk-sa`,
which `xpk cluster create` makes; TPU pods none) and gcluster's in gcluster's (none: a Cluster Toolkit
cluster has no `xpk-sa`, and the API server refuses a pod naming an account that does not exist)."""

from __future__ import annotations

import pytest
import yaml

GPU_XPK = ["--workload=sa-gpu", "--device-type=a3-highgpu-8g", "--num-nodes=2", "--docker-image=gcr.io/p/i:1",
           "--command", "python3 train.py"]
GPU_GCLUSTER = ["--name=sa-gpu", "--compute-type=a3-highgpu-8g", "--num-nodes=2", "--image=gcr.io/p/i:1",
                "--command", "python3 train.py"]
TPU_MULTI = ["--workload=sa-tpu", "--tpu-type=v5p-8", "--num-slices=2", "--no-pathways", "--docker-image=gcr.io/p/i:1",
             "--command", "python3 train.py"]
TPU_PATHWAYS = ["--workload=sa-pw", "--tpu-type=v5p-8", "--num-slices=2", "--docker-image=gcr.io/p/i:1",
                "--command", "python3 train.py"]


def accounts(cli, *argv: str) -> list[str | None]:
    """serviceAccountName of every pod template the render holds (None where it names none)."""
    result = cli("workload", "create", *argv, "--dry-run")
    assert result.code == 0, result.err
    jobset = yaml.safe_load(result.out)
    return [rj["template"]["spec"]["template"]["spec"].get("serviceAccountName")
            for rj in jobset["spec"]["replicatedJobs"]]


def test_each_dialect_gets_its_own_default(cli):
    assert set(accounts(cli, *GPU_XPK)) == {"xpk-sa"}
    assert set(accounts(cli, *GPU_GCLUSTER)) == {None}
    assert set(accounts(cli, *TPU_MULTI)) == {None}
    assert set(accounts(cli, *TPU_PATHWAYS)) == {None}


@pytest.mark.parametrize("argv", [GPU_XPK, GPU_GCLUSTER, TPU_MULTI, TPU_PATHWAYS], ids=["gpu", "gcluster", "tpu", "pathways"])
def test_a_named_account_reaches_every_pod_and_default_means_no_field(cli, argv):
    assert set(accounts(cli, *argv, "--service-account=trainer-sa")) == {"trainer-sa"}
    assert set(accounts(cli, *argv, "--service-account=default")) == {None}  # what the API server fills in


@pytest.mark.parametrize("value", ["Trainer_SA", "a" * 254, "-sa", "sa.", "sa\n"])
def test_a_name_that_is_no_account_name_is_one_line_and_exit_2(cli, value):
    result = cli("workload", "create", *TPU_MULTI, f"--service-account={value}", "--dry-run")
    assert result.code == 2 and result.out == ""
    assert len(result.error_lines) == 1 and result.error_lines[0].startswith("error: --service-account ")
