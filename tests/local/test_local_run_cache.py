"""`elxpk local run` turns jax's persistent compilation cache on as `python -m trainer` does (RUN_DIR/xla-cache,
beside the checkpoints, by default), so a resume or a second run loads its compiled steps instead of
compiling them again. A real process, without the tests' own shared cache (JAX_COMPILATION_CACHE_DIR)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ELXPK = str(Path(sys.executable).with_name("elxpk"))
TINY = ("--d-model=32", "--n-layers=1", "--n-heads=2", "--d-ff=64", "--seq-len=16", "--vocab-size=64",
        "--global-batch=8")


@pytest.mark.slow
def test_a_local_run_writes_its_compiles_beside_its_checkpoints_and_a_resume_reuses_them(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR" and not k.startswith("ELXPK_")}
    env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"  # this tiny model compiles in well under jax's 1 s
    run = tmp_path / "run"

    def local_run(steps: int) -> tuple[set[str], str]:
        done = subprocess.run([ELXPK, "local", "run", "--run-dir", str(run), "--steps", str(steps),
                               "--checkpoint-period", "2", "--no-faults", "--plain",
                               *(f"--trainer-arg={a}" for a in TINY)], env=env, capture_output=True, text=True,
                              timeout=600, cwd=tmp_path)
        assert done.returncode == 0, done.stderr[-2000:]
        return {p.name for p in (run / "xla-cache").iterdir()}, done.stderr

    first, _ = local_run(4)
    assert first, "no compile was cached beside the checkpoints"
    env["JAX_LOGGING_LEVEL"] = "DEBUG"  # jax names each persistent-cache hit
    second, log = local_run(6)  # resumes from step 4: the train step it compiled is loaded, not compiled again
    assert first <= second
    # The train step itself comes from the executable store beside that cache (issue 49: deserialized, no
    # trace, no compile), or from jax's cache where the store missed.
    resumed = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()
               if '"restore_done"' in line][-1]
    assert resumed["executable"] == "deserialized" or "Persistent compilation cache hit for 'jit_train_step'" in log, \
        (resumed, log[-3000:])
    assert any(p.name.endswith(".xexec") for p in (run / "xla-cache-executables").iterdir())
