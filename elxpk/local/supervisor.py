"""Multi-controller mode: one trainer process per slice over jax.distributed, restarted as a group.

This is the non-Pathways path. A process cannot survive the death of a peer on CPU (the survivors abort
on the missed heartbeats: XLA's CPU collectives have no way to drop a peer), so recovery is what a JobSet
with `failurePolicy` does: every process of the group exits, and the whole group is started again; the
cold start restores the newest valid checkpoint through the trainer's ordinary restore path.

The supervisor injects the fault itself: it watches metrics.jsonl (written by process 0) and SIGKILLs the
victim's process once the kill step is reached. It writes `failure_detected` and `slices_ready` to
events.jsonl while no trainer process is alive, so the trainer's own records are never interleaved.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from elxpk.errors import CheckFailed, StorageFull, UsageError
from elxpk.local.options import config_flags
from elxpk.local.tail import JsonlTail
from elxpk_contract.records import make_event
from elxpk_contract.settings import TrainerConfig

_POLL_S = 0.05


@dataclass(frozen=True)
class Kill:
    slice: int
    step: int


@dataclass(frozen=True)
class GroupPlan:
    """Everything the supervisor needs; built by the caller from validated options."""

    config: TrainerConfig  # the run's settings (steps, seed, period, model, slices, devices per slice)
    kills: tuple[Kill, ...]
    revive_after: float
    heartbeat_timeout_s: float = 10.0
    max_restarts: int = 3  # unexpected failures on top of the injected ones, like JobSet maxRestarts
    python: str = sys.executable

    @property
    def run_dir(self) -> Path:
        return Path(self.config.run_dir)

    @property
    def num_processes(self) -> int:
        return self.config.num_slices


@dataclass
class GroupResult:
    attempts: int = 0
    restarts: int = 0
    kills_done: list[Kill] = field(default_factory=list)
    exit_codes: list[list[int]] = field(default_factory=list)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def process_env(devices: int, base: dict | None = None) -> dict:
    """The child's environment: its own CPU device count before jax starts, no cloud probes."""
    env = dict(os.environ if base is None else base)
    flags = [f for f in env.get("XLA_FLAGS", "").split() if not f.startswith("--xla_force_host_platform_device_count")]
    env["XLA_FLAGS"] = " ".join([f"--xla_force_host_platform_device_count={devices}", *flags])
    env["JAX_PLATFORMS"] = "cpu"
    env.setdefault("NO_GCE_CHECK", "true")
    return env


