"""Seeing a workload Running with a committed checkpoint, without racing it.

A story's run is short (24 to 40 tiny steps): between its first committed checkpoint and its end there are
a few seconds, fewer on a quiet machine, and one `status` call can take that long. So the story waits for the
trainer's own progress record on gs:// to name a committed checkpoint while it runs, then stops the
workload's trainer processes (the process pool's pods are processes of this machine) with SIGSTOP, asks
`status`, and lets them go on with SIGCONT: `status` then reads a workload that is certainly Running,
and the run's steps, losses and checkpoints are the same (a pause changes no computation; the stall
watchdog's floor is 600 s, far above a pause of a few seconds).

A paused workload runs with PAUSED_TRAINER_ARGS: a jax.distributed group whose processes are stopped for
longer than its heartbeat timeout (10 s by default) aborts when they go on, because the coordination service
then finds a peer's last heartbeat too old (docs/multi-controller-recovery.md), and one `status` on a loaded
2-core machine can take that long (GPU story 1 reached its restart limit so, once in CI). The pause is
measured, and one past PAUSE_LIMIT_S fails by name instead of as a mysterious restart.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import requests

from elxpk_contract.progress_record import PROGRESS_FILE
from tools.testcluster.kubeapi import LocalCluster

HEARTBEAT_TIMEOUT_S = 300
# The trainer flags of a workload this module pauses: a heartbeat timeout far above any pause here. These
# stories kill nothing, so the timeout decides nothing else in them.
PAUSED_TRAINER_ARGS = (f"--heartbeat-timeout-seconds={HEARTBEAT_TIMEOUT_S}",)
PAUSE_LIMIT_S = HEARTBEAT_TIMEOUT_S / 2


def progress_on_gs(cluster: LocalCluster, bucket: str, checkpoint_prefix: str,
                   timeout: float = 30) -> dict[str, Any] | None:
    """The trainer's progress record under gs://BUCKET/CHECKPOINT_PREFIX, read from the emulator (None: not
    written yet)."""
    name = quote(f"{checkpoint_prefix.rstrip('/')}/{PROGRESS_FILE}", safe="")
    got = requests.get(f"{cluster.storage_emulator_host}/storage/v1/b/{bucket}/o/{name}", params={"alt": "media"},
                       timeout=timeout)
    if got.status_code == 404:
        return None
    assert got.status_code == 200, (got.status_code, got.text[:300])
    return dict(json.loads(got.text))


def pod_processes(cluster: LocalCluster, workload: str) -> list[int]:
    """The processes the process pool runs for `workload`'s pods: those working in one of its pod folders."""
    pods = cluster.run_dir / "vk" / "pods"
    folders = [str(p.resolve()) for p in pods.glob(f"default_{workload}-*")]
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cwd = os.readlink(proc / "cwd")
        except OSError:  # gone, or not ours to read
            continue
        if any(cwd == folder or cwd.startswith(folder + os.sep) for folder in folders):
            found.append(int(proc.name))
    return found


@contextmanager
def paused(pids: list[int]) -> Iterator[None]:
    """SIGSTOP every one of `pids`, SIGCONT them after (a process already gone is passed over)."""
    stopped = []
    try:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGSTOP)
                stopped.append(pid)
            except ProcessLookupError:
                continue
        yield
    finally:
        for pid in stopped:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                continue


def status_while_paused(cluster: LocalCluster, workload: str, bucket: str, checkpoint_prefix: str,
                        status: Callable[[], dict[str, Any]], timeout: float = 600) -> dict[str, Any]:
    """`status()` of `workload` while its trainers are stopped past a committed checkpoint (module doc)."""
    deadline = time.monotonic() + timeout
    while True:
        record = progress_on_gs(cluster, bucket, checkpoint_prefix) or {}
        if record.get("state") not in (None, "running"):
            raise AssertionError(f"{workload} ended ({record.get('state')}) before its record named a committed "
                                 f"checkpoint while it ran: {record}")
        if record.get("checkpoint_step"):
            break
        assert time.monotonic() < deadline, f"{workload}: no committed checkpoint on gs:// within {timeout:.0f} s"
        time.sleep(0.1)
    pids = pod_processes(cluster, workload)
    assert pids, f"{workload}: no process of its pods found under {cluster.run_dir / 'vk' / 'pods'}"
    # fake-gcs-server holds every read of an object while an upload to it is under way (Cloud Storage serves
    # the last generation): a trainer stopped in the middle of rewriting its progress record would hang
    # status's read of it until its 60 s timeout (GPU story 1, once in CI). So the pause holds only if the
    # record reads back at once; otherwise the trainers go on a moment and are stopped again.
    for _ in range(50):
        with paused(pids):
            try:
                progress_on_gs(cluster, bucket, checkpoint_prefix, timeout=2)
            except requests.Timeout:
                pass  # an upload under way: go on a moment, then stop them again
            else:
                paused_at = time.monotonic()
                shown = status()
                took = time.monotonic() - paused_at
                assert took < PAUSE_LIMIT_S, (f"{workload}: its trainers were stopped {took:.0f} s, past "
                                              f"{PAUSE_LIMIT_S:.0f} s: its group may abort on missed heartbeats")
                return shown
        time.sleep(0.2)
    raise AssertionError(f"{workload}: its progress record never read back while its trainers were stopped")
