"""`workload create --check-fit`: refuse a workload whose train step will not fit in its chips' memory,
before it is submitted.

The bundled trainer compiles its real step for the workload's slice (`python -m trainer --compile-only`,
trainer/compile_only.py: jax compiles for a TPU topology from its description, with libtpu and no chip)
with exactly the settings the container will get: the ELXPK_* env the launcher renders, then the extra
trainer arguments of --command, as in the pod. XLA's per-device figure is then held against the device's
share of the chip's HBM (elxpk/catalog.py). A subprocess, and only when asked: rendering imports no jax,
`--dry-run` stays fast, and a compile takes seconds to minutes (a tiny model on a v6e:2x2: about 5 s of CPU).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from typing import Any

from elxpk.create.spec import TRAINER_COMMAND
from elxpk.errors import UsageError

COMPILE_TIMEOUT_S = 1800.0  # a large model's step compiles for minutes; past this the check gives up
GIB = 2**30


def check_fit(spec: Any, env: tuple[tuple[str, str], ...]) -> list[str]:
    """The lines for stderr: the step fits. UsageError (exit 2) when it does not, or cannot be checked.
    `env`: the trainer settings as rendered (elxpk.create.render.trainer_env)."""
    if not spec.trainer or spec.tpu is None:
        raise UsageError("--check-fit: compiles the bundled trainer's step for a TPU slice; it needs --trainer "
                         "and --tpu-type (MaxText: use its own train_compile)")
    tpu = spec.tpu
    extra = shlex.split(spec.command or "")[len(TRAINER_COMMAND.split()):]  # the pod's arguments after it
    # The chip's memory, so that --remat-policy auto picks as it will on the chip (a topology's devices
    # report none).
    argv = [sys.executable, "-m", "trainer", "--compile-only", "--compile-topology", tpu.jax_topology,
            "--compile-chip-bytes", str(tpu.hbm_bytes_per_chip), *extra]
    try:
        done = subprocess.run(argv, env={**os.environ, **dict(env)}, capture_output=True, text=True,
                              timeout=COMPILE_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise UsageError(f"--check-fit: compiling the step for {tpu.jax_topology} took over "
                         f"{COMPILE_TIMEOUT_S:g} s; drop --check-fit to submit unchecked") from None
    if done.returncode != 0:
        errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
        why = errors[0][len("error: "):] if errors else (done.stderr.strip().splitlines() or ["no output"])[-1]
        if done.returncode == 2:  # the trainer refused the settings, or XLA the step: its own line
            raise UsageError(f"--check-fit: {why[:600]}")
        raise UsageError(f"--check-fit: python -m trainer --compile-only exited {done.returncode}: {why[:500]}")
    report = json.loads(done.stdout.strip().splitlines()[-1])
    need = report["bytes_per_device"]
    chips = tpu.chips_per_slice
    # What the device's allocator may use, as the trainer worked it out from the chip's HBM (a device is a
    # chip or a core); the catalog's share where an older trainer reports none.
    limit = report.get("device_limit_bytes") or tpu.hbm_bytes_per_chip * chips // max(1, report["devices_per_slice"])
    where = (f"{report['num_slices']} x {tpu.name} ({tpu.jax_topology}, mesh "
             f"{report['mesh']['slice']} x {report['mesh']['data']})")
    if need is None:
        raise UsageError(f"--check-fit: XLA gave no memory analysis for {where}; drop --check-fit")
    if need > limit:
        raise UsageError(
            f"--check-fit: the train step needs {need / GIB:.2f} GiB per device on {where} (XLA's memory "
            f"analysis of the compiled step) but a device has {limit / GIB:.2f} GiB of HBM; lower --global-batch, "
            f"use a smaller --model, or use more slices or a larger --tpu-type")
    # The report's `fewest_slices` (the step after a resize onto --elastic-min-slice-count slices) is not
    # judged here: the trainer itself waits for slices where a survivors' step would not fit.
    return [f"check-fit: the train step needs {need / GIB:.2f} GiB per device on {where}, "
            f"{need / limit:.0%} of the device's {limit / GIB:.2f} GiB"]
