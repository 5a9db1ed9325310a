"""Peak memory of `elxpk report` and `elxpk compare` on long runs, against the per-step records they replaced.

Generates run directories as the trainer writes them (each line `json.dumps` of a typed `Metric` or event,
elxpk_contract/records.py): full float times and step times, a cosine-ish learning rate, 4 slices, a
checkpoint pair of events every 100 steps, and a slice lost every 20,000 steps, after which the run restores
the last checkpoint and redoes the 37 steps since (the redone steps are written again, as the trainer does).
Then runs, each in its own process and measured by its own peak RSS (wait4) and wall time:

- `records (before)`: what report held before the columns: every step a `Metric` object (read as a stream,
  one line at a time, as the reader did), and the per-step dicts report built from them
  (the record that counts per step, the last index per step);
- `load_run (now)`: today's reader, the steps as columns (elxpk/runs/step_columns.py);
- `elxpk report A --no-png -o json`, `elxpk report A --png FILE` (the plot of every step: matplotlib) and
  `elxpk compare A B`, the commands as users run them, with the caps as shipped (a run past them is
  refused, and says so here);
- `report (chunks)`: `elxpk report` of the same run as a `--run-dir gs://...` writes it (append-only chunks,
  elxpk_storage/run_records.py: CHUNK_LINES lines each, what 30 s of 0.5-s steps makes, two writers), read
  from a local copy through fsspec's local file system, the code path gcsfs takes for gs://.

Bytes per step are over the same measurement on a 10-step run in the same bench run (the imports, not the
steps). Prints MB, bytes per step and seconds; nothing is asserted.

    python bench/bench_runs_memory.py [--steps 100000,2000000] [--measure "load_run (now),report (chunks)"]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from elxpk_contract.records import Metric, RunInfo, make_event

BEFORE = """
import json, sys
from elxpk_contract.records import parse_metric
records = []
with open(sys.argv[1] + "/metrics.jsonl", encoding="utf-8") as handle:
    for line in handle:
        records.append(parse_metric(json.loads(line)))
records = tuple(records)
final = {}
for r in records:
    final[r.step] = r
