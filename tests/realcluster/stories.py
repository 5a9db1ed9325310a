"""The elastic loop end to end on the real control plane (issue #31, part 2): helpers of the story tests.

A story is a workload that `elxpk workload create --trainer` renders, unchanged, onto a process pool of
tools/testcluster (virtual-kubelet nodes whose pods run the trainer as processes here), with its
checkpoints on gs:// of the cluster's fake-gcs-server, read back through the `elxpk` console script
(`status`, `events`, `report`, `compare`), as a user would.

A `Shape` is what differs between the workload shapes (TPU multi-controller here; a GPU shape adds its own
record): the create flags that choose the pool, and the `local run` mode that simulates it.

The run dir: with `records_on_gs` (every story of both shapes) none is given, so each workload writes its
records where `workload create` renders them, inside its gs:// checkpoint directory (CHECKPOINT_DIR/elxpk-run,
as append-only chunks: elxpk_storage/run_records.py), and everything reads them from there, as on GKE with no
shared filesystem. Without it (kept for a test that wants a run dir on this machine) each story gives
`--run-dir` an absolute path here, which every pod of the workload shares, as a filesystem mounted on every
VM would (every pod here is a process of this machine). Records on gs:// are uploaded every RECORD_FLUSH_S:
the stories wait on them (a committed checkpoint before a kill), and the 24 steps of a story take seconds.

The model: `elxpk local run`'s own (elxpk/local/options.py LOCAL_MODEL), passed as trainer flags, so the
same settings run both ways and the losses can be compared bit for bit.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import requests

from elxpk.local.options import LOCAL_MODEL
from elxpk_storage.run_records import newest_run_json, ordered_chunks, run_dir_beside
from tests.realcluster.pod_log_digest import digest, started
from tests.realcluster.test_submit_goldens import ELXPK
from tools.testcluster.kubeapi import LocalCluster

# An image whose repository ends in elxpk-trainer runs its command from this checkout (docs/testing.md).
TRAINER_IMAGE = "registry.testcluster.invalid/team/elxpk-trainer:test"
RECORD_FLUSH_S = 0.5
# Small enough for CI's 2 cores, long enough to show checkpoints, a kill and a resume: a step of the local
# model takes about 0.1 to 1 s here, its compile 15 to 50 s depending on the load.
STEPS = 24
PERIOD = 4


@dataclass(frozen=True)
class Shape:
    """One workload shape: the flags that choose its nodes, and the local run that simulates it."""

    name: str
    create_flags: tuple[str, ...]
    slices: int
    local_mode: str
    processes: int  # the trainer processes of one attempt (one per VM or node)
    container: str = "jax-tpu"  # the rendered container that runs the trainer
    killed_slice: int = 1  # the slice "a slice killed" kills
    one_vm_killed: bool = False  # --mode delete kills one VM of the slice (--vm 1), not the whole slice

    def kill_args(self, mode: str) -> tuple[str, ...]:
        """`kill-slice` arguments of "a slice killed" in `mode` (--vm exists for delete only)."""
        vm = ("--vm", "1") if self.one_vm_killed and mode == "delete" else ()
        return ("--slice", str(self.killed_slice), "--mode", mode, *vm)


TPU_MULTI_CONTROLLER = Shape(
    "tpu-multi-controller",
    # v4-8: the process pool's TPU type (no kwok pool has it), 1 VM of 4 chips per slice.
    ("--tpu-type=v4-8", "--num-slices=2", "--no-pathways"),
    slices=2, local_mode="multi-controller", processes=2)
# xpk's GPU shape: one node group of 2 h100-80gb-8 nodes is ONE slice (16 devices over 2 processes), so "a
# slice killed" is one node of the group under delete (the other is restarted with it) and the whole
# group under evict. No local run simulates it bitwise (test_stories_gpu.py says why): its stories compare
# with its own uninterrupted run on the cluster.
GPU_NODE_GROUP = Shape("gpu-node-group", ("--device-type=h100-80gb-8", "--num-nodes=2"), slices=1, local_mode="",
                       processes=2, container="gpu-image", killed_slice=0, one_vm_killed=True)


def model_flags() -> list[str]:
    """local run's model as `python -m trainer` flags."""
    return [f"--{name.replace('_', '-')}={value}" for name, value in sorted(LOCAL_MODEL.items())]


