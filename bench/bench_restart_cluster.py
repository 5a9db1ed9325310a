"""Benchmark: a restart on the test cluster (tools/testcluster), with the run's compilation cache and without.

The README's shape ("Try the cluster verbs without a cloud": 2 slices of v4-8, `--no-pathways`, the
bundled trainer, `--model micro`, checkpoints on gs:// every 20 steps) is created through the `elxpk`
console script twice per --runs, in turns (each kind first every other run): once as rendered (the
compilation cache on by default, beside the checkpoints on gs://) and once with `--compilation-cache-dir
off` (the baseline, in the same run). The last slice (1; 0 with `--num-slices 1`) is killed once each
(`kill-slice --slice 1 --mode delete --yes`) after checkpoint 20 committed; the real JobSet controller
restarts the group (a lone slice's Job replaces its pod), whose new processes restore the checkpoint and
compile the step (or load it from the cache the first attempt wrote). Read, from the trainer's own records
on gs:// and the restarted pods' status:

- kill -> next step: `kill-slice` returned -> the end of the first step after the restore;
- how each process of the restarted group made its step (its start-up timeline: deserialized, cache_hit
  or compiled), and the p95 of kill -> next step over the runs;
- start -> first step: the restarted group's last container start (the API's `startedAt`, whole seconds,
  so up to 1 s too long) -> that step; split into start -> run_started (python, jax and the
  jax.distributed group), the restore, the step's compile (restore_done's compile_s) and the rest.

Once the restarted group has stepped the workload is deleted (the rest of its 600 steps measures nothing).
The machine's load is printed with the figures: every pod is a process of this machine.

    .venv/bin/python tools/testcluster up --dir RUN --process-pools v4-8:2
    .venv/bin/python bench/bench_restart_cluster.py --cluster RUN [--runs 1] [--model micro]
    .venv/bin/python tools/testcluster down --dir RUN
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from elxpk.runs.chunked_run import chunk_lines  # noqa: E402
from elxpk_storage.run_records import listing, ordered_chunks, run_dir_beside, store  # noqa: E402
from tools.testcluster.kubeapi import PODS, LocalCluster  # noqa: E402

ELXPK = Path(sys.executable).with_name("elxpk")
KILL_AFTER = 20  # the README's first checkpoint: the restart has it to restore
KINDS = (("with_cache", ()), ("without_cache", ("--compilation-cache-dir=off",)))


def records(run: str, kind: str) -> list[dict[str, Any]]:
    """The complete lines of a gs:// run dir's chunks of `kind`, in writing order (the reader `report` uses)."""
    fs, root = store(run)
    out = []
    for _, line, _ in chunk_lines(fs, ordered_chunks(listing(fs, root), kind), max_lines=10**6):
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:  # a torn last line of a killed writer
            continue
    return out


