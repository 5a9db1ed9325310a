"""Multi-controller without --coordinator: the shape `elxpk workload create --trainer --no-pathways` renders.

On GKE, jax finds the TPU cluster itself. Here the same no-address `jax.distributed.initialize()` joins a
cluster that jax detects from Slurm's environment variables (one of the cluster kinds jax reads, and one
that works on CPU), so the detected path runs for real: processes and process count from the cluster,
slices from `device.slice_index` (on CPU every device reports 0: one slice served by two processes, as on
a multi-VM TPU slice), the devices per slice from the hardware, only process 0 writing.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest

from elxpk_contract.exit_codes import SLICE_LOST
from tests.support.loopback import free_port
from tests.support.processes import wait_group
from tests.support.runs import STEPS, read_jsonl
from tests.trainer.test_cold_restart import _flags


def _clean_env() -> dict[str, str]:
    # No XLA_FLAGS (the trainer sets its own devices) and no hint of a real cluster jax could pick instead.
    drop = ("XLA_FLAGS", "JAX_COORDINATOR_ADDRESS", "KUBERNETES_SERVICE_HOST", "OMPI_MCA_orte_hnp_uri")
    return {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("SLURM_")}



def test_without_a_coordinator_or_a_cluster_it_is_a_usage_error(repo_root, tmp_path):
    env = {**_clean_env(), "ELXPK_SLICE_BACKEND": "multi-controller", "ELXPK_NUM_SLICES": "2"}
    proc = subprocess.run([sys.executable, "-m", "trainer", "--run-dir", str(tmp_path / "run")], cwd=repo_root,
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert lines[-1].startswith("error: --coordinator: not given, and jax found no cluster"), proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and not (tmp_path / "run").exists()


def _run_group(args: list[str], base: dict[str, str], repo_root) -> tuple[list[int], str]:
    group = [subprocess.Popen(args, cwd=repo_root, env={**base, "SLURM_PROCID": str(i), "SLURM_LOCALID": str(i)},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for i in range(2)]
    codes, outputs = wait_group(group, 240)
    return codes, outputs[0][-2000:] + outputs[1][-2000:]


@pytest.mark.slow
def test_a_slice_of_two_processes_trains_dies_together_and_resumes(reference_run, repo_root, tmp_path):
    # Multi-process CPU devices all report slice_index 0: one slice spread over both processes, like a
    # multi-VM TPU slice. So --devices-per-slice (2) is not what the mesh uses: the hardware's 4 devices are.
    base = {**_clean_env(), "ELXPK_SLICE_BACKEND": "multi-controller", "ELXPK_NUM_SLICES": "1",
            "SLURM_JOB_ID": "4242", "SLURM_STEP_NODELIST": "127.0.0.1", "SLURM_NTASKS": "2"}
    args = [sys.executable, "-m", "trainer", "--run-dir", str(tmp_path), "--heartbeat-timeout-seconds", "15",
            *_flags(reference_run.cfg), "--num-slices", "1", "--elastic-enabled", "--fault", "0@6"]

    def group() -> tuple[list[int], str]:
        port = free_port()
        env = {**base, "JAX_COORDINATOR_PORT": str(port), "JAX_COORDINATOR_BIND_ADDRESS": f"127.0.0.1:{port}"}
        return _run_group(args, env, repo_root)

    codes, out = group()
    # The fault of slice 0 kills every process of slice 0 (137). Process 0 hosts the coordination service:
    # when it dies first, the JAX runtime aborts process 1 (SIGABRT) before it reaches the fault itself, or
    # process 1 exits 75 where a collective reported process 0's end first (MultiControllerSlices.close).
    assert codes[0] == 137 and codes[1] in (137, -signal.SIGABRT, SLICE_LOST.code), out
    codes, out = group()  # the restarted group does not fire it again
    assert codes == [0, 0], out

    metrics = read_jsonl(tmp_path / "metrics.jsonl")  # one writer: process 0
    restores = [e for e in read_jsonl(tmp_path / "events.jsonl") if e["event"] == "restore_done"]
    assert len(restores) == 2 and restores[1]["step"] in (0, 4)
    assert [r["step"] for r in metrics] == list(range(6)) + list(range(restores[1]["step"], STEPS))
    assert all(r["slices"] == [0] for r in metrics)
    run_json = json.loads((tmp_path / "run.json").read_text())
    assert run_json["topology"] == {"num_slices": 1, "devices_per_slice": 4, "processes": 2}
    assert run_json["config"]["devices_per_slice"] == 4
    assert run_json["fingerprint"] == reference_run.cfg.fingerprint()
    ref, got = reference_run.last_by_step(), {r["step"]: r for r in metrics}
    a = np.array([float.fromhex(ref[s]["loss"]) for s in range(STEPS)])
    b = np.array([float.fromhex(got[s]["loss"]) for s in range(STEPS)])
    np.testing.assert_allclose(b, a, rtol=1e-6, atol=0)  # another mesh: sums may differ in the last bits
