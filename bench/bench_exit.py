"""How often a completed default run exits 0: `python -m trainer` run N times as the container runs it.

Not a timing: a count. Before the live checks' thread was joined, the default run exited 134 in about
1 of 3 tries, and the 4-slice, 1-step shape in 4 of 4 (a background compile still inside XLA when the
interpreter finalized). Prints one line per shape: `exit codes over N tries: {code: count}`.

    python bench/bench_exit.py [--tries 20]
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import tempfile

SHAPES = {
    "default (2 slices x 2 devices, live recovery), 2 steps": ["--steps", "2"],
    "4 slices, 1 step (the compiles outlive the steps)": ["--num-slices", "4", "--steps", "1"],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tries", type=int, default=20)
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS" and not k.startswith("ELXPK_")}
    for name, flags in SHAPES.items():
        codes: collections.Counter[int] = collections.Counter()
        for _ in range(args.tries):
            with tempfile.TemporaryDirectory() as tmp:
                done = subprocess.run([sys.executable, "-m", "trainer", "--run-dir", f"{tmp}/run", *flags],
                                      cwd=tmp, env=env, capture_output=True, text=True, timeout=600)
                codes[done.returncode] += 1
        print(f"{name}: exit codes over {args.tries} tries: {dict(sorted(codes.items()))}", flush=True)


if __name__ == "__main__":
    main()
