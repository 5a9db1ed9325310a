"""Peak memory of `elxpk compare` and `elxpk report` on long runs, against the whole-file reader they replaced.

Generates run directories of 10k, 100k and 1M steps (metrics.jsonl lines as the trainer writes them: full
float times and step times, a cosine-ish learning rate, 4 slices; a checkpoint pair of events every 100
steps), then runs, each in its own process and measured by its own peak RSS (wait4):

- `old read x2`: the reader before streaming (whole text decoded, split, every line a dict, then every dict
  a record, all held), for two runs, as `compare` did;
- `load_run x2`: today's reader for two runs;
- `elxpk compare A B` and `elxpk report A --no-png -o json`.

Runs larger than the run-record caps are read with the caps lifted (in the measured process only), so the
figures say what a cap could be. Prints MB and bytes per step; no timing is asserted.

    python bench/bench_runs_memory.py [--steps 10000,100000,1000000]
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

LIFT = "import elxpk.bounded_read as b; b.RUN_RECORD_BYTES = 1 << 40; b.RUN_RECORDS = b.EVENT_RECORDS = 1 << 40\n"
OLD = LIFT + """
import sys
from elxpk.runs.jsonl import decode_text, parse_lines
from elxpk_contract.records import parse_event, parse_metric
held = []
for root in sys.argv[1:]:
    for name, parse in (("metrics.jsonl", parse_metric), ("events.jsonl", parse_event)):
        with open(f"{root}/{name}", "rb") as handle:
            text = decode_text(handle.read())
        lines = parse_lines(text, strict=True)
        held.append((text, lines, [parse(r) for r in lines.records]))
"""
NEW = LIFT + """
import sys
from elxpk.runs.rundir import load_run
held = [load_run(root) for root in sys.argv[1:]]
"""
CLI = LIFT + "import sys\nfrom elxpk.cli.main import main\nsys.argv[0] = 'elxpk'\nmain()\n"


def write_run(root: Path, steps: int) -> None:
    root.mkdir(parents=True)
    t = 1_764_600_000.0
    with open(root / "metrics.jsonl", "w") as metrics, open(root / "events.jsonl", "w") as events:
        events.write(f'{{"event": "run_started", "time": {t!r}, "step": 0, "source": "trainer", '
                     f'"slices": [0, 1, 2, 3], "backend": "cpu"}}\n')
        for step in range(steps):
            step_time = 0.5 + 1e-4 * (step % 97) + 1e-9 * step
            t += step_time + 0.0123456789
            lr = 3e-4 * 0.5 * (1 + math.cos(math.pi * step / steps))
            loss = float.hex(2.0 + 1.0 / (1 + step) + 1e-7 * (step % 13))
            metrics.write(f'{{"step": {step}, "loss": "{loss}", "lr": {lr!r}, "step_time_s": {step_time!r}, '
                          f'"examples": [{step * 256}, {step * 256 + 256}], "slices": [0, 1, 2, 3], "time": {t!r}}}\n')
            if step % 100 == 99:
                events.write(f'{{"event": "checkpoint_saved", "time": {t!r}, "step": {step + 1}, '
                             f'"source": "trainer", "blocking_s": 0.25}}\n')
                events.write(f'{{"event": "checkpoint_committed", "time": {t + 3!r}, "step": {step + 1}, '
                             f'"source": "trainer", "commit_s": 3.0}}\n')
        events.write(f'{{"event": "run_finished", "time": {t!r}, "step": {steps}, "source": "trainer", '
                     f'"attempts": 1, "recoveries": 0}}\n')
    (root / "run.json").write_text('{"config": {"num_slices": 4}, "fingerprint": "f", "fingerprint_fields": {}, '
                                   '"versions": {}, "started_at": 1764600000.0}')


def peak_mb(code: str, *args: str) -> tuple[float, int]:
    """Peak RSS in MB of `python -c code args`, and its exit code."""
    proc = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode() if proc.stderr else ""
    if proc.returncode not in (0,):
        print(f"    exit {proc.returncode}: {err.strip().splitlines()[-1:] if err else ''}", flush=True)
    return usage.ru_maxrss / 1024, proc.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", default="10000,100000,1000000")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base: dict[str, float] = {}  # each measurement on a 10-step run: the imports, not the records
        for steps in (10, *(int(s) for s in args.steps.split(","))):
            a, b = Path(tmp, f"a{steps}"), Path(tmp, f"b{steps}")
            write_run(a, steps)
            write_run(b, steps)
            size = (a / "metrics.jsonl").stat().st_size
            if steps > 10:
                print(f"{steps:>9,} steps: metrics.jsonl {size / 2**20:.1f} MiB ({size / steps:.0f} bytes/step)",
                      flush=True)
            for name, code, argv in (("old read x2", OLD, [str(a), str(b)]),
                                     ("load_run x2", NEW, [str(a), str(b)]),
                                     ("compare", CLI, ["compare", str(a), str(b)]),
                                     ("report", CLI, ["report", str(a), "--no-png", "-o", "json"])):
                mb, _ = peak_mb(code, *argv)
                if steps == 10:
                    base[name] = mb
                    print(f"baseline (10 steps) {name:<12} peak {mb:7.0f} MB", flush=True)
                    continue
                runs = 2 if name != "report" else 1
                per_step = (mb - base[name]) * 2**20 / (runs * steps)
                print(f"    {name:<12} peak {mb:7.0f} MB  ({per_step:5.0f} bytes/step over its baseline)",
                      flush=True)
            for run in (a, b):
                for f in run.iterdir():
                    f.unlink()
                run.rmdir()


if __name__ == "__main__":
    main()
