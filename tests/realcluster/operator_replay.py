"""Helpers of the operator's replay (test_operator_replay.py, issue #43's "Done when"): the faults it injects,
the `status --why` sampler, the Kueue queue that can preempt, and what is read back per fault.

Every fault is injected as an operator would (`elxpk workload kill-slice`, a higher-priority workload) or as
the machine does it (the API server stopped with SIGSTOP), and everything is read back through what the
user has: the alerts a `--notify-command` wrote, `status --why -o json`, `report -o json` on the run's
records on gs://, and the trainer's own records (the truth the others are held to).
"""

from __future__ import annotations

import calendar
import json
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from tests.realcluster.stories import Story
from tools.testcluster.kubeapi import LocalCluster

KUEUE = "/apis/kueue.x-k8s.io/v1beta2"
MERGE = "application/merge-patch+json"
QUEUE, CLUSTER_QUEUE = "replay-queue", "replay-cq"
# Words no `status --why` line may say while the workload recovers by itself (#43: it told the operator to
# re-create a workload that the JobSet had already restarted).
WRONG_FIX = ("creating the workload again", "re-create", "recreate the workload")


@dataclass
class Fault:
    """One fault of the replay: what was done, to which slice (None: the whole workload), and when."""

    what: str  # delete, evict, exit, soak-1, soak-2, preempt
    slice: int | None
    cause: str  # a word the slice-lost alert says of it (lost_slice.py's cause, or Kueue's)
    report_cause: str  # the recovery's cause in `report` (failure_causes.py: the trainer's class of it)
    drained: bool = False  # an eviction or a preemption: SIGTERM with a grace period, a save on the way out
    killed_at: float = 0.0  # unix seconds just before the injection
    stepped_at: float | None = None  # the trainer's first step after it (its progress record's resumed_at)
    figures: dict[str, Any] = field(default_factory=dict)
    said: str = ""  # kill-slice's own output (its recovery line: the trainer's next step and the rewind)


def alerts(path: os.PathLike) -> list[dict[str, Any]]:
    """The alerts `--notify-command 'tee -a PATH'` kept (one JSON document a line; its start-up test left out)."""
    try:
        lines = open(path, encoding="utf-8").read().splitlines()
    except FileNotFoundError:
        return []
    found = []
    for line in lines:
        try:
            doc = json.loads(line)
        except ValueError:
            continue  # a line being written
        if doc.get("kind") != "test":
            found.append(doc)
    return found


def unix_of(alert: dict[str, Any]) -> float:
    return time.mktime(time.strptime(alert["time"], "%Y-%m-%dT%H:%M:%SZ")) - time.timezone


class WhySampler:
    """`status NAME --why -o json` every `every_s` seconds on a thread: (asked at, answered at, answer)."""

    def __init__(self, story: Story, name: str, every_s: float = 5.0) -> None:
        self.story, self.name, self.every_s = story, name, every_s
        self.samples: list[tuple[float, float, dict[str, Any] | None]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            asked = time.time()
            done = self.story.elxpk("workload", "status", self.name, "--why", "-o", "json", timeout=60)
            answer = None
            if done.returncode == 0:
                try:
                    answer = json.loads(done.stdout)
                except ValueError:
                    answer = None
            self.samples.append((asked, time.time(), answer))
            self._stop.wait(max(0.0, self.every_s - (time.time() - asked)))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=90)

    def between(self, start: float, end: float) -> list[dict[str, Any]]:
        """The answers whose whole call fell in [start, end]."""
        return [a for asked, answered, a in self.samples if a is not None and start <= asked and answered <= end]


