"""`python -m trainer` as the container runs it: every documented exit code, from a fresh start and from
a resume, read from the real process under the default settings (live recovery, the default model)."""

from __future__ import annotations

import hashlib
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from elxpk_contract.exit_codes import (
    BAD_SETTINGS,
    DONE,
    PREEMPTED,
    SLICE_LOST,
    STALLED,
    TIMEOUT,
    UNCLASSIFIED,
)
from elxpk_contract.progress_record import PROGRESS_FILE, read_progress
from tests.process.conftest import SHORT, SIGTERM, as_a_plain_user, events, run_process, trainer, user_env
from tests.support.runs import read_jsonl

pytestmark = pytest.mark.slow


def _progress(run: Path):
    return read_progress((run / "checkpoints" / PROGRESS_FILE).read_text(encoding="utf-8"))


def _tree_digest(root: Path) -> str:
    """Every file's path and bytes under `root`: equal digests mean nothing was written."""
    h = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


# --- 0: done ----------------------------------------------------------------------------------------------

def test_a_completed_default_run_exits_0_with_its_last_checkpoint_committed(finished_short_run):
    assert (_progress(finished_short_run).state, _progress(finished_short_run).phase) == ("done", "stepping")
    assert (finished_short_run / "checkpoints" / "4").is_dir()
    assert [e["step"] for e in events(finished_short_run, "run_finished")] == [4]


def test_a_run_whose_background_compiles_outlive_its_steps_exits_0(tmp_path):
    # Live recovery compiles the checks of every one-slice-short mesh in a thread; with 4 slices and 1 step
    # the steps end long before those compiles. The thread used to be inside XLA when the interpreter
    # finalized: exit 134, "terminate called after throwing an instance of ''" (4 of 4 tries). Without the
    # tests' XLA cache (tests/support/xla_cache.py): loaded from it, those compiles would end before the step.
    done = trainer(["--run-dir", str(tmp_path / "run"), "--num-slices", "4", "--steps", "1"], tmp_path,
                   env={**user_env(), "JAX_ENABLE_COMPILATION_CACHE": "false"})
    assert done.code == DONE.code, done.err[-3000:]
    assert "terminate called" not in done.err and done.out.splitlines()[-1].startswith("done: 1 steps")


def test_a_retried_job_of_a_finished_run_exits_0_again(resumable, tmp_path):
    # What a cluster does after a pod's exit that it counts as failed: the same command again.
    again = trainer(["--run-dir", str(resumable), *SHORT], tmp_path)
    assert again.code == DONE.code, again.err[-3000:]
    # it restored and compiled, and had no step left to run: its record's last phase says so
    assert (_progress(resumable).state, _progress(resumable).phase) == ("done", "compiling")


def test_a_resumed_default_run_exits_0_after_restoring_its_checkpoint(resumable, tmp_path):
    done = trainer(["--run-dir", str(resumable), "--steps", "6", "--checkpoint-period", "2"], tmp_path)
    assert done.code == DONE.code, done.err[-3000:]
    restores = events(resumable, "restore_done")
    assert restores[-1]["step"] == 4 and restores[-1]["state_source"] == "checkpoint"
    assert [m["step"] for m in read_jsonl(resumable / "metrics.jsonl")] == list(range(6))


# --- 2: bad settings, nothing written -----------------------------------------------------------------------

@pytest.mark.parametrize("flags, names", [
    (["--steps", "0"], "--steps"),
    (["--checkpoint-period", "abc"], "--checkpoint-period"),
    (["--recovery", "sometimes"], "--recovery"),
])
def test_bad_settings_exit_2_with_one_line_and_write_nothing(flags, names, tmp_path):
    bad = trainer(["--run-dir", str(tmp_path / "run"), *flags], tmp_path)
    assert bad.code == BAD_SETTINGS.code, bad.err[-3000:]
    assert "Traceback" not in bad.err and names in bad.last_error_line
    assert not (tmp_path / "run").exists()


def test_bad_settings_on_a_resume_exit_2_and_leave_the_run_as_it_was(resumable, tmp_path):
    before = _tree_digest(resumable)
    bad = trainer(["--run-dir", str(resumable), "--steps", "6", "--elastic-max-retries", "-3"], tmp_path)
    assert bad.code == BAD_SETTINGS.code, bad.err[-3000:]
    assert "--elastic-max-retries" in bad.last_error_line
    assert _tree_digest(resumable) == before


# --- 77: preempted ------------------------------------------------------------------------------------------

def _sigterm_after_step(run: Path, step: int):
    return lambda: any(m["step"] >= step for m in read_jsonl(run / "metrics.jsonl"))


