"""Benchmark: `elxpk workload create --dry-run` against `xpk workload create-pathways --dry-run`.

Same inputs for both (xpk's own golden flags, with a fixed --docker-image so xpk builds no image).
Both run as their real console scripts, alternately, after one warm-up each; the figures are the median
of --runs runs of wall time and each run's own peak RSS (os.wait4). Also checks that elxpk's render
path imported no jax, kubernetes or google.* module, and diffs the two manifests' structure.

    .venv/bin/python bench/bench_render.py            # installs xpk into bench/out/venv-xpk on first use
    .venv/bin/python bench/bench_render.py --runs 9
    .venv/bin/python bench/bench_render.py --baseline /tmp/base   # also time another checkout of elxpk

`--baseline DIR` runs that checkout's launcher (DIR first on PYTHONPATH, same interpreter and packages)
alongside, e.g. a `git worktree add /tmp/base HEAD~1`, to show what a change did to start-up.

Targets (issue #4): elxpk wall time <= 15% of xpk's, peak RSS <= 50% of xpk's. The bench is a check: it
exits 1 when either is missed (or the render path imported a forbidden module), so a start-up regression fails
where it is run, not in a later reading of its table. Time it on a quiet machine: xpk's wall time swings most
under load, and the CPU-time ratio it prints beside it is the steadier figure.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"
XPK_VENV = OUT / "venv-xpk"
XPK_VERSION = "1.16.0"
FLAGS = ["--project=golden-project", "--zone=us-central1-a", "--cluster=golden-cluster",
         "--workload=golden-workload", "--command", "bash hello", "--tpu-type=v5p-8", "--num-slices=1",
         "--docker-image=python:3.10"]
FORBIDDEN = ("jax", "jaxlib", "kubernetes", "google", "orbax")
WALL_TARGET, RSS_TARGET = 0.15, 0.50


def ensure_xpk(version: str) -> Path:
    """xpk from PyPI in the bench's own venv (git-ignored), installed once."""
    xpk = XPK_VENV / "bin" / "xpk"
    if not xpk.exists():
        print(f"installing xpk=={version} into {XPK_VENV} ...", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(XPK_VENV)], check=True)
        subprocess.run([str(XPK_VENV / "bin" / "python"), "-m", "pip", "install", "-q", f"xpk=={version}"],
                       check=True)
    return xpk


