"""Benchmark: what opening the chip costs a new process, and which of libtpu's settings change it (issue 49).

A restart's longest phase on a TPU v5e is opening the chip (`devices_open` in its start-up timeline). Each
variant below is a fresh `python -c "import jax; jax.devices()"`, timed from its launch: the import of jax,
then the backend's first `jax.devices()`, then the exit. Variants:
- `default`: the machine's environment as it is;
- `skip_mds`: libtpu told the topology of a one-chip host and not to ask the metadata server for it
  (TPU_SKIP_MDS_QUERY and the TPU_* topology variables, as GKE's TPU device plugin hands a container them);
- `platform_tpu`: JAX_PLATFORMS=tpu, no CPU backend beside it;
- `premapped_<MiB>m`: libtpu's premapped host buffer (TPU_PREMAPPED_BUFFER_SIZE, 4 GiB by default) made
  smaller: mapping it is most of the open on a host without transparent huge pages.
With --variants, only those. With --log, one more run (of --log-variant) keeps libtpu's own log (TPU_STDERR_LOG_LEVEL=0) under --out's folder, to
read where the seconds go. Runs --runs times each, in turns, and reports medians.

    python3 bench/bench_chip_open.py --runs 2 --out $OUT/chip-open.json --log
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

_PROBE = ("import time, sys; t0 = time.time(); import jax; t1 = time.time(); d = jax.devices(); t2 = time.time(); "
          "print(t0, t1, t2, len(d), d[0].device_kind, d[0].platform, flush=True)")
_ONE_CHIP = {"TPU_SKIP_MDS_QUERY": "1", "TPU_ACCELERATOR_TYPE": "v5litepod-1", "TPU_WORKER_ID": "0",
             "TPU_WORKER_HOSTNAMES": "localhost", "TPU_HOST_BOUNDS": "1,1,1", "TPU_CHIPS_PER_HOST_BOUNDS": "1,1,1"}
_PREMAPPED = "TPU_PREMAPPED_BUFFER_SIZE"
VARIANTS = {"default": {}, "skip_mds": _ONE_CHIP, "platform_tpu": {"JAX_PLATFORMS": "tpu"},
            **{f"premapped_{size >> 20}m": {_PREMAPPED: str(size)} for size in (2**30, 2**29, 2**28)}}


def _once(extra: dict[str, str], log: Path | None = None) -> dict:
    env = {**os.environ, **extra}
    if log is not None:
        env.update(TPU_STDERR_LOG_LEVEL="0", TPU_MIN_LOG_LEVEL="0", TF_CPP_MIN_LOG_LEVEL="0")
    launched = time.time()
    done = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, timeout=180)
    ended = time.time()
    if log is not None:
        log.write_text(done.stderr)
    if done.returncode != 0 or not done.stdout.strip():
        return {"exit": done.returncode, "stderr_tail": done.stderr[-1500:]}
    t0, t1, t2, count, kind, platform = done.stdout.split(maxsplit=5)
    return {"exit": 0, "interpreter_s": round(float(t0) - launched, 3), "import_jax_s": round(float(t1) - float(t0), 3),
            "devices_s": round(float(t2) - float(t1), 3), "launch_to_devices_s": round(float(t2) - launched, 3),
            "exit_s": round(ended - float(t2), 3), "devices": int(count), "kind": kind, "platform": platform.strip()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--log", action="store_true", help="keep one run's libtpu log beside --out")
    parser.add_argument("--log-variant", default="default", choices=sorted(VARIANTS))
    parser.add_argument("--variants", default=",".join(VARIANTS), help="which, comma-separated")
    args = parser.parse_args(argv)
    chosen = {name: VARIANTS[name] for name in args.variants.split(",") if name}
    rows: dict[str, list[dict]] = {name: [] for name in chosen}
    for _ in range(args.runs):
        for name, extra in chosen.items():
            rows[name].append(_once(extra))
            time.sleep(2)  # the chip can refuse a program started just after another ended
    if args.log and args.out is not None:
        _once(VARIANTS[args.log_variant], args.out.with_name("chip-open-libtpu.log"))
    thp = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    result = {
        "environment": {k: v for k, v in os.environ.items() if k.startswith(("TPU_", "LIBTPU", "JAX_", "XLA_"))},
        "transparent_hugepage": thp.read_text().strip() if thp.exists() else None,
        "runs": rows,
        "median_launch_to_devices_s": {name: round(statistics.median(r["launch_to_devices_s"] for r in runs), 3)
                                       for name, runs in rows.items() if all(r["exit"] == 0 for r in runs)},
    }
    text = json.dumps(result, indent=1)
    if args.out is not None:
        args.out.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