def test_sigterm_saves_then_exits_77_and_the_resume_continues_from_that_step(tmp_path):
    run = tmp_path / "run"
    stopped = trainer(["--run-dir", str(run), "--steps", "1000000", "--checkpoint-period", "100000"], tmp_path,
                      until=_sigterm_after_step(run, 2), then=SIGTERM)
    assert stopped.code == PREEMPTED.code, stopped.err[-3000:]
    (preempted,) = events(run, "preempted")
    assert preempted["saved"] is True and preempted["checkpoint_step"] == preempted["step"] >= 3
    assert (_progress(run).state, _progress(run).exit_code, _progress(run).gave_up()) == ("preempted", 77, False)

    target = preempted["step"] + 2
    done = trainer(["--run-dir", str(run), "--steps", str(target), "--checkpoint-period", "100000"], tmp_path)
    assert done.code == DONE.code, done.err[-3000:]
    assert events(run, "restore_done")[-1]["step"] == preempted["step"]  # nothing rewound


def test_a_sigterm_repeated_until_the_process_ends_still_ends_it_with_77(tmp_path):
    """A second SIGTERM while the trainer stops (a runtime or a wrapper that repeats it, a pod deleted twice)
    must not kill it on the way out: before, the default handler was back once main() returned, and the
    process ended 143 (killed by SIGTERM) after it had printed that it was preempted."""
    run = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "trainer", "--run-dir", str(run), "--steps", "1000000",
                             "--checkpoint-period", "100000"], cwd=tmp_path, env=user_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        ready = _sigterm_after_step(run, 2)
        deadline = time.monotonic() + 300  # a bound against a hang, no timing
        while proc.poll() is None and not ready() and time.monotonic() < deadline:
            time.sleep(0.1)
        while proc.poll() is None and time.monotonic() < deadline:
            proc.send_signal(SIGTERM)
            time.sleep(0.01)
        err = proc.communicate(timeout=60)[1]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == PREEMPTED.code, err[-3000:]
    assert len(events(run, "preempted")) == 1


def test_sigterm_after_a_resume_exits_77_too(resumable, tmp_path):
    stopped = trainer(["--run-dir", str(resumable), "--steps", "1000000", "--checkpoint-period", "100000"],
                      tmp_path, until=_sigterm_after_step(resumable, 5), then=SIGTERM)
    assert stopped.code == PREEMPTED.code, stopped.err[-3000:]
    assert events(resumable, "preempted")[-1]["saved"] is True


def _handles_sigterm(pid: int) -> bool:
    """The process has installed a handler for SIGTERM (its SigCgt mask in /proc): the trainer's main() runs."""
    try:
        caught = next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                      if line.startswith("SigCgt:"))
    except (OSError, StopIteration):
        return False
    return bool(int(caught.split()[1], 16) & (1 << (SIGTERM - 1)))


