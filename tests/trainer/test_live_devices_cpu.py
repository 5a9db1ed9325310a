"""What jax 0.10.2's fault-tolerance API (`live_devices` + `jax_enable_recoverability`) does on the CPU today.

Issue #24 item 3: in-process recovery on the multi-controller backend is built only if it works here first.
These tests record the evidence, with N real processes and gloo collectives, and fail when jax changes:
  - a survivor's collective with a dead peer neither raises nor returns: XLA's CPU collectives wait on gloo
    with a fixed 30-minute timeout (CollectiveThunk::DefaultCollectiveTimeout), no flag shortens it, and the
    missed heartbeat does not cancel it;
  - the live set does shrink when the death falls between collectives: the block's closing barrier raises
    ProcessFailureError for the dead process's devices, and the next step runs on the survivors;
  - a restarted process rejoins the live set, but the first collective of the rejoined group hangs.
So the CPU stays on group restart; docs/multi-controller-recovery.md has the design for GPUs.
Every wait is bounded; every process is killed at the end.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.loopback import free_port

pytestmark = pytest.mark.slow

PROBE = Path(__file__).with_name("live_devices_probe.py")
HEARTBEAT_S = 4
HANG_BOUND_S = 3 * HEARTBEAT_S  # several missed-heartbeat periods: any cancellation would have fired by then
START_BOUND_S = 120  # three jax processes starting on two shared cores


class Group:
    """N probe processes on one coordinator; their JSON events collected as they happen."""

    def __init__(self, n: int, die_at: int, die_where: str) -> None:
        self.coordinator = f"127.0.0.1:{free_port()}"
        self.n = n
        self.events: list[dict] = []
        self.other: list[str] = []
        self.changed = threading.Condition()
        self.procs: dict[int, subprocess.Popen] = {}
        for pid in range(n):
            self.start(pid, die_at if pid == n - 1 else -1, die_where)

    def start(self, pid: int, die_at: int, die_where: str) -> None:
        env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"} | {"JAX_PLATFORMS": "cpu"}
        proc = subprocess.Popen(
            [sys.executable, str(PROBE), self.coordinator, str(pid), str(self.n), str(HEARTBEAT_S), str(die_at),
             die_where], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        self.procs[pid] = proc
        incarnation = sum(1 for e in self.events if e["pid"] == pid and e["event"] == "initialized")

        def pump() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                with self.changed:
                    if line.startswith("{"):
                        self.events.append(json.loads(line) | {"incarnation": incarnation})
                    else:
                        self.other.append(f"p{pid}: {line.rstrip()}")
                    self.changed.notify_all()

        threading.Thread(target=pump, daemon=True).start()

    def wait_for(self, what: str, pred: Callable[[dict], bool], timeout: float) -> dict:
        with self.changed:
            if not self.changed.wait_for(lambda: any(pred(e) for e in self.events), timeout):
                pytest.fail(f"no {what} within {timeout:.0f} s; events: {self.events[-12:]}; "
                            f"other output: {self.other[-15:]}")
            return next(e for e in self.events if pred(e))

    def after(self, seconds: float) -> list[dict]:
        """The events of the next `seconds`."""
        with self.changed:
            seen = len(self.events)
        time.sleep(seconds)
        with self.changed:
            return self.events[seen:]

    def kill(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def groups():
    """Both scenarios run at the same time, so the module's wall time is the longer of the two."""
    started = {"mid_collective": Group(3, die_at=2, die_where="before"),
               "between_collectives": Group(3, die_at=2, die_where="after")}
    yield started
    for group in started.values():
        group.kill()


def is_(pid: int, event: str, step: int | None = None, incarnation: int = 0) -> Callable[[dict], bool]:
    return lambda e: (e["pid"] == pid and e["event"] == event and e["incarnation"] == incarnation
                      and (step is None or e["step"] == step))


def test_a_survivors_collective_with_a_dead_peer_hangs(groups):
    g = groups["mid_collective"]
    # Process 2 dies inside step 2's block, before the collective. The survivors entered the block with the
    # live set of step 1's closing barrier: a death after that barrier is invisible until the next one.
    for pid in (0, 1):
        assert g.wait_for("survivor in step 2", is_(pid, "live", 2), START_BOUND_S)["live"] == [0, 1, 2]
    assert g.procs[2].wait(timeout=START_BOUND_S) == -9
    later = g.after(HANG_BOUND_S)
    assert [e for e in later if e["pid"] in (0, 1)] == [], later  # no result, no error, no ProcessFailureError
    assert g.procs[0].poll() is None and g.procs[1].poll() is None  # blocked in gloo's all-reduce, not aborted


def test_the_live_set_shrinks_between_collectives_and_a_restarted_process_rejoins_into_a_hang(groups):
    g = groups["between_collectives"]
    # Process 2 dies after step 2's collective: the survivors' closing barrier names it.
    for pid in (0, 1):
        assert g.wait_for("survivor's step 2", is_(pid, "done", 2), START_BOUND_S)["sum"] == 9.0
        assert g.wait_for("ProcessFailureError", is_(pid, "failed", 2), START_BOUND_S)["failed"] == [2]
        assert g.wait_for("step 3 on the survivors", is_(pid, "live", 3), START_BOUND_S)["live"] == [0, 1]
        assert g.wait_for("step 3's result", is_(pid, "done", 3), START_BOUND_S)["sum"] == 8.0  # 2 × 4
    assert g.procs[2].wait(timeout=START_BOUND_S) == -9

    g.start(2, -1, "never")  # what a JobSet does for the pod
    g.wait_for("the restarted process", is_(2, "live", incarnation=1), START_BOUND_S)
    rejoined = {}
    for pid in (0, 1):
        rejoined[pid] = g.wait_for("the rejoined live set", lambda e, pid=pid: (
            e["pid"] == pid and e["event"] == "live" and e["live"] == [0, 1, 2] and e["step"] > 3), START_BOUND_S)
    assert next(e for e in g.events if is_(2, "live", incarnation=1)(e))["live"] == [0, 1, 2]
    later = g.after(HANG_BOUND_S)
    done = [e for e in g.events if e["event"] == "done" and (
        (e["pid"] == 2 and e["incarnation"] == 1) or (e["pid"] in rejoined and e["step"] >= rejoined[e["pid"]]["step"]))]
    assert done == [], later  # the rejoined group's first collective never completes
    assert all(p.poll() is None for p in g.procs.values())