last_index = {r.step: i for i, r in enumerate(records)}
"""
NOW = "import sys\nfrom elxpk.runs.rundir import load_run\nrun = load_run(sys.argv[1])\nrun.final_indices()\n"
CLI = "import sys\nfrom elxpk.cli.main import main\nsys.argv[0] = 'elxpk'\nmain()\n"
CHECKPOINT_EVERY, FAIL_EVERY = 100, 20_000
CHUNK_LINES, WRITER_LINES = 60, 1_000_000


def write_chunks(run: Path, into: Path) -> int:
    """`run` (metrics.jsonl, events.jsonl, run.json) as the chunks a gs:// run dir holds, a new writer every
    WRITER_LINES lines (a restarted process); the number of chunks written."""
    from elxpk_storage.run_records import RECORDS, chunk_name, writer_name

    written = generation = 0
    for kind in ("metrics", "events"):
        with open(run / f"{kind}.jsonl", encoding="utf-8") as lines:
            block: list[str] = []
            number = -1
            for number, line in enumerate(lines):
                block.append(line)
                if len(block) == CHUNK_LINES:
                    _put(into / RECORDS / writer_name(1 + number // WRITER_LINES, 0), chunk_name(kind, written), block)
                    block, written = [], written + 1
            generation = max(generation, 1 + number // WRITER_LINES)
            if block:
                _put(into / RECORDS / writer_name(1 + number // WRITER_LINES, 0), chunk_name(kind, written), block)
                written += 1
    (into / RECORDS / writer_name(generation, 0) / "run.json").write_text((run / "run.json").read_text())
    return written


def _put(writer: Path, name: str, lines: list[str]) -> None:
    writer.mkdir(parents=True, exist_ok=True)
    (writer / name).write_text("".join(lines), encoding="utf-8")


def write_run(root: Path, steps: int) -> tuple[int, int]:
    """A run of `steps` steps that count; (records written, redone records)."""
    root.mkdir(parents=True)
    t = 1_764_600_000.0
    slices = (0, 1, 2, 3)
    written = redone = 0
    with open(root / "metrics.jsonl", "w") as metrics, open(root / "events.jsonl", "w") as events:

        def event(name: str, step: int | None, **details) -> None:
            events.write(json.dumps(make_event(name, t, step, **details).to_json()) + "\n")

        event("run_started", 0, slices=list(slices))
        step, failed_at = 0, set()
        while step < steps:
            if step % FAIL_EVERY == FAIL_EVERY - 63 and step not in failed_at:  # a slice lost: back to the checkpoint
                failed_at.add(step)
                event("failure_detected", step, slices_lost=[1], kind="slice_down", cause="slice_lost")
                t += 30.0
                event("slices_ready", step, slices=list(slices))
                restored = step - step % CHECKPOINT_EVERY
                event("restore_started", restored, slices=list(slices))
                t += 12.0
                event("restore_done", restored, from_checkpoint=True, compile_s=0.0)
                redone += step - restored
                step = restored
            step_time = 0.5 + 1e-4 * (step % 97) + 1e-9 * step
            t += step_time + 0.0123456789
            lr = 3e-4 * 0.5 * (1 + math.cos(math.pi * step / steps))
            loss = float(2.0 + 1.0 / (1 + step) + 1e-7 * (step % 13)).hex()
            record = Metric(step=step, loss=loss, lr=lr, step_time_s=step_time,
                            examples=(step * 256, step * 256 + 256), slices=slices, time=t)
            metrics.write(json.dumps(record.to_json()) + "\n")
            written += 1
            step += 1
            if step % CHECKPOINT_EVERY == 0:
                event("checkpoint_saved", step, blocking_s=0.25)
                event("checkpoint_committed", step, commit_s=3.0)
        event("run_finished", steps, attempts=1, recoveries=len(failed_at))
    info = RunInfo(config={"num_slices": 4}, fingerprint="f", fingerprint_fields={}, versions={},
                   started_at=1_764_600_000.0)
    (root / "run.json").write_text(json.dumps(info.to_json()))
    return written, redone


def measure(code: str, *args: str) -> tuple[float, float, int, str]:
    """Peak RSS in MB, wall seconds, exit code and the last error line of `python -c code args`."""
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    err = proc.stderr.read().decode() if proc.stderr else ""
    _, status, usage = os.wait4(proc.pid, 0)
    return (usage.ru_maxrss / 1024, time.perf_counter() - started, os.waitstatus_to_exitcode(status),
            (err.strip().splitlines() or [""])[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", default="100000,2000000")
    parser.add_argument("--measure", default="", help="comma-separated names to measure (default: all)")
    args = parser.parse_args()
    wanted = {m.strip() for m in args.measure.split(",") if m.strip()}
    with tempfile.TemporaryDirectory() as tmp:
        base: dict[str, float] = {}  # each measurement on a 10-step run: the imports, not the records
        for steps in (10, *(int(s) for s in args.steps.split(","))):
            a, b = Path(tmp, f"a{steps}"), Path(tmp, f"b{steps}")
            records, redone = write_run(a, steps)
            write_run(b, steps)
            chunks = write_chunks(a, Path(tmp, f"c{steps}"))
            size = (a / "metrics.jsonl").stat().st_size
            if steps > 10:
                print(f"{steps:>9,} steps ({records:,} records, {redone:,} redone): metrics.jsonl "
                      f"{size / 2**20:.0f} MiB ({size / records:.0f} bytes/record); {chunks:,} chunks", flush=True)
            for name, code, argv, runs in (("records (before)", BEFORE, [str(a)], 1),
                                           ("load_run (now)", NOW, [str(a)], 1),
                                           ("elxpk report", CLI, ["report", str(a), "--no-png", "-o", "json"], 1),
                                           ("report + png", CLI, ["report", str(a), "--png", f"{tmp}/r.png"], 1),
                                           ("elxpk compare", CLI, ["compare", str(a), str(b)], 2),
                                           ("report (chunks)", CLI, ["report", f"{tmp}/c{steps}", "--no-png", "-o",
                                                                     "json"], 1)):
                if wanted and name not in wanted:
                    continue
                mb, wall, code_, err = measure(code, *argv)
                if code_ != 0:
                    print(f"    {name:<17} exit {code_}: {err}", flush=True)
                if steps == 10:
                    base[name] = mb
                    print(f"baseline (10 steps) {name:<17} peak {mb:6.0f} MB", flush=True)
                    continue
                per_step = (mb - base[name]) * 2**20 / (runs * steps)
                print(f"    {name:<17} peak {mb:6.0f} MB  {per_step:5.0f} bytes/step over its baseline  "
                      f"{wall:6.1f} s", flush=True)
            for run in (a, b, Path(tmp, f"c{steps}")):
                shutil.rmtree(run)


if __name__ == "__main__":
    main()
