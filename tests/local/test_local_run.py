"""End to end: `elxpk local run` with a kill, its report, and its comparison with an uninterrupted run.

Tiny model, few steps; the runs are session-scoped and shared. In-process runs reuse this process's jax
(4 CPU devices = 2 slices x 2, set by tests/conftest.py).
"""

from __future__ import annotations

import json
import os

import pytest

from elxpk.local.options import LocalRunOptions
from elxpk.local.run import local_run

STEPS, PERIOD, KILL, EXTENDED = 30, 10, 17, 36
TINY = ("--d-model=32", "--n-layers=1", "--n-heads=2", "--d-ff=64", "--seq-len=16", "--vocab-size=64",
        "--global-batch=8")
TINY_FLAGS = [f"--trainer-arg={a}" for a in TINY]


def run_cli(*argv: str) -> tuple[int, str, str]:
    import contextlib
    import io

    from elxpk.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="session")
def reference(tmp_path_factory):
    """An uninterrupted run, long enough to check an extended run too."""
    run_dir = tmp_path_factory.mktemp("local") / "reference"
    code, out, err = run_cli("local", "run", "--run-dir", run_dir, "--steps", EXTENDED, "--checkpoint-period",
                             PERIOD, "--no-faults", "--plain", *TINY_FLAGS)
    assert code == 0, err
    return run_dir


@pytest.fixture(scope="session")
def killed(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("local") / "killed"
    code, out, err = run_cli("local", "run", "--run-dir", run_dir, "--steps", STEPS, "--checkpoint-period", PERIOD,
                             "--kill-slice", f"1@{KILL}", "--revive-after", "0.2", "--plain", *TINY_FLAGS,
                             "--trainer-arg=--recovery=checkpoint")  # the rewind path; test_live_local_run: live
    assert code == 0, err
    return run_dir, out, err


def test_kill_is_shown_reported_once_and_matches_reference(killed, reference):
    run_dir, out, err = killed
    restored = KILL // PERIOD * PERIOD
    assert f"slice 1 lost at step {KILL}" in out
    assert f"restored step {restored} in" in out
    assert f"step {KILL + 1} reached" in out
    assert "Traceback" not in out + err
    assert (run_dir / "report.json").is_file() and (run_dir / "report.png").is_file()

    code, out, _ = run_cli("report", run_dir, "-o", "json", "--no-png")
    report = json.loads(out)
    assert code == 0 and len(report["recoveries"]) == 1
    rec = report["recoveries"][0]
    assert (rec["failure_step"], rec["restored_step"], rec["lost_slices"]) == (KILL, restored, [1])
    assert rec["first_step_s"] > rec["restored_s"] >= rec["slices_ready_s"] >= 0
    # From the trainer's own fields: the lost slice (slices_lost), the return past the failed step (metric
    # times), each attempt's compile (restore_done's compile_s).
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    (failure,) = [e for e in events if e["event"] == "failure_detected"]
    assert failure["slices_lost"] == [1]
    back = [m for m in metrics if m["step"] == KILL + 1][-1]
    assert rec["caught_up_s"] == pytest.approx(back["time"] - failure["time"])
    compiles = [e["compile_s"] for e in events if e["event"] == "restore_done"]
    assert report["badput"]["compile_s"] == pytest.approx(sum(compiles))
    assert report["steps"] == STEPS and report["rewound_steps"] == KILL - restored
    assert 0 < report["goodput"] < 1

    code, out, err = run_cli("compare", reference, run_dir, "-o", "json")
    result = json.loads(out)
    assert code == 0, result["failures"]
    assert result["bitwise_equal"] and result["common_steps"] == STEPS
    assert result["examples_b"]["duplicates"] == 0 and result["examples_b"]["gaps"] == 0


def test_resume_extends_from_the_newest_checkpoint(killed, reference, tmp_path):
    import shutil

    run_dir = tmp_path / "extended"
    shutil.copytree(killed[0], run_dir)
    code, out, _ = run_cli("local", "run", "--run-dir", run_dir, "--steps", STEPS, "--plain", *TINY_FLAGS)
    assert code == 0 and f"already has {STEPS} steps" in out
    code, out, err = run_cli("local", "run", "--run-dir", run_dir, "--steps", EXTENDED, "--checkpoint-period",
                             PERIOD, "--plain", *TINY_FLAGS)
    assert code == 0, err
    assert f"resuming {run_dir}: {STEPS} steps recorded" in out
    assert f"restored step {STEPS} in" in out  # the final save of the first run
    assert "no faults)" in out and "lost at step" not in out.split("goodput")[0]  # no default kill on resume
    code, out, _ = run_cli("compare", reference, run_dir, "-o", "json")
    result = json.loads(out)
    assert code == 0 and result["bitwise_equal"] and result["common_steps"] == EXTENDED


class ReplayAfterRestore:
    """The Olmo 3 data-loader bug: after a restore it serves the last batch again."""

    def __init__(self, inner, batch: int) -> None:
        self.inner, self.batch = inner, batch

    def next_batch(self):
        return self.inner.next_batch()

    def get_state(self) -> dict:
        return self.inner.get_state()

    def set_state(self, state: dict) -> None:
        position = int(state["global_next_index"])
        self.inner.set_state({"global_next_index": max(0, position - self.batch)})


def test_broken_loader_is_caught_by_compare(reference, tmp_path):
    from trainer.data.data import ElasticIterator, SyntheticTokens

    opts = LocalRunOptions.from_flags(run_dir=str(tmp_path / "broken"), steps=STEPS, num_slices=2,
                                      checkpoint_period=PERIOD, kill_slice=[f"1@{KILL}"], no_faults=False,
                                      revive_after=0.2, mode="pause-resume", seed=0, live=False,
                                      report=False, trainer_args=(*TINY, "--recovery=checkpoint"))
    cfg = opts.trainer_config()
    broken = ReplayAfterRestore(ElasticIterator(SyntheticTokens(cfg.vocab_size, cfg.seq_len, cfg.seed),
                                                cfg.global_batch), cfg.global_batch)
    import io

    local_run(opts, out=io.StringIO(), dataset=broken)
    code, out, err = run_cli("compare", reference, tmp_path / "broken")
    assert code == 1
    restored = KILL // PERIOD * PERIOD
    assert f"run B consumed {cfg.global_batch} examples more than once" in out
    assert f"[{(restored - 1) * cfg.global_batch}, {restored * cfg.global_batch})" in out
    assert err.startswith("error: runs differ")


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["--kill-slice", "5@10"], "--kill-slice '5@10': slice 5 does not exist"),
        (["--steps", "0"], "--steps 0"),
        (["--kill-slice", "1@5", "--no-faults"], "--no-faults"),
        (["--kill-slice", "1@500"], "--kill-slice '1@500': step 500 is never reached"),
        (["--mode", "multi-controller", "--kill-slice", "1@save:10"], "--kill-slice '1@save:10'"),
        (["--revive-after", "soon"], "--revive-after 'soon'"),
    ],
)
def test_bad_input_exits_2_and_writes_nothing(tmp_path, argv, flag):
    run_dir = tmp_path / "never"
    code, out, err = run_cli("local", "run", "--run-dir", run_dir, "--plain", *argv)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {flag}"), lines
    assert not run_dir.exists() and out == ""


