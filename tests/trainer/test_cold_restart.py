"""A cold restart in a new process restores through the same path and reproduces the losses (vii)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from tests.support.runs import STEPS, read_jsonl

pytestmark = pytest.mark.slow


def _flags(cfg) -> list[str]:
    names = ("steps", "checkpoint_period", "max_to_keep", "seed", "num_slices", "devices_per_slice",
             "global_batch", "seq_len", "vocab_size", "d_model", "n_layers", "n_heads", "d_ff", "dropout",
             "learning_rate", "warmup_steps", "decay_steps")
    return [arg for n in names for arg in ("--" + n.replace("_", "-"), str(getattr(cfg, n)))]


def test_new_process_resumes_bitwise_from_a_checkpoint(reference_run, repo_root, tmp_path):
    shutil.copytree(reference_run.run_dir / "checkpoints", tmp_path / "checkpoints")
    for step in (12, 16):  # as if the first process died after committing step 8
        shutil.rmtree(tmp_path / "checkpoints" / str(step))
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}  # the trainer sets its own devices
    proc = subprocess.run(
        [sys.executable, "-m", "trainer", "--run-dir", str(tmp_path), *_flags(reference_run.cfg)],
        cwd=repo_root, env=env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"done: {STEPS} steps" in proc.stdout
    restores = [e for e in read_jsonl(tmp_path / "events.jsonl") if e["event"] == "restore_done"]
    assert restores[0]["step"] == 8 and restores[0]["from_checkpoint"] is True
    # The restore's two phases, told apart (issue 49): orbax's read and the fingerprint check.
    assert restores[0]["read_s"] > 0 and restores[0]["verify_s"] >= 0
    assert [p for e in read_jsonl(tmp_path / "events.jsonl") if e["event"] == "startup"
            for p in [e["phase"]]][:2] == ["imports_done", "devices_open"]
    ref = reference_run.last_by_step()
    got = {r["step"]: r["loss"] for r in read_jsonl(tmp_path / "metrics.jsonl")}
    assert got == {s: ref[s]["loss"] for s in range(8, STEPS)}


def test_bad_flags_exit_2_with_one_line_per_problem(repo_root, tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "trainer", "--run-dir", str(tmp_path), "--steps", "0", "--fault", "9@1"],
        cwd=repo_root, capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "error: --steps 0: must be at least 1",
        "error: --fault '9@1': slice 9 does not exist (slices are 0..1)",
    ]
    assert not any(tmp_path.iterdir())  # nothing written
