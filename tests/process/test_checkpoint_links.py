"""Hostile checkpoint directories as the user meets them, through real processes: folders named with digits
that are not ASCII, symbolic links (to `/`, to a sibling outside, to a file, a loop), a quarantine name
taken by a file or a link, two `--quarantine` runs at once, and an empty step folder, which orbax's own
`latest_step()` takes for its newest step until the quarantine moves it aside. Nothing is ever written
outside the checkpoint directory: a sibling directory is snapshot before and after."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from tests.process.conftest import elxpk, trainer, user_env
from tests.process.test_checkpoint_inspect import copy, inspect, orbax_writer, states

pytestmark = pytest.mark.slow
BOUND_S = 120  # generous: a walk of `/` through a link would run far past it


def snapshot(top: Path) -> dict[str, bytes | str | None]:
    out: dict[str, bytes | str | None] = {}
    for folder, dirs, files in os.walk(top):  # never follows a link
        for name in dirs + files:
            path = Path(folder) / name
            out[str(path.relative_to(top))] = (os.readlink(path) if path.is_symlink()
                                               else path.read_bytes() if path.is_file() else None)
    return out


def orbax_listing(directory: Path) -> dict:
    done = subprocess.run([sys.executable, "-m", "tests.support.orbax_writer", str(directory), "--latest-step"],
                          cwd=REPO_ROOT, env=user_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def orbax_dir(tmp_path_factory) -> Path:
    """Three committed saves, every 2 steps, by orbax's own writer (MaxText's setup)."""
    root = tmp_path_factory.mktemp("orbax") / "checkpoints"
    orbax_writer(root, "2:1,4:1,6:1")
    return root


@pytest.fixture
def outside(tmp_path) -> Path:
    sibling = tmp_path / "outside"
    (sibling / "deep").mkdir(parents=True)
    (sibling / "deep" / "data.bin").write_bytes(b"x" * 100)
    (sibling / "_CHECKPOINT_METADATA").write_text("{}")
    return sibling


def linked(root: Path, outside: Path) -> None:
    (root / "8").symlink_to("/")
    (root / "10").symlink_to(outside)
    shutil.copytree(root / "6", root / "12")
    (root / "12" / "items" / "escape").symlink_to("/")
    (root / "14").symlink_to(outside / "deep" / "data.bin")
    (root / "16").symlink_to(root / "16")  # a loop


def test_inspect_never_follows_a_link_and_quarantine_moves_only_the_links(orbax_dir, outside, tmp_path):
    root = copy(orbax_dir, tmp_path)
    linked(root, outside)
    before = snapshot(outside)
    code, report, _ = inspect(root, cwd=tmp_path)
    assert code == 1
    found = states(report)
    for name in ("8", "10", "12", "14", "16"):
        assert found[name][0] == "torn" and "symbolic link" in found[name][1], (name, found[name])
    assert "escape (-> /)" in found["12"][1] and found["6"] == ("committed", "")
    code, report, err = inspect(root, "--quarantine", cwd=tmp_path)
    assert code == 0, err
    assert sorted(m["name"] for m in report["moved"]) == ["10", "12", "14", "16", "8"]
    assert report["restore_step"] == 6 and sorted(p.name for p in root.iterdir()) == ["2", "4", "6", "elxpk-quarantine"]
    quarantined = root / "elxpk-quarantine"
    assert sorted(os.readlink(p) for p in quarantined.iterdir() if p.is_symlink())[0] == "/"
    reasons = [p for p in quarantined.iterdir() if p.name.endswith("elxpk_skip_reason.txt")]
    assert len(reasons) == 4 and all(not p.is_symlink() for p in reasons)  # beside each link, not through it
    assert (quarantined / next(m["to"] for m in report["moved"] if m["name"] == "12").split("/")[-1]
            / "elxpk_skip_reason.txt").read_text().startswith("holds a symbolic link items/escape")
    assert snapshot(outside) == before
    assert orbax_listing(root) == {"latest": 6, "steps": [2, 4, 6]}


def test_the_quarantine_folder_must_be_a_real_directory_inside(orbax_dir, outside, tmp_path):
    root = copy(orbax_dir, tmp_path)
    shutil.rmtree(root / "6" / "items")  # torn: --quarantine would move it
    before_outside, before_root = snapshot(outside), snapshot(root)
    (root / "elxpk-quarantine").symlink_to(outside)
    done = elxpk(["checkpoint", "inspect", str(root), "--quarantine"], tmp_path)
    assert done.code == 2 and done.err.count("\n") == 1, done.err
    assert "elxpk-quarantine: is a symbolic link" in done.err and str(outside) in done.err
    (root / "elxpk-quarantine").unlink()
    (root / "elxpk-quarantine").write_text("someone's file")
    done = elxpk(["checkpoint", "inspect", str(root), "--quarantine"], tmp_path)
    assert done.code == 2 and "elxpk-quarantine: is a file" in done.err and done.err.count("\n") == 1, done.err
    (root / "elxpk-quarantine").unlink()
    assert snapshot(outside) == before_outside and snapshot(root) == before_root


def test_two_concurrent_quarantines_lose_nothing_and_never_fail_inside(orbax_dir, tmp_path):
    root = copy(orbax_dir, tmp_path)
    for step in range(8, 40, 2):  # many torn steps, so the two runs overlap
        shutil.copytree(root / "6", root / str(step))
        shutil.rmtree(root / str(step) / "items")
    exe = shutil.which("elxpk", path=str(Path(sys.executable).parent))
    args = [exe, "checkpoint", "inspect", str(root), "--quarantine", "-o", "json"]
    procs = [subprocess.Popen(args, cwd=tmp_path, env=user_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(2)]
    results = [p.communicate(timeout=BOUND_S) for p in procs]
    for proc, (_out, err) in zip(procs, results, strict=True):
        assert proc.returncode == 0, err
        assert "internal error" not in err and "Traceback" not in err
    reports = [json.loads(out) for out, _ in results]
    moved = [m["name"] for r in reports for m in r["moved"]]
    skipped = [s["name"] for r in reports for s in r["skipped"]]
    assert sorted(moved, key=int) == [str(s) for s in range(8, 40, 2)]  # each moved exactly once
    assert all(n not in moved or moved.count(n) == 1 for n in skipped)
    assert len(list((root / "elxpk-quarantine").iterdir())) == 16


def test_an_empty_step_folder_is_what_orbax_restores_until_quarantine_moves_it(orbax_dir, tmp_path):
    root = copy(orbax_dir, tmp_path)
    (root / "8").mkdir()  # a save killed before its first write
    assert orbax_listing(root) == {"latest": 8, "steps": [2, 4, 6, 8]}  # orbax's own choice: the empty one
    code, report, _ = inspect(root, cwd=tmp_path)
    assert code == 1 and states(report)["8"][0] == "torn" and "empty" in states(report)["8"][1]
    assert not any("--quarantine leaves it" in f for f in report["findings"])
    code, report, _ = inspect(root, "--quarantine", cwd=tmp_path)
    assert code == 0 and [m["name"] for m in report["moved"]] == ["8"]
    assert orbax_listing(root) == {"latest": 6, "steps": [2, 4, 6]}


def test_an_empty_step_prefix_on_gs_is_moved_aside(orbax_dir, tmp_path):
    done = subprocess.run([sys.executable, "-m", "tests.process.gs_checkpoint_inspect", str(orbax_dir), "8"],
                          cwd=REPO_ROOT, env=user_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout)
    first, moving, after = out["runs"]
    assert first["code"] == 1 and "empty" in states(json.loads(first["out"]))["8"][1]
    assert [m["name"] for m in json.loads(moving["out"])["moved"]] == ["8"] and after["code"] == 0
    assert out["names"] == ["2", "4", "6", "elxpk-quarantine"]


def test_plan_from_run_and_local_resume_read_a_run_with_odd_folders(finished_short_run, outside, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(finished_short_run, run)
    for name in ("²", "٣", "３"):
        (run / "checkpoints" / name).mkdir()
    (run / "checkpoints" / "40").symlink_to("/")  # the newest "step": its size is never summed through the link
    done = elxpk(["plan", "--from-run", str(run), "--slice-mtbf", "10h", "--restore", "90s"], tmp_path, timeout=BOUND_S)
    assert done.code == 0 and "internal error" not in done.err, done.err[-2000:]
    (run / "checkpoints" / "40").unlink()
    before = snapshot(outside)
    done = elxpk(["local", "run", "--run-dir", str(run), "--no-faults", "--steps", "6"], tmp_path, timeout=600)
    assert "internal error" not in done.err and "Traceback" not in done.err, done.err[-3000:]
    assert done.code == 2 and "²" in done.err, done.err[-2000:]  # the trainer's refusal: orbax would list them
    assert snapshot(outside) == before


def _resume(run: Path, steps: int, cwd: Path) -> tuple[list[dict], dict[int, str]]:
    """Run the trainer on `run` to `steps` (exit 0 expected): its events, and the skipped steps' reasons."""
    done = trainer(["--run-dir", str(run), "--steps", str(steps), "--checkpoint-period", "2"], cwd,
                   timeout=BOUND_S * 3)
    assert done.code == 0, done.err[-3000:]
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    return events, {e["step"]: e["reason"] for e in events if e["event"] == "checkpoint_skipped"}


