"""Hostile paths: nothing outside the run and checkpoint directories is moved or written.

Each case runs the real process the user runs (`python -m trainer`, `elxpk local run`) in a temporary
working directory that holds the user's own numbered folders (1, 2, 100), and compares every file and
folder under that directory's parent before and after.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.processes import run_measured

TINY = ["--steps", "4", "--checkpoint-period", "2", "--d-model", "32", "--n-layers", "1", "--n-heads", "2",
        "--d-ff", "64", "--seq-len", "8", "--vocab-size", "64", "--global-batch", "4"]
LOCAL_TINY = ["--steps", "4", "--checkpoint-period", "2", "--no-faults", "--plain",
              *(f"--trainer-arg={a}" for a in ("--d-model=32", "--n-layers=1", "--n-heads=2", "--d-ff=64",
                                               "--seq-len=8", "--vocab-size=64", "--global-batch=4"))]


def _user_tree(tmp_path: Path) -> Path:
    """tmp_path/work: the user's working directory, with numbered folders a careless trainer took for steps."""
    work = tmp_path / "work"
    for name in ("1", "2", "100"):
        (work / name).mkdir(parents=True)
        (work / name / "notes.txt").write_text(f"user data {name}\n")
    (tmp_path / "sibling").mkdir()
    return work


def _snapshot(top: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(top)): (p.read_bytes() if p.is_file() else None) for p in sorted(top.rglob("*"))}


def _run(argv: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 180
         ) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("ELXPK_")}
    full_env.update(env or {})
    return subprocess.run([sys.executable, *argv], cwd=cwd, env=full_env, capture_output=True, text=True,
                          timeout=timeout)


def _refused(proc: subprocess.CompletedProcess, names: str) -> None:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1 and lines[0].startswith(f"error: {names}"), lines
    assert "Traceback" not in proc.stderr


BLANKS = ["", " ", "\t", " \n "]


@pytest.mark.parametrize("blank", BLANKS)
@pytest.mark.parametrize("name", ["run_dir", "checkpoint_dir", "data", "coordinator"])
def test_trainer_blank_path_setting_exits_2_and_touches_nothing(tmp_path, name, blank):
    work = _user_tree(tmp_path)
    before = _snapshot(tmp_path)
    flag = "--" + name.replace("_", "-")
    # As a flag, as `--flag=`, and as the ELXPK_* variable.
    for argv, env, source in (([flag, blank], None, flag), ([f"{flag}={blank}"], None, flag),
                              ([], {"ELXPK_" + name.upper(): blank}, "ELXPK_" + name.upper())):
        proc = _run(["-m", "trainer", *TINY, *argv], work, env)
        _refused(proc, source)
        assert "empty (or only spaces); give a value or leave it unset" in proc.stderr
        assert _snapshot(tmp_path) == before


@pytest.mark.parametrize("target", [".", "..", "./", "/", "{work}"])
def test_trainer_refuses_the_working_directory_or_a_parent_as_checkpoint_dir(tmp_path, target):
    work = _user_tree(tmp_path)
    before = _snapshot(tmp_path)
    proc = _run(["-m", "trainer", *TINY, "--checkpoint-dir", target.format(work=work)], work)
    _refused(proc, "--checkpoint-dir")
    assert "working directory" in proc.stderr
    assert _snapshot(tmp_path) == before


def test_trainer_refuses_a_checkpoint_dir_of_foreign_numbered_folders(tmp_path):
    """The user's own folders, named like steps but without orbax's or the trainer's metadata, are never
    moved: the run is refused before anything is written. So is a stray folder whose number no run reaches."""
    work = _user_tree(tmp_path)
    (work / "ckpt" / "99999999999999999999999").mkdir(parents=True)
    (work / "ckpt" / "7").mkdir()
    (work / "ckpt" / "7" / "notes.txt").write_text("the user's")
    before = _snapshot(tmp_path)
    proc = _run(["-m", "trainer", *TINY, "--run-dir", "r", "--checkpoint-dir", "ckpt"], work)
    _refused(proc, "--checkpoint-dir 'ckpt': holds 7/, 99999999999999999999999/")
    assert _snapshot(tmp_path) == before


def test_trainer_moves_an_empty_step_folder_aside_like_any_torn_save(tmp_path):
    """A save killed before its first write leaves an empty folder named like a step; orbax's own listing
    would restore it as the latest. It holds nothing to lose, so the trainer treats it as never committed."""
    work = _user_tree(tmp_path)
    (work / "ckpt" / "7").mkdir(parents=True)
    proc = _run(["-m", "trainer", *TINY, "--run-dir", "r", "--checkpoint-dir", "ckpt"], work)
    assert proc.returncode == 0, proc.stderr
    assert not (work / "ckpt" / "7").exists() or any((work / "ckpt" / "7").iterdir())


def test_trainer_run_beside_user_folders_writes_only_its_own_directories(tmp_path):
    work = _user_tree(tmp_path)
    before = _snapshot(tmp_path)
    proc = _run(["-m", "trainer", *TINY, "--run-dir", "r", "--checkpoint-dir", "ckpts"], work)
    assert proc.returncode == 0, proc.stderr
    after = _snapshot(tmp_path)
    changed = {k for k in after.keys() | before.keys() if after.get(k, b"gone") != before.get(k, b"gone")}
    assert changed and all(k.startswith(("work/r", "work/ckpts")) for k in changed), sorted(changed)[:5]


