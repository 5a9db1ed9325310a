"""`workload create --device-type --num-nodes` (docs/gpu.md): what it accepts, and what it refuses with one
line naming the flag (exit 2, nothing printed on stdout)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from elxpk_contract.exit_codes import BAD_SETTINGS

ELXPK = Path(sys.executable).parent / "elxpk"
BASE = ("workload", "create", "--workload", "gpu-run", "--docker-image", "gcr.io/p/img:1", "--dry-run")


def test_the_user_runs_it_and_gets_the_node_group():
    done = subprocess.run([str(ELXPK), *BASE, "--device-type", "a3-ultragpu-8g", "--num-nodes", "4",
                           "--command", "python3 train.py --rank $(NODE_RANK)"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert (done.returncode, done.stderr) == (0, "")  # $(NODE_RANK) is defined: no warning
    job = yaml.safe_load(done.stdout)["spec"]["replicatedJobs"]
    assert [(j["name"], j["replicas"], j["template"]["spec"]["parallelism"]) for j in job] == [("slice-job", 1, 4)]
    pod = job[0]["template"]["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"cloud.google.com/gke-accelerator": "nvidia-h200-141gb"}
    box = pod["containers"][0]
    assert box["name"] == "gpu-image" and box["resources"]["limits"] == {"nvidia.com/gpu": 8}
    assert {e["name"]: e.get("value") for e in box["env"]}["NNODES"] == "4"


@pytest.mark.parametrize(("extra", "line"), [
    (["--device-type", "h100-80gb-4", "--command", "x"],
     "error: --device-type: unknown GPU device type 'h100-80gb-4'; known: h100-80gb-8 (a3-highgpu-8g), "
     "h100-mega-80gb-8 (a3-megagpu-8g), h200-141gb-8 (a3-ultragpu-8g), b200-8 (a4-highgpu-8g)"),
    (["--device-type", "b200-8", "--tpu-type", "v5p-8", "--command", "x"],
     "error: --tpu-type and --device-type: one quantity, give one (--device-type names a GPU machine, e.g. "
     "h100-80gb-8, or a TPU type as --tpu-type does)"),
    (["--device-type", "b200-8", "--num-nodes", "0", "--command", "x"], "error: --num-nodes 0: "),
    (["--tpu-type", "v5p-8", "--num-nodes", "2", "--command", "x"], "error: --num-nodes: only for GPU workloads"),
    (["--device-type", "b200-8", "--num-slices", "2", "--command", "x"],
     "error: --num-slices: a GPU workload is one node group; give its size with --num-nodes"),
    (["--device-type", "b200-8", "--trainer", "maxtext", "--command", "x"], "error: --trainer maxtext: not on GPUs yet"),
    (["--device-type", "b200-8", "--headless"], "error: --headless: only with Pathways"),
    (["--device-type", "b200-8", "--elastic-slices", "1", "--command", "x"], "error: --elastic-slices"),
    (["--device-type", "b200-8", "--server-image", "gcr.io/p/s:1", "--command", "x"],
     "error: --server-image: only for Pathways workloads; drop it or drop --device-type"),
    (["--device-type", "b200-8", "--env", "NODE_RANK=3", "--command", "x"],
     "error: --env NODE_RANK: set by the GPU render itself (as xpk sets it); drop it"),
    (["--device-type", "b200-8", "--num-nodes", "3000000000", "--command", "x"],
     "error: --num-nodes 3000000000: must be from 1 to 2147483647"),
], ids=["unknown", "both-types", "zero-nodes", "nodes-on-tpu", "num-slices", "trainer", "headless", "elastic",
        "pathways-flag", "reserved-env", "int32"])
def test_bad_gpu_input_is_one_line_naming_the_flag(cli, extra, line):
    result = cli(*BASE, *extra)
    assert result.code == BAD_SETTINGS.code, result.err
    assert result.out == ""
    assert any(got.startswith(line) for got in result.error_lines), result.err


def test_docker_name_is_xpks_gpu_image_unless_given(cli):
    result = cli(*BASE, "--device-type", "b200-8", "--command", "x", "--docker-name", "trainer")
    assert result.code == 0, result.err
    assert yaml.safe_load(result.out)["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"][
        "containers"][0]["name"] == "trainer"


def test_the_bundled_trainer_runs_on_the_node_group(cli):
    """`--trainer`: `python -m trainer` (extra trainer arguments from --command) in xpk's GPU container, with
    the multi-controller settings of one slice; it builds its group from xpk's env (docs/gpu.md)."""
    result = cli(*BASE, "--device-type", "h100-80gb-8", "--num-nodes", "2", "--trainer", "--steps", "10",
                 "--command", "--d-model 128")
    assert result.code == 0, result.err
    box = yaml.safe_load(result.out)["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"][
        "containers"][0]
    env = {e["name"]: e.get("value") for e in box["env"]}
    assert box["command"][-1] == "python -m trainer --d-model 128"
    assert (env["ELXPK_SLICE_BACKEND"], env["ELXPK_NUM_SLICES"], env["ELXPK_STEPS"]) == ("multi-controller", "1", "10")
    assert env["NNODES"] == "2" and env["JAX_COORDINATOR_PORT"] == "6002"
