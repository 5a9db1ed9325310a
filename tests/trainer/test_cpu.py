"""CPU device setup and import hygiene: config and faults are usable before jax is imported."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from elxpk_contract.errors import UsageError
from trainer.cpu import ensure_devices


def _python(code: str, repo_root) -> str:
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    env["XLA_FLAGS"] = "--xla_force_host_platform_device_count=1 --xla_cpu_enable_fast_math=false"
    proc = subprocess.run([sys.executable, "-c", code], cwd=repo_root, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.strip()


def test_ensure_devices_sets_the_count_before_jax_starts_and_keeps_other_flags(repo_root):
    out = _python(
        "import os, sys\n"
        "import elxpk_contract.settings, elxpk_contract.faults, trainer.cpu\n"
        "assert 'jax' not in sys.modules, 'the settings, the faults and trainer.cpu must not import jax'\n"
        "trainer.cpu.ensure_devices(3)\n"
        "import jax\n"
        "print(len(jax.devices()), os.environ['XLA_FLAGS'])",
        repo_root,
    )
    assert out == "3 --xla_force_host_platform_device_count=3 --xla_cpu_enable_fast_math=false"


def test_too_few_devices_after_jax_started_is_a_clear_error():
    import jax

    assert len(jax.devices()) == 4  # tests/conftest.py gave this process 4
    ensure_devices(4)
    with pytest.raises(UsageError, match="needs 64 devices but jax was already imported with 4"):
        ensure_devices(64)


def test_a_count_the_machine_gives_is_kept_when_asked():
    """Multi-controller without --coordinator: XLA_FLAGS' count is the node's (tools/testcluster gives one
    per chip or GPU), left as it is even though it differs from the trainer's --devices-per-slice."""
    env = {"XLA_FLAGS": "--xla_force_host_platform_device_count=8 --xla_cpu_other=1"}
    ensure_devices(2, env, keep_given=True)
    assert env["XLA_FLAGS"] == "--xla_force_host_platform_device_count=8 --xla_cpu_other=1"