@pytest.mark.parametrize("argv", [
    ["--run-dir", ""],
    ["--run-dir", "  "],
    ["--trainer-arg=--checkpoint-dir="],
    ["--trainer-arg=--checkpoint-dir= "],
    ["--trainer-arg=--data="],
    ["--trainer-arg=--checkpoint-dir=."],
    ["--trainer-arg=--checkpoint-dir=.."],
])
def test_local_run_blank_or_unsafe_paths_exit_2_and_touch_nothing(tmp_path, argv):
    work = _user_tree(tmp_path)
    before = _snapshot(tmp_path)
    proc = _run(["-m", "elxpk.cli.main", "local", "run", *LOCAL_TINY, *argv], work)
    _refused(proc, "--trainer-arg" if argv[-1].startswith("--trainer-arg=") else "--run-dir")
    assert _snapshot(tmp_path) == before


def test_quarantine_moves_only_step_directories_and_keeps_them_inside(tmp_path):
    from elxpk_storage import checkpoint_files as ckpt_storage

    root = ckpt_storage.checkpoint_root(str(tmp_path / "ckpt"))
    (root / "3").mkdir(parents=True)
    (root / "3" / "notes.txt").write_text("not a checkpoint")
    (root / "5" / "state").mkdir(parents=True)
    with pytest.raises(ValueError, match="not a checkpoint step directory"):
        ckpt_storage.quarantine(root, 3, "reason", now_ms=1)
    assert (root / "3" / "notes.txt").read_text() == "not a checkpoint"
    assert ckpt_storage.quarantine(root, 5, "reason", now_ms=1) == root / "elxpk-quarantine" / "5-1"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]


@pytest.mark.slow
def test_resume_of_another_configuration_writes_nothing(tmp_path):
    """The refusal comes before run.json, events.jsonl or the progress record are touched."""
    work = _user_tree(tmp_path)
    first = _run(["-m", "trainer", *TINY, "--run-dir", "r"], work)
    assert first.returncode == 0, first.stderr
    before = _snapshot(tmp_path)
    proc = _run(["-m", "trainer", *TINY, "--run-dir", "r", "--seed", "9"], work)
    _refused(proc, "--checkpoint-dir")
    assert "written by a different configuration" in proc.stderr
    assert _snapshot(tmp_path) == before
    again = _run(["-m", "trainer", *TINY, "--run-dir", "r", "--steps", "6"], work)  # the original settings resume
    assert again.returncode == 0, again.stderr


def test_a_model_too_big_for_the_machine_is_refused_before_any_allocation(tmp_path):
    work = _user_tree(tmp_path)
    before = _snapshot(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ELXPK_")}
    done = run_measured([sys.executable, "-m", "trainer", "--model", "7b", "--run-dir", "r"], env=env, cwd=work)
    _refused(subprocess.CompletedProcess([], done["code"], "", done["err"]), "--model 7b")
    assert "per device" in done["err"] and _snapshot(tmp_path) == before
    # The 7B parameters alone are 27 GB of float32; the refused process never came near that.
    assert done["rss_kib"] < 1 * 2**20, done["rss_kib"]  # KiB


def test_the_restore_deadline_fires_once_when_the_block_hangs_and_never_when_it_ends():
    import threading

    from trainer.ckpt.deadline import RESTORE_TIMEOUT_S, Deadline

    fired: list[tuple[str, float]] = []
    released = threading.Event()

    def expire(what: str, seconds: float) -> None:
        fired.append((what, seconds))
        released.set()  # what ending the process does for a hung restore: the block is over

    with Deadline("the checkpoint restore", 0.01, expire):
        assert released.wait(60)  # a generous bound on a hang, not a timing
    assert fired == [("the checkpoint restore", 0.01)]
    with Deadline("the checkpoint restore", RESTORE_TIMEOUT_S, expire):
        pass
    assert len(fired) == 1 and RESTORE_TIMEOUT_S == 1800


def test_quarantine_never_writes_through_a_link_named_like_its_reason_file(tmp_path):
    from elxpk_storage import checkpoint_files as ckpt_storage

    root = ckpt_storage.checkpoint_root(str(tmp_path / "ckpt"))
    (root / "5" / "state").mkdir(parents=True)
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    os.symlink(outside, root / "5" / ckpt_storage.SKIP_REASON_FILE)
    target = ckpt_storage.quarantine(root, 5, "reason", now_ms=1)
    assert target is not None and (target / ckpt_storage.SKIP_REASON_FILE).read_text() == "reason\n"
    assert outside.read_text() == "keep" and not os.path.islink(target / ckpt_storage.SKIP_REASON_FILE)
    assert ckpt_storage.quarantine(root, 5, "again", now_ms=2) is None  # gone: another process moved it


@pytest.mark.parametrize("argv", [["-m", "trainer", *TINY, "--run-dir", "/proc/elxpk-none/r"],
                                  ["-m", "trainer", *TINY, "--run-dir", "r", "--checkpoint-dir", "/proc/elxpk-none/c"],
                                  ["-m", "elxpk.cli.main", "local", "run", "--run-dir", "/proc/elxpk-none/r", "--plain"]],
                         ids=["trainer-run-dir", "trainer-checkpoint-dir", "local-run-dir"])
def test_a_directory_no_directory_can_be_made_in_is_the_users(tmp_path, argv):
    """/proc refuses a new directory with ENOENT, not EACCES: it was an internal error (exit 1). A checkpoint
    directory that cannot be written is refused before anything is written (the run's records were, once)."""
    proc = _run(argv, tmp_path)
    flag = "--checkpoint-dir" if "--checkpoint-dir" in argv else "--run-dir"
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith(f"error: {flag} /proc/elxpk-none/"), proc.stderr
    assert "cannot write there" in proc.stderr
    if flag == "--checkpoint-dir":  # refused before the run's first record: the run directory was never made
        assert not (tmp_path / "r").exists()