class GroupSupervisor:
    def __init__(
        self,
        plan: GroupPlan,
        observer: Callable[[str, dict], None],
        *,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        env: dict | None = None,
        cwd: str | None = None,
    ) -> None:
        self.plan = plan
        self.observe = observer
        self.clock = clock
        self.sleep = sleep
        self.env = process_env(plan.config.devices_per_slice, env)
        self.logs = plan.run_dir / "logs"
        self.cwd = cwd or os.getcwd()
        # State of the group being watched (reset per attempt in run()).
        self._procs: list[subprocess.Popen] = []
        self._pending: list[Kill] = []
        self._recovering_since: float | None = None
        self._killed: Kill | None = None
        self._killed_at = self._deadline = 0.0
        self._deferred: list[dict] = []

    def _command(self, process_id: int, port: int) -> list[str]:
        p = self.plan
        cfg = dataclasses.replace(
            p.config, slice_backend="multi-controller", num_processes=p.num_processes, process_id=process_id,
            coordinator=f"127.0.0.1:{port}", heartbeat_timeout_seconds=int(p.heartbeat_timeout_s),
        )
        return [p.python, "-m", "trainer", *config_flags(cfg)]

    def _start(self, attempt: int) -> list[subprocess.Popen]:
        self.logs.mkdir(parents=True, exist_ok=True)
        port = free_port()
        procs = []
        for i in range(self.plan.num_processes):
            log = _open_log(self.logs / f"attempt{attempt}-process{i}.log")
            procs.append(subprocess.Popen(self._command(i, port), stdout=log, stderr=subprocess.STDOUT,
                                          env=self.env, cwd=self.cwd, start_new_session=True))
            log.close()  # the child holds its own descriptor
        return procs

    def run(self) -> GroupResult:
        plan, result = self.plan, GroupResult()
        plan.run_dir.mkdir(parents=True, exist_ok=True)
        metrics = JsonlTail(plan.run_dir / "metrics.jsonl", from_end=True)
        events = JsonlTail(plan.run_dir / "events.jsonl", from_end=True)
        self._pending = sorted(plan.kills, key=lambda k: k.step)
        self._recovering_since = None  # kill time of the failure the current group recovers from
        unexpected = 0
        while True:
            result.attempts += 1
            self._procs = self._start(result.attempts)
            self._killed, self._killed_at, self._deferred = None, 0.0, []
            try:
                while any(p.poll() is None for p in self._procs):
                    self._relay(events, "event")
                    for record in metrics.read():
                        self._on_metric(record)
                    if self._killed is not None and time.monotonic() > self._deadline:
                        for p in self._procs:  # survivors that outlived the heartbeat timeout
                            if p.poll() is None:
                                p.send_signal(signal.SIGKILL)
                    self.sleep(_POLL_S)
            finally:
                for p in self._procs:  # never leave a trainer behind, even on Ctrl-C
                    if p.poll() is None:
                        p.send_signal(signal.SIGKILL)
                    p.wait()
            self._relay(events, "event")
            for record in metrics.read():
                self._on_metric(record)
            self._write(self._deferred)  # the group is down: nothing else writes events.jsonl now
            codes = [p.returncode for p in self._procs]
            result.exit_codes.append(codes)
            if self._killed is None and all(c == 0 for c in codes):
                return result
            if self._killed is not None:
                result.kills_done.append(self._killed)
                self._recovering_since = self._killed_at
                # The replacement "pod" comes up revive_after seconds after the kill.
                self.sleep(max(0.0, self._killed_at + plan.revive_after - self.clock()))
            elif StorageFull.exit_code in codes:  # a save ran out of space: a restart would hit the same disk
                raise StorageFull(self._failure_message(result.attempts, codes, StorageFull.exit_code))
            else:
                unexpected += 1
                if unexpected > plan.max_restarts:
                    raise CheckFailed(self._failure_message(result.attempts, codes))
            result.restarts += 1
            self._write([self._event("slices_ready", self.clock(), None, slices=list(range(plan.num_processes)))])

    def _on_metric(self, record: dict) -> None:
        """Relay one step to the view; note the first step of a restarted group; kill at the kill step."""
        self.observe("metric", record)
        step = record.get("step")
        if not isinstance(step, int):
            return
        if self._recovering_since is not None:
            # A cold start does not know it is a recovery: the supervisor does.
            now = self.clock()
            self._deferred.append(self._event("first_step_after_recovery", now, step, reason="group_restart",
                                              recovery_s=round(now - self._recovering_since, 6)))
            self._recovering_since = None
        if self._killed is not None or not self._pending or step < self._pending[0].step:
            return
        kill = self._pending.pop(0)
        victim = self._procs[kill.slice]
        if victim.poll() is not None:  # it finished before we got to it: nothing to kill
            return
        victim.send_signal(signal.SIGKILL)
        self._killed, self._killed_at = kill, self.clock()
        # JobSet waits for the failed job; the survivors abort on their own after missed heartbeats.
        self._deadline = time.monotonic() + self.plan.heartbeat_timeout_s + 10.0
        self._deferred.append(self._event("failure_detected", self._killed_at, step, slices_lost=[kill.slice],
                                          error=f"process {kill.slice} (slice {kill.slice}) SIGKILLed",
                                          kind="process_killed"))

    def _event(self, name: str, t: float, step: int | None, **details) -> dict:
        """One supervisor event, shown at once; written to events.jsonl by `_write`."""
        record = make_event(name, t, step, source="supervisor", **details).to_json()
        self.observe("event", record)
        return record

    def _write(self, records: list[dict]) -> None:
        if records:
            with open(self.plan.run_dir / "events.jsonl", "a", encoding="utf-8") as handle:
                handle.write("".join(json.dumps(r) + "\n" for r in records))

    def _relay(self, tail: JsonlTail, kind: str) -> None:
        for record in tail.read():
            if record.get("source") != "supervisor":  # ours were shown when they happened
                self.observe(kind, record)

    def _failure_message(self, attempt: int, codes: Sequence[int], code: int | None = None) -> str:
        worst = next(i for i, c in enumerate(codes) if c != 0 and code in (None, c))
        log = self.logs / f"attempt{attempt}-process{worst}.log"
        tail = log.read_text(errors="replace").strip().splitlines()[-1:] if log.exists() else []
        last = f": {tail[0][:300]}" if tail else ""
        if code is not None:
            return f"multi-controller process {worst} exited {code} (exit codes {list(codes)}){last}; see {log}"
        return (f"multi-controller group failed {self.plan.max_restarts + 1} times without an injected fault "
                f"(exit codes {list(codes)}); see {log}{last}")



def _open_log(path: Path):  # noqa: ANN202 - a binary file object
    """A process's log, a name elxpk chose: a regular file replaced in place, never a link followed (a link
    planted there is refused in one line, exit 2)."""
    try:
        return os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644), "wb")
    except OSError as exc:
        raise UsageError(f"{path}: cannot write the process's log there ({exc.strerror}); elxpk writes it as a "
                         "plain file, never through a link: remove it") from None
