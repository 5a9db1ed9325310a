"""On a machine with no TPU and no GPU, `python -m trainer` runs on the CPU without libtpu's start-up errors
(libtpu comes with the elxpk[tpu] extra, and jax loads it wherever it is installed): the trainer sets
JAX_PLATFORMS=cpu before jax starts, unless the machine has an accelerator's device file or JAX_PLATFORMS is
set (a Pathways head's `proxy`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from trainer.cpu import cpu_only_unless_accelerator


@pytest.mark.parametrize("files, expected", [
    ((), "cpu"),
    (("dev/vfio/vfio",), "cpu"),  # the VFIO control file alone is no device
    (("dev/null",), "cpu"),
    (("dev/accel0",), None),  # TPU v4
    (("dev/vfio/0",), None),  # TPU v5e and later
    (("dev/nvidia0",), None),
])
def test_cpu_only_where_no_accelerator_device_file_exists(tmp_path, files, expected):
    for name in files:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    env: dict[str, str] = {}
    # jax is imported in this test process already; the rule only ever runs before it, in a fresh one.
    saved = sys.modules.pop("jax", None)
    try:
        assert cpu_only_unless_accelerator(env, dev_root=str(tmp_path)) == (expected is not None)
        assert env.get("JAX_PLATFORMS") == expected
        given = {"JAX_PLATFORMS": "proxy"}
        assert not cpu_only_unless_accelerator(given, dev_root=str(tmp_path)) and given == {"JAX_PLATFORMS": "proxy"}
    finally:
        if saved is not None:
            sys.modules["jax"] = saved


def test_a_cpu_run_prints_no_libtpu_errors(tmp_path):
    if any(Path(d).exists() and os.listdir(d) for d in ("/dev/vfio",)) or any(
            n.startswith(("accel", "nvidia")) for n in os.listdir("/dev")):
        pytest.skip("this machine has an accelerator: jax may use it")
    env = {k: v for k, v in os.environ.items() if k != "JAX_PLATFORMS" and not k.startswith("ELXPK_")}
    done = subprocess.run([sys.executable, "-m", "trainer", "--model", "micro", "--steps", "1", "--run-dir",
                           str(tmp_path / "run")], env=env, capture_output=True, text=True, timeout=600,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stderr == "", done.stderr[-2000:]
    assert done.stdout.splitlines()[-1].startswith("done: 1 steps")  # after the speed lines (issue 50)