def jsonl(path: Path) -> list[dict[str, Any]]:
    """The complete lines of a JSONL file that processes may be appending to (a torn last line skipped)."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


class Story:
    """One cluster, one gs:// bucket and a folder of run dirs, shared by a module's stories."""

    elxpk_path = ELXPK

    def __init__(self, cluster: LocalCluster, shape: Shape, root: Path, *, records_on_gs: bool = False) -> None:
        self.cluster = cluster
        self.shape = shape
        self.root = root
        self.records_on_gs = records_on_gs
        self.bucket = f"stories-{uuid.uuid4().hex[:8]}"
        made = requests.post(f"{cluster.storage_emulator_host}/storage/v1/b", json={"name": self.bucket}, timeout=30)
        assert made.status_code in (200, 409), made.text

    def env(self) -> dict[str, str]:
        """elxpk's env: no KUBECONFIG of the user's, the emulator for gs:// (as the pods have it)."""
        env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
        host = self.cluster.storage_emulator_host
        return {**env, "STORAGE_EMULATOR_HOST": host, "TENSORSTORE_GCS_HTTP_URL": host,
                "GOOGLE_AUTH_TOKEN_FOR_TESTING": "test-token"}

    def elxpk(self, *argv: str, timeout: float = 120, cluster_verb: bool = True) -> subprocess.CompletedProcess:
        """The console script, as a user runs it (with --kubeconfig for a cluster verb)."""
        tail = ["--kubeconfig", str(self.cluster.kubeconfig)] if cluster_verb else []
        return subprocess.run([str(ELXPK), *argv, *tail], capture_output=True, text=True, timeout=timeout,
                              env=self.env(), check=False)

    def checkpoint_dir(self, name: str) -> str:
        return f"gs://{self.bucket}/{name}/ckpt"

    def run_dir(self, name: str) -> Path:
        return self.root / name

    def create(self, name: str, *, steps: int = STEPS, checkpoint_dir: str | None = None,
               run_dir: Path | str | None = None, flags: tuple[str, ...] = (),
               trainer_args: tuple[str, ...] = ()) -> Path | str:
        """`workload create --trainer` of this shape; the run dir it writes to (with `records_on_gs` and no
        `run_dir`, none is given: the gs:// one the launcher renders beside the checkpoints)."""
        ckpt = checkpoint_dir or self.checkpoint_dir(name)
        rendered = run_dir is None and self.records_on_gs
        run: Path | str = (run_dir_beside(ckpt) or "") if rendered else (run_dir or self.run_dir(name))
        given = [] if rendered else [f"--run-dir={run}"]
        if isinstance(run, str):
            given.append(f"--record-flush-seconds={RECORD_FLUSH_S}")
        command = " ".join([*given, *model_flags(), *trainer_args])
        created = self.elxpk(
            "workload", "create", f"--workload={name}", *self.shape.create_flags, "--trainer",
            f"--docker-image={TRAINER_IMAGE}", f"--steps={steps}", f"--checkpoint-period={PERIOD}",
            f"--checkpoint-dir={ckpt}", *flags, "--command", command)
        assert created.returncode == 0, created.stderr
        return run

    def wait_for(self, what: str, check: Callable[[], Any], timeout: float = 300) -> Any:
        return self.cluster.wait_for(what, check, timeout=timeout)

    def wait_done(self, name: str, timeout: float = 420) -> subprocess.CompletedProcess:
        """`workload wait --for completed`: exit 0 once Succeeded, 1 once Failed."""
        return self.elxpk("workload", "wait", name, "--for", "completed", "--timeout", f"{int(timeout)}s",
                          timeout=timeout + 60)

    def explain(self, name: str, done: subprocess.CompletedProcess) -> str:
        """What a failed assertion on workload `name` says: `done`'s output, `status --why`, and for each pod
        the lines of its trainer log that say how and why it ended (pod_log_digest.py), so a CI log shows
        why, not only that, a story failed: the cluster and its logs go with the lane."""
        why = self.elxpk("workload", "status", name, "--why")
        tails = "".join(f"\n--- {pod} (started {started(text)}) ---\n{digest(text)}"
                        for pod, text in self.pod_logs(name).items())
        return (f"exit {done.returncode}\n{done.stdout}{done.stderr}\n--- status --why ---\n"
                f"{why.stdout}{why.stderr}{tails}")

    def gs_text(self, name: str, path: str) -> str:
        """An object of workload `name`'s checkpoint dir on gs://, read from the emulator (404: AssertionError)."""
        return self._gs_object(f"{name}/ckpt/{path}")

    def events(self, run: Path | str) -> list[dict[str, Any]]:
        return jsonl(run / "events.jsonl") if isinstance(run, Path) else self._gs_records(run, "events")

    def metrics(self, run: Path | str) -> list[dict[str, Any]]:
        return jsonl(run / "metrics.jsonl") if isinstance(run, Path) else self._gs_records(run, "metrics")

    def gs_names(self, url: str) -> list[str]:
        """The objects under the gs:// folder `url` of this story's bucket (object names, sorted)."""
        prefix = url.removeprefix(f"gs://{self.bucket}/").rstrip("/") + "/"
        listed = requests.get(f"{self.cluster.storage_emulator_host}/storage/v1/b/{self.bucket}/o",
                              params={"prefix": prefix}, timeout=30)
        assert listed.status_code == 200, listed.text[:300]
        return sorted(item["name"] for item in listed.json().get("items", []))

    def _gs_records(self, run: str, kind: str) -> list[dict[str, Any]]:
        """The records of a gs:// run dir's chunks so far, in writing order (elxpk_storage/run_records.py)."""
        out = []
        for chunk in ordered_chunks(self.gs_names(run), kind):
            out += [json.loads(line) for line in self._gs_object(chunk.path).splitlines() if line.strip()]
        return out

    def run_json(self, run: str) -> dict[str, Any]:
        """A gs:// run dir's run.json: its newest writer's (elxpk_storage/run_records.py)."""
        newest = newest_run_json(self.gs_names(run))
        assert newest is not None, f"{run}: no run.json written"
        return dict(json.loads(self._gs_object(newest)))

    def _gs_object(self, name: str) -> str:
        """One object of this story's bucket, read from the emulator (not there: AssertionError)."""
        got = requests.get(f"{self.cluster.storage_emulator_host}/storage/v1/b/{self.bucket}/o/{quote(name, safe='')}",
                           params={"alt": "media"}, timeout=30)
        assert got.status_code == 200, (name, got.status_code, got.text[:300])
        return got.text

    def fired_faults(self, run: Path | str) -> int:
        """The faults the run dir remembers as fired (RUN_DIR/.faults-fired/, trainer/elastic/slices.py)."""
        if isinstance(run, Path):
            return len(list((run / ".faults-fired").iterdir()))
        return len(self.gs_names(f"{run}/.faults-fired"))

    def committed(self, run: Path | str) -> list[int]:
        return [e["step"] for e in self.events(run) if e["event"] == "checkpoint_committed"]

    def local_run_argv(self, run: Path, *faults: str) -> list[str]:
        """`elxpk local run` of the same settings in the mode that simulates this shape (local run's default
        for a shape none simulates bitwise: test_stories_gpu.py): `--kill-slice` each of `faults`, or none
        (`--no-faults`)."""
        kills = [f"--kill-slice={fault}" for fault in faults] or ["--no-faults"]
        mode = ["--mode", self.shape.local_mode] if self.shape.local_mode else []
        return [str(ELXPK), "local", "run", *mode, *kills, f"--steps={STEPS}",
                f"--checkpoint-period={PERIOD}", f"--num-slices={self.shape.slices}", "--plain", f"--run-dir={run}"]

    def pod_logs(self, name: str) -> dict[str, str]:
        """Every container log of the workload's pods that the process pool ran, by pod folder (kept after
        the pods are gone: `workload logs` reads only the pods still there)."""
        pods = self.cluster.run_dir / "vk" / "pods"
        log = f"{self.shape.container}.log"
        return {p.name: (p / log).read_text(errors="replace")
                for p in sorted(pods.glob(f"default_{name}-*")) if (p / log).exists()}

    def plain_workload(self, name: str, script: str, *flags: str) -> None:
        """A workload of this shape whose container runs `script` (no --trainer): the exit-code table's rows
        need a process that exits with exactly that code, on the real Job and JobSet controllers."""
        created = self.elxpk("workload", "create", f"--workload={name}", *self.shape.create_flags,
                             f"--docker-image={TRAINER_IMAGE}", *flags, "--command", script)
        assert created.returncode == 0, created.stderr

    def status(self, name: str) -> dict[str, Any]:
        shown = self.elxpk("workload", "status", name, "-o", "json")
        assert shown.returncode == 0, shown.stderr
        return dict(json.loads(shown.stdout))

    def delete(self, name: str) -> None:
        self.elxpk("workload", "delete", name, "--yes")


def timed(clock: Callable[[], float] = time.monotonic) -> Callable[[], float]:
    """Seconds since this call."""
    start = clock()
    return lambda: round(clock() - start, 1)