def test_run_dir_that_is_a_file_is_bad_input(tmp_path):
    path = tmp_path / "file"
    path.write_text("not a run")
    code, out, err = run_cli("local", "run", "--run-dir", path, "--plain")
    assert code == 2 and err.startswith("error: --run-dir") and path.read_text() == "not a run"


def test_run_dir_under_a_file_is_bad_input(tmp_path):
    path = tmp_path / "file"
    path.write_text("not a run")
    code, out, err = run_cli("local", "run", "--run-dir", path / "sub" / "run", "--plain")
    assert code == 2 and out == "" and "Traceback" not in err
    assert err.strip() == f"error: --run-dir {path / 'sub' / 'run'}: is under {path}, which is a file; give a new " \
                          "or an existing run directory"
    assert path.read_text() == "not a run" and sorted(tmp_path.iterdir()) == [path]


def _snapshot(run_dir) -> dict:
    return {str(p.relative_to(run_dir)): p.read_bytes() for p in sorted(run_dir.rglob("*")) if p.is_file()}


def test_second_run_on_a_locked_run_dir_is_refused(killed, tmp_path):
    import shutil

    from elxpk.local.run import run_dir_lock

    run_dir = tmp_path / "busy"
    shutil.copytree(killed[0], run_dir)
    with run_dir_lock(run_dir):  # a first `local run` holds it (an flock, as a second process would see it)
        before = _snapshot(run_dir)
        code, out, err = run_cli("local", "run", "--run-dir", run_dir, "--steps", EXTENDED, "--plain", *TINY_FLAGS)
        assert code == 2 and out == ""
        assert err.strip().splitlines() == [f"error: --run-dir {run_dir}: another `elxpk local run` (pid {os.getpid()}) "
                                            "is using it; wait for it to finish, or give another --run-dir"]
        assert _snapshot(run_dir) == before
    # Released with its holder: the same command now runs.
    code, out, err = run_cli("local", "run", "--run-dir", run_dir, "--steps", STEPS, "--plain", *TINY_FLAGS)
    assert code == 0 and f"already has {STEPS} steps" in out, err


def test_resume_refused_for_another_configuration_writes_nothing(killed, tmp_path):
    import shutil

    run_dir = tmp_path / "other"
    shutil.copytree(killed[0], run_dir)
    before = _snapshot(run_dir)
    code, out, err = run_cli("local", "run", "--run-dir", run_dir, "--steps", EXTENDED, "--seed", "9", "--plain",
                             *TINY_FLAGS)
    lines = err.strip().splitlines()
    assert code == 2 and out == "" and len(lines) == 1
    assert lines[0].startswith(f"error: --run-dir {run_dir}: holds a run of another configuration (seed 0 there, "
                               "9 now)")
    assert _snapshot(run_dir) == before  # run.json, events.jsonl and the checkpoints untouched


def test_resize_continues_on_the_survivor(reference, tmp_path):
    run_dir = tmp_path / "resize"
    code, out, err = run_cli("local", "run", "--run-dir", run_dir, "--mode", "resize", "--steps", STEPS,
                             "--checkpoint-period", PERIOD, "--kill-slice", f"1@{KILL}", "--revive-after", "600",
                             "--plain", *TINY_FLAGS)
    assert code == 0, err
    assert f"slice 1 lost at step {KILL}" in out
    final = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()][-1]
    assert final["step"] == STEPS - 1 and final["slices"] == [0]  # finished on the survivor alone
    code, out, _ = run_cli("compare", reference, run_dir, "-o", "json")  # no --rtol: resize is bitwise
    result = json.loads(out)
    assert code == 0, result["failures"]
    assert result["bitwise_equal"] and result["common_steps"] == STEPS
    assert result["examples_b"]["duplicates"] == 0 and result["examples_b"]["gaps"] == 0
