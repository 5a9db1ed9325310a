"""Benchmark: what a fresh process pays before the trainer's first step, in CPU seconds.

Every trainer start pays it: each pod a JobSet restarts, each process of a multi-controller group, each
`elxpk local run` slice process, and the test suite's few hundred trainer runs. Measured as each child's own
user + system seconds (os.wait4), the median of --runs fresh interpreters, against the baseline in the same
run: an interpreter that imports numpy only.

    .venv/bin/python bench/bench_import.py
    .venv/bin/python bench/bench_import.py --runs 9

The rows: `import ml_dtypes` (jax's dtypes; 0.7.0 took 0.55 s here, 0.6.0 8 ms, so pyproject.toml keeps
it below 0.7), `import jax`, the trainer's own imports (trainer.elastic.loop), and a whole 2-step run of the
micro model (`python -m trainer`, jax's compilation cache off, so it compiles as a first start does).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MICRO = ["--d-model", "128", "--n-layers", "2", "--n-heads", "4", "--d-ff", "512", "--seq-len", "32",
         "--vocab-size", "256"]
ML_DTYPES_CEILING_S = 0.1  # what it costs when it is not the 0.7.0 regression, with room


def cpu_seconds(argv: list[str], cwd: str) -> float:
    """The child's own CPU seconds (user + system), its exit checked."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JAX_ENABLE_COMPILATION_CACHE": "false",
           "JAX_PLATFORMS": "cpu"}
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}: {err[-500:]}")
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="fresh processes per row (median)")
    args = parser.parse_args()
    py = sys.executable
    with tempfile.TemporaryDirectory(prefix="bench-import-") as tmp:
        rows = {
            "import numpy (baseline)": [py, "-c", "import numpy"],
            "import ml_dtypes": [py, "-c", "import numpy, ml_dtypes"],
            "import jax": [py, "-c", "import jax"],
            "import trainer.elastic.loop": [py, "-c", "import trainer.elastic.loop"],
            "python -m trainer, 2 micro steps": [py, "-m", "trainer", "--steps", "2", "--checkpoint-period", "2",
                                                  *MICRO],
        }
        medians = {}
        for name, argv in rows.items():
            samples = []
            for i in range(args.runs):
                run_argv = argv + ["--run-dir", str(Path(tmp) / f"run-{i}")] if "trainer" in argv else argv
                samples.append(cpu_seconds(run_argv, tmp))
            medians[name] = statistics.median(samples)
    import ml_dtypes  # the version the rows ran with

    base = medians["import numpy (baseline)"]
    print(f"ml_dtypes {ml_dtypes.__version__}; median of {args.runs} fresh processes, CPU seconds")
    for name, cpu in medians.items():
        print(f"  {name:36s} {cpu:6.2f} s  {cpu / base:6.1f}x the baseline")
    extra = medians["import ml_dtypes"] - base
    verdict = "ok" if extra <= ML_DTYPES_CEILING_S else "REGRESSED (see pyproject.toml's ml_dtypes pin)"
    print(f"ml_dtypes import: {extra:.3f} s over numpy's, ceiling {ML_DTYPES_CEILING_S} s: {verdict}")


if __name__ == "__main__":
    main()
