"""`workload create --check-fit`: refuse a workload whose train step will not fit in its chips' memory,
before it is submitted.

The bundled trainer compiles its real step for the workload's slice (`python -m trainer --compile-only`,
trainer/compile_only.py: jax compiles for a TPU topology from its description, with libtpu and no chip)
with exactly the settings the container will get: the ELXPK_* env the launcher renders, then the extra
trainer arguments of --command, as in the pod. XLA's per-device figure is then held against the device's
share of the chip's HBM (elxpk/catalog.py). A subprocess, and only when asked: rendering imports no jax,
`--dry-run` stays fast, and a compile takes seconds to minutes (a tiny model on a v6e:2x2: about 5 s of CPU);
the trainer's lines that say what it compiles and that it still does are relayed as they come
(elxpk/create/compile_relay.py), and only the full width's step is compiled, the one the decision reads.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Callable
from typing import Any

from elxpk.create.compile_relay import run_relaying
from elxpk.create.spec import TRAINER_COMMAND
from elxpk.create.trainer_refusals import trainer_argv
from elxpk.errors import UsageError

COMPILE_TIMEOUT_S = 1800.0  # a large model's step compiles for minutes; past this the check gives up
GIB = 2**30


def _quiet(line: str) -> None:
    return None


def bundled_trainer_args(spec: Any) -> list[str] | None:
    """The bundled trainer's arguments in the pod (after `python -m trainer`), or None when the workload runs
    something else: with --trainer, or a --command that runs it itself, as gcluster's `-e "python3 -m trainer
    ..."` does (found as the render-time refusals find it, trainer_refusals.trainer_argv)."""
    words = shlex.split(spec.command or "")
    if spec.trainer:
        return words[len(TRAINER_COMMAND.split()):]
    found = trainer_argv(words)
    return list(found) if found is not None else None


def check_fit(spec: Any, env: tuple[tuple[str, str], ...], note: Callable[[str], None] = _quiet) -> list[str]:
    """The lines for stderr: the step fits. UsageError (exit 2) when it does not, or cannot be checked.
    `env`: the trainer settings as rendered (elxpk.create.render.trainer_env); `note` gets the lines that say
    what is compiled and that it still is, as they come (a compile takes seconds to minutes)."""
    extra = bundled_trainer_args(spec)
    if extra is None or spec.tpu is None:
        raise UsageError("--check-fit: compiles the bundled trainer's step for a TPU slice; it needs --trainer "
                         "(or a --command that runs `python3 -m trainer`) and --tpu-type (MaxText: use its own "
                         "train_compile)")
    tpu = spec.tpu
    # The chip's memory, so that --remat-policy auto picks as it will on the chip (a topology's devices
    # report none). The step on the fewest slices is not compiled: the decision is the full width's.
    argv = [sys.executable, "-m", "trainer", "--compile-only", "--compile-topology", tpu.jax_topology,
            "--compile-chip-bytes", str(tpu.hbm_bytes_per_chip), *extra, "--no-compile-fewest-slices"]
    note(f"check-fit: starting python -m trainer --compile-only for {spec.num_slices} x {tpu.name} "
         f"({tpu.jax_topology}); it imports jax, then says what it compiles and about how long it takes")
    code, out, err = run_relaying(argv, {**os.environ, **dict(env)}, note, COMPILE_TIMEOUT_S)
    if code is None:
        raise UsageError(f"--check-fit: compiling the step for {tpu.jax_topology} took over "
                         f"{COMPILE_TIMEOUT_S:g} s; drop --check-fit to submit unchecked")
    if code != 0:
        errors = [line for line in err if line.startswith("error: ")]
        why = errors[0][len("error: "):] if errors else ([line for line in err if line.strip()] or ["no output"])[-1]
        if code == 2:  # the trainer refused the settings, or XLA the step: its own line
            raise UsageError(f"--check-fit: {why[:600]}")
        raise UsageError(f"--check-fit: python -m trainer --compile-only exited {code}: {why[:500]}")
    try:
        report = json.loads((out.strip().splitlines() or [""])[-1])
        report["bytes_per_device"]  # noqa: B018 - a report without it is no report of the trainer's
    except (ValueError, TypeError, KeyError):
        raise UsageError("--check-fit: python -m trainer --compile-only printed no report of its own; drop "
                         "--check-fit") from None
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