def test_the_trainer_restore_passes_over_linked_steps(finished_short_run, outside, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(finished_short_run, run)
    ckpt = run / "checkpoints"
    (ckpt / "4" / "state" / "escape").symlink_to("/")
    (ckpt / "6").symlink_to("/")
    before = snapshot(outside)
    events, skipped = _resume(run, 6, tmp_path)
    assert skipped[6].startswith("holds a symbolic link 6 (-> /): not restored")
    assert skipped[4].startswith("holds a symbolic link state/escape (-> /): not restored")
    restored = [e for e in events if e["event"] == "restore_done"][-1]
    assert restored["step"] == 2 and restored["from_checkpoint"]
    assert snapshot(outside) == before
    assert any(p.is_symlink() and os.readlink(p) == "/" for p in (ckpt / "elxpk-quarantine").iterdir())


def test_the_trainer_never_opens_what_orbax_would_read_through_a_link(finished_short_run, outside, tmp_path):
    """The fifth pass: orbax's CheckpointManager reads every step's _CHECKPOINT_METADATA when it opens the
    directory, before restore could pass over a step. A link to /dev/zero there read until the OOM killer
    ended the run (exit 137), a FIFO blocked it; a progress record that is a link to /dev/zero did the same.
    Now each such step is moved aside before orbax opens the directory, and the record is read bounded."""
    import stat

    run = tmp_path / "run"
    shutil.copytree(finished_short_run, run)
    ckpt = run / "checkpoints"
    shutil.copytree(ckpt / "4", ckpt / "6")
    (ckpt / "6" / "_CHECKPOINT_METADATA").unlink()
    (ckpt / "6" / "_CHECKPOINT_METADATA").symlink_to("/dev/zero")
    (ckpt / "4" / "_CHECKPOINT_METADATA").unlink()
    os.mkfifo(ckpt / "4" / "_CHECKPOINT_METADATA")
    os.mknod(ckpt / "2" / "state" / "sock", stat.S_IFSOCK | 0o600)  # a socket inside a step: torn too
    (ckpt / "elxpk-progress.json").unlink()
    (ckpt / "elxpk-progress.json").symlink_to("/dev/zero")
    before = snapshot(outside)
    _, skipped = _resume(run, 8, tmp_path)
    assert skipped[6].startswith("holds a symbolic link _CHECKPOINT_METADATA (-> /dev/zero)"), skipped
    assert skipped[4].startswith("holds a special file _CHECKPOINT_METADATA"), skipped
    assert skipped[2].startswith("holds a special file state/sock"), skipped
    assert not (ckpt / "elxpk-progress.json").is_symlink()  # replaced by the trainer's own record
    assert snapshot(outside) == before


def test_special_files_hardlinks_and_a_linked_checkpoint_dir(orbax_dir, outside, tmp_path):
    """A FIFO or a socket in a step is torn and moved unopened; a hard link is an ordinary file; a dangling
    link is torn; the checkpoint directory itself may be a link (the user named it: it is followed, and
    nothing below it is)."""
    import stat

    real = copy(orbax_dir, tmp_path)
    os.mkfifo(real / "6" / "fifo")
    shutil.copytree(real / "4", real / "8")
    os.mknod(real / "8" / "sock", stat.S_IFSOCK | 0o600)
    shutil.copytree(real / "4", real / "10")
    (real / "10" / "dangling").symlink_to(tmp_path / "nowhere")
    marker = next(p for p in (real / "2").iterdir() if p.is_file())
    os.link(marker, tmp_path / "hard")  # a second name outside: the step's file is still a regular file
    root = tmp_path / "linked-checkpoints"
    root.symlink_to(real)
    before = snapshot(outside)
    code, report, _ = inspect(root, cwd=tmp_path)
    found = states(report)
    assert code == 1 and found["2"] == ("committed", ""), found
    assert "special file fifo" in found["6"][1] and "moving it opens nothing" in found["6"][1]
    assert "special file sock" in found["8"][1] and "dangling" in found["10"][1]
    code, report, err = inspect(root, "--quarantine", cwd=tmp_path)
    assert code == 0 and sorted(m["name"] for m in report["moved"]) == ["10", "6", "8"], err
    assert report["restore_step"] == 4 and root.is_symlink() and (real / "elxpk-quarantine").is_dir()
    assert snapshot(outside) == before