def wait_for(what: str, check, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(1)
    raise SystemExit(f"bench: no {what} within {timeout:.0f} s")


def restarted(run: str) -> tuple[dict, dict, dict] | None:
    """(run_started, restore_done, first step) of the restarted group, once it has stepped."""
    events = records(run, "events")
    starts = [i for i, e in enumerate(events) if e["event"] == "run_started"]
    if len(starts) < 2:
        return None
    later = events[starts[1]:]
    restores = [e for e in later if e["event"] == "restore_done"]
    if not restores:
        return None
    steps = [m for m in records(run, "metrics") if m["time"] > restores[0]["time"]]
    return (later[0], restores[0], min(steps, key=lambda m: m["time"])) if steps else None


def container_starts(cluster: LocalCluster, name: str, since: float) -> list[float]:
    """Unix seconds each container of the workload started at or after `since` (the API's startedAt, whole
    seconds): the restarted group's, whether the JobSet restarted it or, for a lone slice, its Job replaced
    the pod."""
    out = []
    for pod in cluster.items(PODS.format(ns="default"), labelSelector=f"jobset.sigs.k8s.io/jobset-name={name}"):
        for status in pod["status"].get("containerStatuses", []):
            state = status["state"].get("running") or status["state"].get("terminated") or {}
            if state.get("startedAt"):
                out.append(datetime.datetime.fromisoformat(state["startedAt"].replace("Z", "+00:00")).timestamp())
    return [t for t in out if t >= int(since)]


def elxpk(cluster: LocalCluster, *argv: str) -> subprocess.CompletedProcess:
    """A cluster verb of the console script, as a user runs it (its env: the emulator, no KUBECONFIG)."""
    return subprocess.run([str(ELXPK), *argv, "--kubeconfig", str(cluster.kubeconfig)], capture_output=True,
                          text=True, check=False)


def one_restart(cluster: LocalCluster, bucket: str, kind: str, flags: tuple[str, ...], model: str,
                slices: int) -> dict[str, Any]:
    name = f"restart-{'cache' if kind == 'with_cache' else 'nocache'}-{uuid.uuid4().hex[:4]}"
    checkpoints = f"gs://{bucket}/{name}/ckpt"
    run = run_dir_beside(checkpoints) or ""
    created = elxpk(cluster, "workload", "create", f"--workload={name}", "--tpu-type=v4-8", f"--num-slices={slices}",
                    "--no-pathways", "--max-restarts=3", "--trainer", "--docker-image=elxpk-trainer:dev",
                    f"--model={model}", "--steps=600", f"--checkpoint-dir={checkpoints}",
                    f"--checkpoint-period={KILL_AFTER}", *flags,
                    # metrics uploaded each second, so the first step after the restart is seen soon
                    "--command", "--record-flush-seconds=1")
    if created.returncode != 0:
        raise SystemExit(f"workload create: exit {created.returncode}: {created.stderr.strip()[-800:]}")
    try:
        first = wait_for(f"checkpoint {KILL_AFTER} of {name}", lambda: [
            e for e in records(run, "events") if e["event"] == "checkpoint_committed" and e["step"] >= KILL_AFTER],
            timeout=600)[0]
        asked = time.time()
        killed = elxpk(cluster, "workload", "kill-slice", name, "--slice", str(slices - 1), "--mode", "delete", "--yes")
        killed_at, load_at_kill = time.time(), round(os.getloadavg()[0], 2)
        if killed.returncode != 0:
            raise SystemExit(f"kill-slice: exit {killed.returncode}: {killed.stderr.strip()[-800:]}")
        started, restore, step = wait_for(f"step of {name} after its restart", lambda: restarted(run), timeout=900)
        pods = container_starts(cluster, name, asked)
        if not pods:
            raise SystemExit(f"{name}: no container started after the kill reports its start")
        events = records(run, "events")
        cold = [e for e in events if e["event"] == "restore_done"][0]
        # How each process of the restarted group made its step (its start-up timeline's executable_ready):
        # "deserialized" or "cache_hit" is a load, "compiled" a miss.
        made = {e.get("process", 0): e.get("how") for e in events
                if e["event"] == "startup" and e.get("phase") == "executable_ready" and e["time"] >= killed_at}
    finally:
        elxpk(cluster, "workload", "delete", name, "--yes")
    start = max(pods)
    return {
        "workload": name, "killed_after_checkpoint": first["step"], "restored_step": restore["step"],
        "kill_slice_s": round(killed_at - asked, 2),
        "kill_to_next_step_s": round(step["time"] - killed_at, 2),
        "start_to_first_step_s": round(step["time"] - start, 2),
        "start_to_run_started_s": round(started["time"] - start, 2),
        "run_started_to_restored_s": round(restore["time"] - started["time"], 2),
        "compile_s": restore.get("compile_s"),
        "restored_to_first_step_s": round(step["time"] - restore["time"], 2),
        "first_attempt_compile_s": cold.get("compile_s"),
        "containers_started_within_s": round(max(pods) - min(pods), 2),
        "load_1m_at_kill": load_at_kill,
        "executable_by_process": {str(k): v for k, v in sorted(made.items())},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cluster", required=True, help="the run directory of `tools/testcluster up --dir`")
    parser.add_argument("--runs", type=int, default=1, help="restarts of each kind, in turns (median reported)")
    parser.add_argument("--model", default="micro", help="the trainer's preset (the README's: micro)")
    parser.add_argument("--num-slices", type=int, default=2, help="slices of one v4-8 VM each (the README's: 2); "
                        "the last one is killed")
    args = parser.parse_args(argv)
    cluster = LocalCluster.from_run_dir(Path(args.cluster))
    host = cluster.storage_emulator_host
    # elxpk's and this process's gs:// are the cluster's emulator; no KUBECONFIG of the user's.
    os.environ.update(STORAGE_EMULATOR_HOST=host, TENSORSTORE_GCS_HTTP_URL=host, GOOGLE_AUTH_TOKEN_FOR_TESTING="anon")
    os.environ.pop("KUBECONFIG", None)
    bucket = f"bench-restart-{uuid.uuid4().hex[:8]}"
    made = requests.post(f"{host}/storage/v1/b", json={"name": bucket}, timeout=30)
    if made.status_code != 200:
        raise SystemExit(f"bucket {bucket}: {made.status_code} {made.text[:300]}")
    load_before = os.getloadavg()
    rows: dict[str, list[dict]] = {kind: [] for kind, _ in KINDS}
    for i in range(args.runs):
        # In turns, each kind first every other time: the load of the helpers around changes in between.
        for kind, flags in KINDS if i % 2 == 0 else KINDS[::-1]:
            rows[kind].append(one_restart(cluster, bucket, kind, flags, args.model, args.num_slices))
    median = {kind: {key: statistics.median(r[key] for r in runs)
                     for key in ("kill_to_next_step_s", "start_to_first_step_s")} for kind, runs in rows.items()}
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                            check=False).stdout.strip()
    print(json.dumps({
        "date": datetime.date.today().isoformat(), "commit": commit,
        "command": " ".join(["bench/bench_restart_cluster.py", *(argv if argv is not None else sys.argv[1:])]),
        "shape": f"{args.num_slices} slice(s) of v4-8 (--no-pathways), --model {args.model}, checkpoint period {KILL_AFTER}, "
                 "checkpoints and records on gs:// (fake-gcs-server)",
        "load_average_1_5_15": {"before": [round(x, 2) for x in load_before],
                                "after": [round(x, 2) for x in os.getloadavg()]},
        "cpus": os.cpu_count(), "runs": args.runs, "restarts": rows, "median": median,
        "with_cache_every_process_loads_or_hits": all(
            len(r["executable_by_process"]) == args.num_slices
            and set(r["executable_by_process"].values()) <= {"deserialized", "cache_hit"} for r in rows["with_cache"]),
        "kill_to_next_step_p95_s": {kind: round(statistics.quantiles([r["kill_to_next_step_s"] for r in runs], n=20,
                                                                     method="inclusive")[-1], 2)
                                    for kind, runs in rows.items() if len(runs) > 1},
        "ratio_with_to_without": {key: round(median["with_cache"][key] / median["without_cache"][key], 3)
                                  for key in ("kill_to_next_step_s", "start_to_first_step_s")},
    }, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