def run_once(argv: list[str], env: dict[str, str]) -> tuple[float, int, str, str, float]:
    """Wall seconds, peak RSS in bytes (this child only), stdout, stderr, CPU seconds (user + sys)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=err, env=env, stdin=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    if proc.returncode != 0:
        raise SystemExit(f"{argv[0]} failed ({proc.returncode}):\n{stderr[-2000:]}")
    return wall, usage.ru_maxrss * 1024, stdout, stderr, usage.ru_utime + usage.ru_stime


def imported_modules(importtime_stderr: str) -> set[str]:
    names = set()
    for line in importtime_stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip())
    return names


def xpk_manifest(stdout: str) -> dict:
    """The JobSet xpk printed as its dry-run 'Temp file ... content:' block."""
    for block in stdout.split("[XPK] Temp file (")[1:]:
        body = block.split("content: \n", 1)[1].split("\n[XPK] ", 1)[0]
        doc = yaml.safe_load(body)
        if isinstance(doc, dict) and doc.get("kind") == "JobSet":
            return doc
    raise SystemExit("no JobSet found in xpk's dry-run output")


def paths(node: object, prefix: str = "") -> dict[str, object]:
    """Key path -> value of a manifest (containers are None), list items keyed by `name` where they have one."""
    found: dict[str, object] = {prefix: None if isinstance(node, (dict, list)) else node} if prefix else {}
    if isinstance(node, dict):
        for key, value in node.items():
            found.update(paths(value, f"{prefix}.{key}" if prefix else str(key)))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            tag = value.get("name", i) if isinstance(value, dict) else i
            found.update(paths(value, f"{prefix}[{tag}]"))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="timed runs of each tool (>= 5)")
    parser.add_argument("--xpk-version", default=XPK_VERSION)
    parser.add_argument("--baseline", type=Path, help="another elxpk checkout to time alongside")
    args = parser.parse_args()
    runs = max(5, args.runs)
    xpk = ensure_xpk(args.xpk_version)
    elxpk = Path(sys.executable).parent / "elxpk"
    home = Path(tempfile.mkdtemp(prefix="bench-home-"))  # xpk reads ~/.config/xpk; start both from empty
    base_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LANG": "C.UTF-8",
                "XDG_CACHE_HOME": str(home / ".cache")}
    xpk_env = {**base_env, "XPK_TESTER": "false", "XPK_VERSION_OVERRIDE": "v0.0.0",
               "TELEMETRY_TRASH_EXECUTION": "true", "TELEMETRY_ENABLED": "false"}
    commands = {
        # PYTHONPATH: this checkout, not the one the venv's editable install points at (a git worktree shares
        # the main checkout's venv, whose `elxpk` script would otherwise time the main checkout's code).
        "elxpk": ([str(elxpk), "workload", "create", *FLAGS, "--dry-run"], {**base_env, "PYTHONPATH": str(ROOT)}),
        "xpk": ([str(xpk), "workload", "create-pathways", *FLAGS, "--dry-run"], xpk_env),
    }
    if args.baseline:
        main_code = "import sys; from elxpk.cli.main import main; sys.exit(main())"
        # -P: without it `-c` puts the working directory (this checkout) first on sys.path, ahead of DIR.
        commands["base"] = ([sys.executable, "-P", "-c", main_code, "workload", "create", *FLAGS, "--dry-run"],
                            {**base_env, "PYTHONPATH": str(args.baseline.resolve())})
    samples: dict[str, list[tuple[float, int, float]]] = {name: [] for name in commands}
    outputs: dict[str, str] = {}
    for name, (argv, env) in commands.items():  # warm-up: .pyc files, the page cache
        outputs[name] = run_once(argv, env)[2]
    for _ in range(runs):
        for name, (argv, env) in commands.items():
            wall, rss, _, _, cpu = run_once(argv, env)
            samples[name].append((wall, rss, cpu))

    med = {n: tuple(statistics.median(x[i] for x in s) for i in range(3)) for n, s in samples.items()}
    load = os.getloadavg()[0]
    print(f"workload create --dry-run, same inputs (v5p-8 x 1, xpk golden flags), median of {runs} runs "
          f"({os.cpu_count()} CPUs, load average {load:.1f})")
    print(f"{'tool':<7}{'wall ms':>10}{'min ms':>10}{'max ms':>10}{'CPU ms':>10}{'peak RSS MiB':>15}")
    for name, s in samples.items():
        walls = [x[0] * 1000 for x in s]
        print(f"{name:<7}{med[name][0] * 1000:>10.0f}{min(walls):>10.0f}{max(walls):>10.0f}"
              f"{med[name][2] * 1000:>10.0f}{med[name][1] / 2**20:>15.1f}")
    wall_ratio = med["elxpk"][0] / med["xpk"][0]
    rss_ratio = med["elxpk"][1] / med["xpk"][1]
    print(f"CPU time ratio elxpk/xpk: {med['elxpk'][2] / med['xpk'][2]:.1%} (less sensitive to a busy machine)")
    print(f"wall ratio elxpk/xpk: {wall_ratio:.1%} (target <= {WALL_TARGET:.0%}) "
          f"{'ok' if wall_ratio <= WALL_TARGET else 'MISSED'}")
    print(f"peak RSS ratio elxpk/xpk: {rss_ratio:.1%} (target <= {RSS_TARGET:.0%}) "
          f"{'ok' if rss_ratio <= RSS_TARGET else 'MISSED'}")
    if "base" in med:
        print(f"elxpk/baseline ({args.baseline}): wall {med['elxpk'][0] / med['base'][0]:.1%}, "
              f"CPU {med['elxpk'][2] / med['base'][2]:.1%}, peak RSS {med['elxpk'][1] / med['base'][1]:.1%}")

    argv, env = commands["elxpk"]
    stderr = run_once(argv, {**env, "PYTHONPROFILEIMPORTTIME": "1"})[3]
    modules = imported_modules(stderr)
    bad = sorted(m for m in modules if m.split(".")[0] in FORBIDDEN)
    print(f"elxpk render path: {len(modules)} modules imported; jax/kubernetes/google/orbax: "
          f"{', '.join(bad) if bad else 'none'}")

    ours, theirs = paths(yaml.safe_load(outputs["elxpk"])), paths(xpk_manifest(outputs["xpk"]))
    shared = ours.keys() & theirs.keys()
    changed = sorted(p for p in shared if ours[p] != theirs[p])
    print(f"manifest vs xpk's: {len(shared)} key paths shared, {len(changed)} of them with another value; "
          f"only elxpk: {len(ours.keys() - theirs.keys())}; only xpk: {len(theirs.keys() - ours.keys())}")
    for path in changed:
        print(f"  ~ {path}: xpk {str(theirs[path])[:60]!r} -> elxpk {str(ours[path])[:60]!r}")
    for path in sorted(ours.keys() ^ theirs.keys()):
        print(f"  {'+' if path in ours else '-'} {path}")
    missed = [what for what, ratio, target in (("wall", wall_ratio, WALL_TARGET), ("peak RSS", rss_ratio, RSS_TARGET))
              if ratio > target]
    if missed:
        print(f"FAILED: {' and '.join(missed)} ratio above target", file=sys.stderr)
    return 1 if bad or missed else 0


if __name__ == "__main__":
    sys.exit(main())