@pytest.mark.parametrize("when", ["joining", "importing"])
def test_sigterm_while_a_process_waits_for_its_group_exits_77_at_once(when, tmp_path):
    """Process 1 of a group whose process 0 never comes waits in jax.distributed's join (here up to 90 s, in
    jax's C++, where no Python handler runs). A SIGTERM there (the pod deleted by a JobSet restart, or
    evicted) ends it at once with 77 and one line, not at the kubelet's SIGKILL a grace period later; so does
    one heard before the join began. `joining`: this test is the coordinator's address, a socket that accepts
    and never answers, so the join has begun once it accepts; `importing`: at once once main() handles
    SIGTERM (the imports come after)."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)
    args = [sys.executable, "-m", "trainer", "--slice-backend", "multi-controller", "--num-processes", "2",
            "--process-id", "1", "--coordinator", f"127.0.0.1:{listener.getsockname()[1]}",
            "--heartbeat-timeout-seconds", "15", "--run-dir", str(tmp_path / "run")]
    proc = subprocess.Popen(args, cwd=tmp_path, env=user_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, stdin=subprocess.DEVNULL)
    accepted: list[socket.socket] = []
    try:
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:
            if when == "importing" and _handles_sigterm(proc.pid):
                break
            if when == "joining":
                try:
                    accepted.append(listener.accept()[0])
                    break
                except TimeoutError:
                    continue
            time.sleep(0.01)
        proc.send_signal(SIGTERM)
        out, err = proc.communicate(timeout=60)  # the join alone would wait 90 s
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for conn in accepted:
            conn.close()
        listener.close()
    assert proc.returncode == PREEMPTED.code, err[-3000:]
    assert err.strip().splitlines()[-1] == ("error: preempted (SIGTERM) while joining the jax.distributed group: "
                                            "nothing trained yet, so nothing to save; exit 77")
    assert not (tmp_path / "run" / "metrics.jsonl").exists()


# --- 70, 75, 76, 124: a fresh start and a resume ------------------------------------------------------------
# (flags, the code, the start of the last stderr line). A fault fires at the named step of this process.
FAILURES = {
    "slice lost": (["--fault", "1@{s}"], SLICE_LOST, "error: slice lost: "),
    "stalled": (["--fault", "1@hang:{s}", "--stall-timeout-seconds", "15"], STALLED,
                "error: stalled: no step completed for "),
    "slices not back": (["--elastic-enabled", "--fault", "1@{s}", "--elastic-timeout-seconds", "1",
                         "--elastic-poll-seconds", "0.1"], TIMEOUT, "error: elastic: 1 of 2 slices healthy"),
}


@pytest.mark.parametrize("case", sorted(FAILURES))
@pytest.mark.parametrize("start", ["fresh", "resumed"])
def test_each_failure_exits_with_its_code(case, start, request, tmp_path):
    flags, code, line = FAILURES[case]
    run = request.getfixturevalue("resumable") if start == "resumed" else tmp_path / "run"
    at, steps = (6, 8) if start == "resumed" else (2, 4)
    failed = trainer(["--run-dir", str(run), "--steps", str(steps), "--checkpoint-period", "100",
                      *[f.format(s=at) for f in flags]], tmp_path)
    assert failed.code == code.code, failed.err[-3000:]
    assert failed.last_error_line.startswith(line), failed.err[-3000:]
    assert "terminate called" not in failed.err
    assert max(m["step"] for m in read_jsonl(run / "metrics.jsonl")) == at - 1  # it stopped at the fault
    # the record says how it stopped: a code the group restart retries, so `status --why` reads no giving up
    assert (_progress(run).exit_code, _progress(run).gave_up()) == (code.code, False)


def test_a_recovery_that_does_not_take_hold_ends_the_process_with_76(repo_root, tmp_path):
    # The watchdog recovers a stall in process by making the hung step raise. A step stuck where Python
    # cannot reach it never raises: one stall timeout after the interrupt, the process exits 76 anyway.
    run = tmp_path / "run"
    stuck = run_process([sys.executable, "-m", "tests.process.stuck_recovery", "--run-dir", str(run), "--steps", "8",
                         "--checkpoint-period", "100", "--elastic-enabled", "--fault", "1@hang:3",
                         "--stall-timeout-seconds", "15"], repo_root)
    assert stuck.code == STALLED.code, stuck.err[-3000:]
    assert stuck.last_error_line.startswith("error: stalled: at step 3 the step stayed hung ")
    recover, escalate = events(run, "stall_detected")
    assert (recover["action"], escalate["action"]) == ("recover", "exit")
    assert escalate["since_s"] >= recover["since_s"] + recover["timeout_s"]  # it waited one timeout, no less
    assert (run / escalate["stacks"]).is_file() and escalate["stacks"] != recover["stacks"]
    assert _progress(run).state == "stalled"


def test_a_checkpoint_dir_under_a_file_exits_2_in_one_line_before_training(tmp_path):
    """It used to exit 70 (a user error of the training code) with a traceback, from the checkpoint directory."""
    (tmp_path / "file").write_text("not a directory\n")
    failed = trainer(["--run-dir", str(tmp_path / "run"), "--checkpoint-dir", str(tmp_path / "file" / "ckpt"),
                      *SHORT], tmp_path)
    assert failed.code == BAD_SETTINGS.code, failed.err[-3000:]
    assert "Traceback" not in failed.err
    assert failed.last_error_line.startswith("error: --checkpoint-dir ") and "which is a file" in failed.err
    assert not (tmp_path / "run").exists()


def test_a_resume_of_another_configuration_is_refused_as_bad_settings(resumable, tmp_path):
    refused = trainer(["--run-dir", str(resumable), "--steps", "6", "--d-model", "128"], tmp_path)
    assert refused.code == BAD_SETTINGS.code, refused.err[-3000:]
    assert "written by a different configuration" in refused.err


def test_a_failure_outside_the_run_exits_1_unclassified(tmp_path):
    # Nothing of the run failed: standard output is full. Counted by the orchestrator, never FailJob.
    with open("/dev/full", "w") as full:
        failed = trainer(["--print-config"], tmp_path, stdout=full)
    assert failed.code == UNCLASSIFIED.code == 1, failed.err
    assert failed.last_error_line.startswith("error: --print-config: cannot write the configuration")


def test_the_settings_these_runs_use_are_the_defaults(tmp_path):
    # The cases above change only lengths, cadences and faults: recovery, model and slices are the defaults.
    shown = trainer(["--print-config", *SHORT], tmp_path)
    assert shown.code == DONE.code
    for default in ('"recovery": "live"', '"model": "tiny"', '"num_slices": 2', '"elastic_enabled": false'):
        assert default in shown.out


# --- restore errors by class (issue 41): a transient failure never sets a step aside ------------------------
def test_a_step_denied_to_the_reader_is_retried_then_exits_75_with_every_step_in_place(resumable, tmp_path):
    """A permission error on one array file of every step used to set the steps aside one after another and
    restart from step 0 (exit 0). Now: 3 tries of the newest step, then 75; when access is back, the same
    step is restored."""
    ckpt = resumable / "checkpoints"
    steps = sorted(p for p in ckpt.iterdir() if p.name.isdigit())
    victims = [max((f for f in (s / "state").rglob("*") if f.is_file()), key=lambda f: f.stat().st_size)
               for s in steps]
    before = sorted(p.name for p in ckpt.iterdir())
    flags = ["--run-dir", str(resumable), "--steps", "6", "--checkpoint-period", "2"]
    for victim in victims:
        victim.chmod(0)
    try:
        failed = run_process([*as_a_plain_user(), sys.executable, "-m", "trainer", *flags], tmp_path)
    finally:
        for victim in victims:
            victim.chmod(0o644)
    assert failed.code == SLICE_LOST.code, failed.err[-3000:]
    assert failed.err.count(f"warning: restore: reading step {steps[-1].name} failed (storage access denied") == 2
    (line,) = [x for x in failed.err.splitlines() if x.startswith("error: ")]
    assert line.startswith(f"error: restore: reading step {steps[-1].name} failed 3 times (storage access denied: "
                           "ValueError: PERMISSION_DENIED: ")
    assert line.endswith("every checkpoint step is left in place; exit 75 (retryable: the restart tries the same "
                         "step again)")
    assert sorted(p.name for p in ckpt.iterdir()) == before  # nothing set aside, no quarantine folder
    assert not events(resumable, "checkpoint_skipped")
    done = trainer(flags, tmp_path)
    assert done.code == DONE.code, done.err[-3000:]
    assert events(resumable, "restore_done")[-1]["step"] == int(steps[-1].name)


def test_a_restore_out_of_memory_is_retryable_with_every_step_in_place(repo_root, tmp_path):
    """Under a real memory limit (RLIMIT_AS) a resume runs out of memory (where exactly depends on the
    machine and its load: XLA's RESOURCE_EXHAUSTED, a MemoryError or a thread that cannot start, in the restore
    or around it). It used to set the step aside ("orbax could not read it") or exit 70; now: 75, with every
    step in place."""
    model = ["--d-model", "512", "--n-layers", "4", "--n-heads", "8", "--d-ff", "2048"]  # a 137 MB checkpoint
    flags = ["--run-dir", str(tmp_path / "run"), "--checkpoint-period", "2", *model]
    first = trainer([*flags, "--steps", "2"], tmp_path)
    assert first.code == DONE.code, first.err[-3000:]
    ckpt = tmp_path / "run" / "checkpoints"
    # Every step in place; the writer's lease (trainer/elastic/writer_lease.py) is a process's record, which a
    # process aborted in XLA's C++ cannot remove (it goes stale on its own).
    def in_place() -> list[str]:
        return sorted(p.name for p in ckpt.iterdir() if p.name != "elxpk-writer.json")

    before = in_place()
    # A thread started under the limit that cannot allocate its own state leaves CPython's Thread.start waiting
    # for it for ever (seen once in CI): the restore's deadline ends that, with 76 (retryable). Shortened from
    # its 1800 s default to fit the test.
    limited = run_process([sys.executable, "-m", "tests.process.memory_limited", "2000", *flags, "--steps", "4",
                           "--restore-timeout-seconds", "60"], repo_root, timeout=180)
    # Under CI's load the limit is sometimes met first in C++: a thread whose start fails (std::system_error),
    # an allocation (std::bad_alloc, in XLA or tensorstore) or XLA's LLVM JIT failing to map code ("LLVM
    # ERROR: Unable to allocate section memory"). Each aborts the process (SIGABRT: exit 134 in a container,
    # which the podFailurePolicy leaves to the orchestrator's default, a counted restart:
    # elxpk_contract/exit_codes.py): no Python code runs to classify it. Every step stays in place either way.
    aborted_in_xla = limited.code == -signal.SIGABRT and any(
        native in limited.err for native in ("std::system_error", "std::bad_alloc", "LLVM ERROR"))
    if limited.code == STALLED.code:
        assert (f"error: stalled: the checkpoint restore did not finish within 60s; exit {STALLED.code} "
                "(retryable)") in limited.err.splitlines(), limited.err[-3000:]
    elif not aborted_in_xla:
        assert limited.code == SLICE_LOST.code, limited.err[-3000:]
        (line,) = [x for x in limited.err.splitlines() if x.startswith("error: ")]
        # Out of memory in an allocation, or in a thread's stack (the host's class: "can't start new thread").
        assert any(f"{cls}: " in line for cls in ("out of memory", "host resources")), line
    assert in_place() == before