class StatusWatch:
    """`status NAME --watch -o json` for the whole replay: each record's `connection`, stamped with when it
    was read (the stream carries no time of its own): (read at, connection)."""

    def __init__(self, story: Story, name: str) -> None:
        self.lines: list[tuple[float, str]] = []
        self._proc = subprocess.Popen(
            [str(story.elxpk_path), "workload", "status", name, "--watch", "-o", "json", "--kubeconfig",
             str(story.cluster.kubeconfig)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            env=story.env())
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            try:
                self.lines.append((time.time(), str(json.loads(line).get("connection"))))
            except ValueError:
                continue

    def stop(self) -> None:
        self._proc.terminate()
        try:
            self._proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._thread.join(timeout=30)

    def between(self, start: float, end: float) -> list[str]:
        return [said for at, said in self.lines if start <= at <= end]


def wrong_fixes(answer: dict[str, Any]) -> list[str]:
    """The lines of one --why answer that would have the operator fix a failure the system already handles."""
    found = []
    for reason in answer.get("why") or []:
        words = f"{reason.get('text', '')} {reason.get('fix', '')}".lower()
        if reason.get("cause") == "trainer-stopped" or any(w in words for w in WRONG_FIX):
            found.append(f"[{reason.get('cause')}] {reason.get('text')} / {reason.get('fix')}")
    return found


@contextmanager
def preempting_queue(cluster: LocalCluster, chips: int) -> Iterator[str]:
    """A ClusterQueue of `chips` TPU chips that preempts by priority (as xpk's may), and its LocalQueue in
    namespace default: yields the LocalQueue's name; both are removed after."""
    quota = [{"name": "cpu", "nominalQuota": "100000"}, {"name": "memory", "nominalQuota": "100Ti"},
             {"name": "google.com/tpu", "nominalQuota": str(chips)}]
    objects = [
        (f"{KUEUE}/clusterqueues", {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
                                    "metadata": {"name": CLUSTER_QUEUE},
                                    "spec": {"namespaceSelector": {},
                                             "preemption": {"withinClusterQueue": "LowerPriority"},
                                             "resourceGroups": [{"coveredResources": ["cpu", "memory",
                                                                                      "google.com/tpu"],
                                                                 "flavors": [{"name": "default-flavor",
                                                                              "resources": quota}]}]}}),
        (f"{KUEUE}/namespaces/default/localqueues", {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                                                     "metadata": {"name": QUEUE, "namespace": "default"},
                                                     "spec": {"clusterQueue": CLUSTER_QUEUE}}),
    ]
    for path, obj in objects:
        status, body = cluster.request("POST", path, obj)
        assert status in (200, 201, 409), body
    try:
        yield QUEUE
    finally:
        for path, obj in reversed(objects):
            cluster.request("DELETE", f"{path}/{obj['metadata']['name']}")


@contextmanager
def stopped(cluster: LocalCluster, process: str) -> Iterator[None]:
    """One of the test cluster's processes stopped (SIGSTOP) for the body, then let go on (SIGCONT):
    "kube-apiserver" (the API server), "fake-gcs-server" (gs://: the run's records, checkpoints and compile
    cache). A stopped server still accepts connections (the kernel's backlog): its clients wait, as on a
    real outage that answers nothing, rather than fail at once."""
    pid = json.loads((cluster.run_dir / "pids.json").read_text())[process]
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def kill(story: Story, name: str, *argv: str, timeout: float = 180) -> subprocess.CompletedProcess:
    done = story.elxpk("workload", "kill-slice", name, *argv, "--yes", timeout=timeout)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


# kill-slice's own recovery line (kill_slice.py, soak.py round_line): the trainer's next step's clock time,
# and the rewind as the trainer recorded its stop.
_NEXT_AT = re.compile(r"the trainer's next step .*? after the kill.*? at (\d\d):(\d\d):(\d\d\.\d)Z")
_REWOUND = re.compile(r"rewound: (\d+) steps|(\d+) steps rewound")


def kill_said(stdout: str, near: float) -> tuple[float | None, int | None]:
    """(the unix time of the trainer's next step, its rewind) as kill-slice printed them; None where it did
    not say. `near`: a unix time the same day, give or take half of one (the printed time has no date)."""
    at = rewound = None
    if (found := _NEXT_AT.search(stdout)) is not None:
        secs = int(found[1]) * 3600 + int(found[2]) * 60 + float(found[3])
        at = near - near % 86400 + secs
        at += 86400 * round((near - at) / 86400)
    if (said := _REWOUND.search(stdout)) is not None:
        rewound = int(said[1] or said[2])
    return at, rewound


# A slice that --why says was lost (lost_slice.Fault.text(): "slice 1 lost its VM (...)"; "a slice" and "the
# workload" name none; the trainer's words: "process 1 (slice 1) was preempted (SIGTERM)").
_NAMED_LOST = re.compile(r"\bslices? (\d+(?:,\d+)*)\)? (?:was |were )?(?:preempted|evicted|lost|deleted|stopped|failed)")


_SINCE = re.compile(r"since (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)")


def why_since(answer: dict[str, Any]) -> list[float]:
    """The fault's times (unix seconds) a --why answer gives ("recovering by itself: ..., since 2026-...Z")."""
    return [float(calendar.timegm(time.strptime(found[1], "%Y-%m-%dT%H:%M:%SZ")))
            for reason in answer.get("why") or [] for found in _SINCE.finditer(reason.get("text", ""))]


def slices_named_lost(answer: dict[str, Any]) -> set[int]:
    """The slices one `status --why -o json` answer says were lost, in any of its lines."""
    named: set[int] = set()
    for reason in answer.get("why") or []:
        for found in _NAMED_LOST.finditer(f"{reason.get('text', '')} {reason.get('fix', '')}"):
            named |= {int(k) for k in found[1].split(",")}
    return named
