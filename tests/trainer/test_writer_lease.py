"""One writer per checkpoint directory (issue 51, finding 6): trainer/elastic/writer_lease.py on real
directories with an injected clock, a fenced-off attempt's save through real orbax, and two real
`python -m trainer` runs started on one directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from elxpk_contract.errors import CheckFailed, UsageError
from tests.process.conftest import user_env
from tests.support.clock import ManualClock
from tests.support.runs import PERIOD, STEPS, tiny_config
from trainer.elastic.writer_lease import LEASE_FILE, STALE_S, WriterLease


def _plant(directory: Path, clock: ManualClock, *, run: str, host: str = "other-host", pid: int = 4242,
           age: float = 0.0) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / LEASE_FILE).write_text(json.dumps({"run": run, "host": host, "pid": pid, "token": "theirs",
                                                    "beat": clock.time() - age}))


def _held_by(directory: Path) -> str:
    return json.loads((directory / LEASE_FILE).read_text())["token"]


def test_another_run_alive_on_the_directory_is_refused_naming_both_runs(tmp_path):
    clock = ManualClock()
    for theirs, ours in (("run-a", "run-b"), ("", "run-b"), ("run-a", ""), ("", "")):
        _plant(tmp_path / "ckpt", clock, run=theirs)
        lease = WriterLease(str(tmp_path / "ckpt"), ours, clock)
        with pytest.raises(UsageError) as refused:
            lease.acquire()
        line = str(refused.value)
        assert line.startswith(f"--checkpoint-dir {tmp_path / 'ckpt'}: run {theirs or '(no --run-id)'!r} is "
                               "writing it (process 4242 on other-host"), line
        assert f"this is run {ours or '(no --run-id)'!r}" in line
        assert _held_by(tmp_path / "ckpt") == "theirs" and clock.slept == 0  # untouched, refused at once


def test_this_runs_predecessor_is_taken_over_at_once(tmp_path):
    """A group restart's process 0 must not wait for its predecessor's lease: the group's other processes time
    out joining a process 0 that waits (a multi-controller restart restarted twice on the test cluster)."""
    clock = ManualClock()
    _plant(tmp_path / "ckpt", clock, run="jobset-uid")
    lease = WriterLease(str(tmp_path / "ckpt"), "jobset-uid", clock)
    lease.acquire()
    try:
        assert clock.slept == 0
        assert _held_by(tmp_path / "ckpt") != "theirs"
    finally:
        lease.release()
    assert not (tmp_path / "ckpt" / LEASE_FILE).exists()



def _fenced_pair(directory: Path) -> tuple[WriterLease, WriterLease]:
    """(the predecessor, the newer attempt of the same run that took its lease while it was alive)."""
    clock = ManualClock()
    old = WriterLease(str(directory), "jobset-uid", clock)
    old.acquire()
    clock.sleep(1)  # another token: a new process's
    new = WriterLease(str(directory), "jobset-uid", clock)
    new.acquire()
    return old, new


def test_a_predecessor_taken_over_is_fenced_off_and_stops_beating(tmp_path):
    old, new = _fenced_pair(tmp_path / "ckpt")
    try:
        assert new.took_over is not None and new.took_over["token"] == old._token
        assert old.renew() is False and _held_by(tmp_path / "ckpt") == new._token  # never overwritten back
        with pytest.raises(CheckFailed, match=r"not committing: a newer attempt of run 'jobset-uid' \(process "):
            old.check_held()
        new.check_held()
        assert new.renew() is True
    finally:
        old.release()  # not its lease: left to the new holder
        assert _held_by(tmp_path / "ckpt") == new._token
        new.release()


def test_a_fenced_attempts_save_never_commits_and_the_new_attempt_never_deletes_it(reference_run, tmp_path):
    """Real orbax on real directories: the predecessor's save is refused just before its commit; the new
    attempt's store leaves the written, uncommitted save in place and restores the last committed step; a
    later start with no live predecessor removes it."""
    import shutil

    from elxpk_storage import checkpoint_files as ckpt_storage
    from trainer.ckpt.checkpoint import CheckpointStore
    from trainer.core import mesh as meshlib
    from trainer.core import state as core_state

    shutil.copytree(reference_run.run_dir / "checkpoints", tmp_path / "checkpoints")
    cfg = tiny_config(tmp_path)
    old, new = _fenced_pair(tmp_path / "checkpoints")
    events: list = []

    class Recorder:
        def event(self, name, step, **details):
            events.append((name, step))

    def store(**kwargs) -> CheckpointStore:
        return CheckpointStore(cfg, fault_hook=lambda point, step: None, recorder=Recorder(), clock=ManualClock(),
                               **kwargs)

    import jax

    target = core_state.state_target(cfg, meshlib.build_mesh({0: jax.devices()[:1]}, [0]))
    fenced = store(fence=old.check_held)
    step, state, data = fenced.restore_latest(target)
    assert step == STEPS
    fenced.save(STEPS + PERIOD, state, data)
    with pytest.raises(CheckFailed, match="not committing"):
        fenced.close(raise_errors=True)
    leftovers = ckpt_storage.uncommitted(tmp_path / "checkpoints")
    assert [s for _, s in leftovers] == [STEPS + PERIOD] and not (tmp_path / "checkpoints" / str(STEPS + PERIOD)).exists()
    kept = store(fence=new.check_held, keep_uncommitted=new.took_over is not None)
    try:
        assert kept.restore_latest(target)[0] == STEPS and ckpt_storage.uncommitted(tmp_path / "checkpoints") == leftovers
    finally:
        kept.close(raise_errors=True)
    old.release()
    new.release()
    store().close(raise_errors=True)  # a later start: nobody else holds the directory
    assert ckpt_storage.uncommitted(tmp_path / "checkpoints") == []
    assert ("checkpoint_skipped", STEPS + PERIOD) in events

def test_a_stale_or_dead_holder_is_taken_over_at_once(tmp_path):
    clock = ManualClock(start=time.time())
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    for planted in ({"run": "other", "age": STALE_S + 1},  # stopped beating
                    {"run": "other", "host": os.uname().nodename, "pid": int(dead.stdout)}):  # ended, same host
        _plant(tmp_path / "ckpt", clock, **planted)  # type: ignore[arg-type]
        lease = WriterLease(str(tmp_path / "ckpt"), "mine", clock)
        lease.acquire()
        assert _held_by(tmp_path / "ckpt") != "theirs" and clock.slept == 0
        lease.release()


@pytest.mark.slow
def test_two_runs_started_on_one_directory_one_is_refused_and_writes_nothing(tmp_path):
    args = [sys.executable, "-m", "trainer", "--checkpoint-dir", str(tmp_path / "ckpt"), "--steps", "40",
            "--checkpoint-period", "2"]
    first = subprocess.Popen([*args, "--run-dir", str(tmp_path / "a"), "--run-id", "run-a"], cwd=tmp_path,
                             env=user_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        while not (tmp_path / "ckpt" / LEASE_FILE).exists():  # polled, never timed
            assert first.poll() is None, first.stderr.read() if first.stderr else ""
            time.sleep(0.05)
        second = subprocess.run([*args, "--run-dir", str(tmp_path / "b"), "--run-id", "run-b"], cwd=tmp_path,
                                env=user_env(), capture_output=True, text=True, timeout=300)
        assert second.returncode == 2, second.stderr[-3000:]
        assert second.stderr.splitlines()[-1].startswith(f"error: --checkpoint-dir {tmp_path / 'ckpt'}: run 'run-a' "
                                                         "is writing it")
        assert "this is run 'run-b'" in second.stderr and not (tmp_path / "b").exists()
        assert first.wait(timeout=300) == 0
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert not (tmp_path / "ckpt" / LEASE_FILE).exists()  # released at the clean end
