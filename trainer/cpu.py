"""CPU topology: XLA's virtual host devices stand in for the devices of several slices.

XLA reads XLA_FLAGS once, when jax's CPU backend starts, so the device count must be set before jax
is imported; afterwards all we can do is check it.
"""

from __future__ import annotations

import os
import re
import sys

from elxpk_contract.errors import UsageError
from elxpk_contract.setting_rules import said

_COUNT_FLAG = re.compile(r"--xla_force_host_platform_device_count=\S*")


def ensure_devices(n: int, environ: dict | None = None, *, keep_given: bool = False) -> None:
    """Make at least `n` CPU devices available to jax, keeping any other XLA flags. With `keep_given`, a
    device count XLA_FLAGS already names stays: the machine's own (a node of tools/testcluster gives as many
    as its VM has chips or GPUs)."""
    env = os.environ if environ is None else environ
    if keep_given and _COUNT_FLAG.search(env.get("XLA_FLAGS", "")):
        return
    if "jax" not in sys.modules:
        others = _COUNT_FLAG.sub("", env.get("XLA_FLAGS", "")).split()
        env["XLA_FLAGS"] = " ".join([f"--xla_force_host_platform_device_count={n}", *others])
        return
    import jax

    have = len(jax.devices())
    if have < n:
        raise UsageError(
            f"{said('num_slices')} x {said('devices_per_slice')} needs {n} devices but jax was already imported with {have}; "
            f"start a new process, or set XLA_FLAGS=--xla_force_host_platform_device_count={n} "
            "before importing jax"
        )


# Device files of an accelerator a container or VM was given: a TPU (/dev/accel* on v4, /dev/vfio/N from v5e
# on) or an NVIDIA GPU. Without any, jax would still load libtpu where it is installed (the elxpk[tpu] extra),
# and libtpu prints a page of errors about TPU metadata it cannot find before jax falls back to the CPU.
_ACCELERATOR_FILES = (("/dev", "accel"), ("/dev/vfio", ""), ("/dev", "nvidia"))


def cpu_only_unless_accelerator(environ: dict | None = None, dev_root: str = "") -> bool:
    """JAX_PLATFORMS=cpu where it is not set and this machine has no TPU or GPU device file, so a CPU run is
    quiet (no libtpu start-up errors); the machine's own JAX_PLATFORMS (a Pathways head's `proxy`) always
    wins. Before jax is imported. Returns whether it set it. `dev_root` prefixes the device folders (tests)."""
    env = os.environ if environ is None else environ
    if env.get("JAX_PLATFORMS") or "jax" in sys.modules:
        return False
    for folder, prefix in _ACCELERATOR_FILES:
        try:
            names = os.listdir(dev_root + folder)
        except OSError:
            continue
        if any(name.startswith(prefix) and (prefix or name.isdigit()) for name in names):
            return False
    env["JAX_PLATFORMS"] = "cpu"
    return True
