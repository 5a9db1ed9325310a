"""Story 1 of #31 for the GPU shape: `elxpk workload create --trainer --device-type h100-80gb-8 --num-nodes 2`
through the `elxpk` console script, on the process pool `testcluster up` adds by default (`h100-80gb-8:2`:
two nodes of 8 GPUs, each GPU a CPU device here, docs/testing.md).

The render is elxpk's, unchanged: the trainer joins its jax.distributed group from xpk's GPU env
(JAX_COORDINATOR_ADDRESS and _PORT, NNODES, NODE_RANK; trainer/elastic/gke_gpu_env.py) and takes the node
group as one slice of 16 devices over 2 processes. It runs to Succeeded; `status` shows the trainer's step
and last checkpoint while it runs; its checkpoints are on gs:// (fake-gcs-server).

What this story cannot have, and why:
- The run dir is not on gs://: the trainer writes metrics.jsonl, events.jsonl and run.json with local file
  I/O (trainer/metrics.py), so it is process 0's `elxpk-run/` in its pod's work dir (read here from the node's
  disk, <cluster>/vk/pods/<pod>/work/). Its progress record, which `status` reads, is on gs:// beside the
  checkpoints.
- The losses are not bitwise those of `elxpk local run --num-slices 1`: the gradient mean over a slice's
  devices is an all-reduce whose summation order XLA picks by the device count and their processes (16
  devices over 2 processes through gloo here; 2 devices in one process in `local run`, which has no
  devices-per-slice flag; and 16 devices in one process differ from both). Measured on this machine: 4.8e-7
  absolute, 8.6e-8 relative, from step 0. The test holds the first 10 steps to 1e-6 relative (past them
  dropout and the optimizer amplify the difference: 0.85% by step 39 of a 40-step run) and every step to the
  same examples, each exactly once (`elxpk compare --rtol 1e-6 -o json`); elastic resizes are bitwise because they change the slice count, not
  the devices per slice (docs/local.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import requests

from tests.realcluster.paused import PAUSED_TRAINER_ARGS, status_while_paused
from tests.realcluster.test_pre_start_process import objects
from tests.realcluster.test_process_pool import TRAINER_IMAGE
from tools.testcluster.kubeapi import PODS, LocalCluster

ELXPK = Path(sys.executable).with_name("elxpk")
DEVICE_TYPE = "h100-80gb-8"
# `status` reads the run while its trainers are paused (paused.py), so the run's length is free; the losses
# are compared within 1e-6 over the first COMPARED steps (the docstring says why not all).
STEPS, PERIOD, COMPARED = 20, 2, 10
# `elxpk local run`'s model (elxpk/local/options.py: LOCAL_MODEL), given to the trainer of the workload, so
# that both train the same model on the same data with the same seed.
LOCAL_MODEL_ARGS = "--d-model 128 --n-layers 2 --n-heads 4 --d-ff 512 --seq-len 32 --vocab-size 256 --learning-rate 0.01"


def run_elxpk(cluster: LocalCluster, *argv: str, kube: bool = True, timeout: float = 300,
              cwd: Path | None = None) -> subprocess.CompletedProcess:
    """The console script as a user runs it, with gs:// the cluster's emulator (status reads the progress
    record there); KUBECONFIG from the environment never used."""
    host = cluster.storage_emulator_host
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    env.update(STORAGE_EMULATOR_HOST=host, TENSORSTORE_GCS_HTTP_URL=host, GOOGLE_AUTH_TOKEN_FOR_TESTING="anon")
    extra = ["--kubeconfig", str(cluster.kubeconfig)] if kube else []
    return subprocess.run([str(ELXPK), *argv, *extra], capture_output=True, text=True, timeout=timeout, env=env,
                          cwd=cwd, check=False)


@pytest.fixture(scope="module")
def gpu_pool(testcluster: LocalCluster) -> LocalCluster:
    nodes = testcluster.items("/api/v1/nodes", labelSelector="type=virtual-kubelet,"
                                                            "cloud.google.com/gke-accelerator=nvidia-h100-80gb")
    if len(nodes) < 2:
        pytest.fail("the test cluster has no h100-80gb-8 process pool of 2 nodes: start it with "
                    "`tools/testcluster up` (its default --process-pools has h100-80gb-8:2)", pytrace=False)
    return testcluster


def status_while_running(cluster: LocalCluster, name: str, bucket: str) -> dict:
    """`status -o json` while the trainers are stopped past a committed checkpoint (tests/realcluster/paused.py)."""
    def status() -> dict:
        shown = run_elxpk(cluster, "workload", "status", name, "-o", "json", timeout=120)
        assert shown.returncode == 0, shown.stderr
        return dict(json.loads(shown.stdout))

    return status_while_paused(cluster, name, bucket, "story1/ckpt", status)


@pytest.mark.slow
def test_story1_gpu_node_group_runs_the_trainer_to_succeeded(gpu_pool: LocalCluster, tmp_path: Path) -> None:
    cluster = gpu_pool
    bucket = f"gpu-story-{uuid.uuid4().hex[:8]}"
    made = requests.post(f"{cluster.storage_emulator_host}/storage/v1/b", json={"name": bucket}, timeout=30)
    assert made.status_code == 200, made.text
    checkpoints = f"gs://{bucket}/story1/ckpt"
    name = f"gpu-s1-{uuid.uuid4().hex[:4]}"
    created = run_elxpk(cluster, "workload", "create", f"--workload={name}", f"--device-type={DEVICE_TYPE}",
                        "--num-nodes=2", "--trainer", f"--docker-image={TRAINER_IMAGE}", f"--steps={STEPS}",
                        f"--checkpoint-period={PERIOD}", f"--checkpoint-dir={checkpoints}",
                        # The pod's own folder (read below from the node), not the rendered gs:// run dir beside the
                        # checkpoints, which the TPU stories read (tests/realcluster/stories.py)
                        "--command", " ".join([LOCAL_MODEL_ARGS, *PAUSED_TRAINER_ARGS, "--run-dir elxpk-run"]))
    assert created.returncode == 0, created.stderr
    try:
        running = status_while_running(cluster, name, bucket)
        assert running["state"] == "Running" and running["slices_healthy"] == running["slices_total"] == 1, running
        progress = running.get("progress") or {}  # the whole status in each message: progress_problem says why not
        assert progress.get("directory") == checkpoints, running
        assert progress["checkpoint_step"] % PERIOD == 0 < progress["steps_done"], running

        waited = run_elxpk(cluster, "workload", "wait", name, "--for", "completed", "--timeout", "10m", timeout=660)
        assert waited.returncode == 0, waited.stdout + waited.stderr
        final = json.loads(run_elxpk(cluster, "workload", "status", name, "-o", "json").stdout)
        assert final["state"] == "Succeeded" and final["restarts"] == 0, final
        assert (final["progress"]["steps_done"], final["progress"]["checkpoint_step"]) == (STEPS, STEPS)

        prefix = "story1/ckpt/"
        committed = sorted(int(n.removeprefix(prefix).split("/")[0]) for n in objects(cluster, bucket, prefix)
                           if n.endswith("/commit_success.txt") and n.count("/") == 3)
        # The newest steps the trainer keeps (older ones are pruned), each with orbax's commit marker.
        assert committed[-1] == STEPS and all(s % PERIOD == 0 for s in committed), committed

        pods = cluster.items(PODS.format(ns="default"), labelSelector=f"jobset.sigs.k8s.io/jobset-name={name}")
        [first] = [p for p in pods if p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] == "0"]
        run_dir = (cluster.run_dir / "vk" / "pods" / f"default_{first['metadata']['name']}_{first['metadata']['uid']}"
                   / "work" / "elxpk-run")
        config = json.loads((run_dir / "run.json").read_text())["config"]
        assert (config["slice_backend"], config["num_slices"], config["devices_per_slice"]) == ("multi-controller", 1, 16)

        reference = tmp_path / "local-run"
        local = run_elxpk(cluster, "local", "run", "--run-dir", str(reference), "--no-faults", f"--steps={STEPS}",
                          f"--checkpoint-period={PERIOD}", "--num-slices=1", "--plain", kube=False, cwd=tmp_path,
                          timeout=600)
        assert local.returncode == 0, local.stdout[-2000:] + local.stderr[-2000:]
        compared = run_elxpk(cluster, "compare", str(reference), str(run_dir), "--rtol", "1e-6", "-o", "json",
                             kube=False)
        # Within 1e-6 over the first COMPARED steps; past them the float differences grow (dropout and the
        # optimizer amplify them: 0.85% at step 39), so the later steps are held to the same data, exactly once.
        result = json.loads(compared.stdout)
        beyond = result["first_beyond_rtol_step"]
        assert beyond is None or beyond >= COMPARED, result
        assert result["common_steps"] == STEPS and result["data_order_mismatches"] == 0, result
        assert result["examples_b"]["duplicates"] == result["examples_b"]["gaps"] == 0, result
    finally:
        assert run_elxpk(cluster, "workload", "delete", name, "--yes").returncode == 0
