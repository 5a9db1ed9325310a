"""The failure-classification contract (issue 15): every way the trainer ends maps to a documented code,
and the launcher can tell what to fail at once (user errors) from what to retry (infrastructure)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import jax
import pytest

from elxpk.local.options import config_flags
from elxpk_contract.errors import CheckFailed, StorageFull, Timeout, UsageError
from elxpk_contract.exit_codes import (
    BAD_SETTINGS,
    EXIT_CODES,
    PREEMPTED,
    SLICE_LOST,
    STALLED,
    STORAGE_FULL,
    TIMEOUT,
    UNCLASSIFIED,
    USER_ERROR,
    TrainerStopped,
    retryable_codes,
    user_error_codes,
)
from elxpk_contract.progress_record import PROGRESS_FILE, read_progress
from tests.support.runs import read_jsonl, tiny_config
from trainer.__main__ import main
from trainer.elastic.outcome import exit_code_for


def test_codes_are_distinct_documented_and_clear_of_the_signal_range():
    codes = [c.code for c in EXIT_CODES]
    assert len(set(codes)) == len(codes) and len({c.name for c in EXIT_CODES}) == len(codes)
    assert not [c for c in codes if 126 <= c <= 165]
    assert all(c.meaning for c in EXIT_CODES)
    assert user_error_codes() == [BAD_SETTINGS.code, USER_ERROR.code]  # a Job fails at once on these
    assert set(retryable_codes()) == {SLICE_LOST.code, STALLED.code, PREEMPTED.code, TIMEOUT.code, STORAGE_FULL.code,
                                      UNCLASSIFIED.code}
    assert STORAGE_FULL.action == "Count" and STORAGE_FULL.code == StorageFull.exit_code  # never FailJob
    assert PREEMPTED.action == "Ignore" and SLICE_LOST.action == STALLED.action == "Count"
    assert UNCLASSIFIED.action != "FailJob"  # an unknown crash is not known to be the user's


@pytest.mark.parametrize("error, expected", [
    (UsageError("--steps 0: must be at least 1"), BAD_SETTINGS),
    (Timeout("elastic: 1 of 2 slices healthy"), TIMEOUT),
    (TrainerStopped(PREEMPTED, "preempted"), PREEMPTED),
    (TrainerStopped(USER_ERROR, "again with no new checkpoint"), USER_ERROR),
    (CheckFailed("something checked failed"), UNCLASSIFIED),
    (jax.errors.JaxRuntimeError("DATA_LOSS: slice 1 is gone"), SLICE_LOST),
    (jax.errors.JaxRuntimeError("UNAVAILABLE: Socket closed"), SLICE_LOST),  # a survivor of a dead peer
    # Out of memory (device or host) and a thread the host cannot start are the infrastructure's (issue 44).
    (jax.errors.JaxRuntimeError("RESOURCE_EXHAUSTED: out of memory"), SLICE_LOST),
    (MemoryError(), SLICE_LOST),
    (RuntimeError("can't start new thread"), SLICE_LOST),
    # Storage: unavailable, slow, denying access (a token expiring mid-restore) are retryable, never 70.
    (ValueError("UNAVAILABLE: Error reading \"gs://bkt/c/30/state\": HTTP 503"), SLICE_LOST),
    (ValueError("PERMISSION_DENIED: Error opening file: Permission denied [os_error_code=13]"), SLICE_LOST),
    (PermissionError(13, "Permission denied"), SLICE_LOST),
    (TimeoutError("read timed out"), SLICE_LOST),
    (OSError("Forbidden: gs://bkt/c/30\nInvalid Credentials"), SLICE_LOST),
    (FileNotFoundError(2, "No such file"), UNCLASSIFIED),  # content or a bug, not known to be transient
    # The survivor of a killed slice on CPU collectives (gloo), as a process-pool pod reported it (#31).
    (jax.errors.JaxRuntimeError("UNKNOWN: Gloo AllGather failed: [external/gloo/gloo/transport/tcp/pair.cc:547] "
                                "Connection closed by peer [127.159.160.1]:58765"), SLICE_LOST),
    (jax.errors.JaxRuntimeError("UNKNOWN: Gloo AllReduce failed: [external/gloo/gloo/transport/tcp/pair.cc:589] "
                                "Connection reset by peer"), SLICE_LOST),
    (jax.errors.JaxRuntimeError("UNKNOWN: Gloo AllGather failed: [external/gloo/gloo/transport/tcp/pair.cc:538] "
                                "Read error [127.0.0.1]:26784: Connection reset by peer"), SLICE_LOST),
    (jax.errors.JaxRuntimeError("UNKNOWN: Gloo AllReduce failed: [external/gloo/gloo/transport/tcp/pair.cc:5] "
                                "Read error [127.0.0.1]:26784: bad checksum"), UNCLASSIFIED),  # not the peer's end
    (jax.errors.JaxRuntimeError("UNKNOWN: Gloo AllGather failed: bad input shape"), UNCLASSIFIED),  # not the transport
    (jax.errors.JaxRuntimeError("UNKNOWN: Connection closed by peer"), UNCLASSIFIED),  # not gloo's words
    (ZeroDivisionError("division by zero"), UNCLASSIFIED),  # raised outside the training code: not known to be 70
])
def test_each_outcome_maps_to_its_code(error, expected):
    assert exit_code_for(error) is expected


def test_an_exception_raised_through_the_training_code_is_a_user_error():
    """70 is for what the model, step, optimizer or data code raised: a real call into trainer/core/model.py."""
    from trainer.core.model import ModelShape

    with pytest.raises(Exception) as raised:
        ModelShape.from_config(None)  # the model code's own failure on a config it cannot read
    assert exit_code_for(raised.value) is USER_ERROR
    try:
        raise MemoryError() from raised.value  # out of memory inside the model code is still the host's
    except MemoryError as oom:
        assert exit_code_for(oom) is SLICE_LOST


def _flags(tmp_path, **overrides) -> list[str]:
    return config_flags(tiny_config(tmp_path, **overrides))


def test_a_checkpoint_dir_under_a_file_is_a_bad_setting_in_one_line(tmp_path, capsys):
    (tmp_path / "file").write_text("not a directory\n")
    code = main(_flags(tmp_path / "run", checkpoint_dir=str(tmp_path / "file" / "ckpt")), environ={})
    err = capsys.readouterr().err.strip().splitlines()
    assert code == BAD_SETTINGS.code == 2
    assert err == [f"error: --checkpoint-dir '{tmp_path / 'file' / 'ckpt'}': lies under {tmp_path / 'file'}, "
                   "which is a file, not a directory; give a directory"]
    assert not (tmp_path / "run").exists()  # nothing written


def test_slice_loss_without_in_process_retry_exits_slice_lost(tmp_path, capsys):
    # No settings from the environment; only the tests' XLA cache (tests/support/xla_cache.py), which would
    # otherwise be the cold one beside this run's checkpoints.
    only_the_cache = {k: v for k, v in os.environ.items() if k == "JAX_COMPILATION_CACHE_DIR"}
    code = main([*_flags(tmp_path, elastic_enabled=False), "--fault", "1@2"], environ=only_the_cache)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == SLICE_LOST.code == 75
    assert err == ["error: slice lost: DATA_LOSS: simulated loss of slice 1 before step 2"]


def test_sigterm_becomes_a_stop_request():
    from trainer.elastic.preemption import StopRequest, stop_on_sigterm

    stop = StopRequest()
    before = signal.getsignal(signal.SIGTERM)
    restore = stop_on_sigterm(stop)
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(1000):  # the handler runs between bytecodes of the main thread
            if stop.requested:
                break
        assert stop.requested == "SIGTERM"
    finally:
        restore()
    assert signal.getsignal(signal.SIGTERM) is before


def test_preemption_saves_the_current_step_and_the_resumed_run_is_bitwise_equal(tmp_path, reference_run):
    from elxpk.runs.compare import compare_runs
    from elxpk.runs.rundir import load_run
    from trainer.elastic.loop import train
    from trainer.elastic.preemption import StopRequest

    stop = StopRequest()

    def observer(kind, record):
        if kind == "metric" and record["step"] == 5:
            stop.request("SIGTERM")  # as the handler does when the kubelet preempts the pod

    cfg = tiny_config(tmp_path)
    with pytest.raises(TrainerStopped) as info:
        train(cfg, observer=observer, stop=stop)
    assert info.value.code is PREEMPTED and info.value.exit_code == 77
    (preempted,) = [e for e in read_jsonl(tmp_path / "events.jsonl") if e["event"] == "preempted"]
    assert preempted["step"] == 6 and preempted["saved"] is True and preempted["checkpoint_step"] == 6
    progress = read_progress((tmp_path / "checkpoints" / PROGRESS_FILE).read_text(encoding="utf-8"))
    assert progress.state == "preempted" and progress.steps_done == 6 and progress.checkpoint_step == 6

    train(cfg)  # the restarted pod: resumes from the step saved on the way out, rewinding nothing
    restores = [e for e in read_jsonl(tmp_path / "events.jsonl") if e["event"] == "restore_done"]
    assert restores[-1]["step"] == 6
    comparison = compare_runs(load_run(reference_run.run_dir), load_run(tmp_path))
    assert comparison.passed, comparison.failures()
    assert comparison.bitwise_equal == len(comparison.steps) and comparison.examples_b.exactly_once


def _trainer(repo_root, flags):
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}  # the trainer sets its own devices
    return subprocess.Popen([sys.executable, "-m", "trainer", *flags], cwd=repo_root, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.slow
def test_hang_without_in_process_retry_exits_stalled_with_the_stacks(repo_root, tmp_path):
    proc = _trainer(repo_root, [*_flags(tmp_path, elastic_enabled=False, stall_timeout_seconds=2.0),
                                "--fault", "1@hang:3"])
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == STALLED.code == 76, err[-2000:]
    assert err.strip().splitlines()[-1].startswith("error: stalled: no step completed for ")
    assert "Thread \"MainThread\"" in err  # the stacks went to the log too
    (stall,) = [e for e in read_jsonl(tmp_path / "events.jsonl") if e["event"] == "stall_detected"]
    assert stall["action"] == "exit" and stall["step"] == 3 and stall["slices"] == [1]
    assert "_hang_if_due" in (tmp_path / stall["stacks"]).read_text(encoding="utf-8")
    progress = read_progress((tmp_path / "checkpoints" / PROGRESS_FILE).read_text(encoding="utf-8"))
    assert progress.state == "stalled" and progress.steps_done == 3


@pytest.mark.slow
def test_sigterm_mid_run_exits_preempted_after_saving(repo_root, tmp_path):
    proc = _trainer(repo_root, _flags(tmp_path, steps=1_000_000, checkpoint_period=100_000, decay_steps=32))
    try:
        for _ in range(3000):  # until a few steps have completed (no timing is asserted)
            if len(read_jsonl(tmp_path / "metrics.jsonl")) >= 3 or proc.poll() is not None:
                break
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == PREEMPTED.code == 77, err[-2000:]
    (preempted,) = [e for e in read_jsonl(tmp_path / "events.jsonl") if e["event"] == "preempted"]
    assert preempted["saved"] is True and preempted["checkpoint_step"] == preempted["step"] >= 3
    assert (tmp_path / "checkpoints" / str(preempted["step"])).is_dir()
    assert err.strip().splitlines()[-1].startswith("error: preempted (SIGTERM) at step ")
