"""Only a checkpoint proven valid is restored (items iv and v); a foreign one is a clear error."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from elxpk.errors import UsageError
from tests.support.runs import STEPS, load_run, tiny_config


def test_kill_during_commit_leaves_nothing_restore_would_pick(reference_run, save_kill_run):
    run = save_kill_run
    (failure,) = run.events_named("failure_detected")
    assert failure["error"].startswith("DATA_LOSS:")
    assert "committing the checkpoint of step 8" in failure["error"] or failure["step"] >= 8
    skipped = run.events_named("checkpoint_skipped")
    assert [(e["step"], e["reason"].split(":")[0]) for e in skipped] == [(8, "never committed")]
    restores = run.events_named("restore_done")
    assert restores[-1]["step"] == 4  # not the half-written 8
    # ... and the rerun is still bit for bit the reference.
    ref, got = reference_run.last_by_step(), run.last_by_step()
    assert [got[s]["loss"] for s in range(STEPS)] == [ref[s]["loss"] for s in range(STEPS)]
    assert not list((run.run_dir / "checkpoints").glob("*.orbax-checkpoint-tmp"))


def _largest_file(step_dir: Path) -> Path:
    return max((p for p in (step_dir / "state").rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)


def _truncate(step_dir: Path) -> None:
    target = _largest_file(step_dir)
    data = target.read_bytes()
    target.write_bytes(data[: len(data) // 2])


def _flip_byte(step_dir: Path) -> None:
    # At 10% of the data file: orbax alone restores this silently with one wrong element.
    target = _largest_file(step_dir)
    data = bytearray(target.read_bytes())
    data[len(data) // 10] ^= 0x01
    target.write_bytes(bytes(data))


def _remove_marker(step_dir: Path) -> None:
    (step_dir / "elxpk_digest.json").unlink()


@pytest.mark.parametrize("corrupt, reason", [
    (_truncate, "file changed"),
    (_flip_byte, "file changed"),
    (_remove_marker, "no digest"),
])
def test_corrupt_latest_checkpoint_is_skipped_and_the_previous_restored(
        reference_run, tmp_path, corrupt, reason):
    from trainer.elastic import train

    shutil.copytree(reference_run.run_dir / "checkpoints", tmp_path / "checkpoints")
    corrupt(tmp_path / "checkpoints" / str(STEPS))
    cfg = tiny_config(tmp_path)
    run = load_run(cfg, train(cfg), tmp_path)
    (skipped,) = run.events_named("checkpoint_skipped")
    assert skipped["step"] == STEPS and skipped["reason"].startswith(reason)
    assert run.events_named("restore_done")[0]["step"] == STEPS - cfg.checkpoint_period
    ref = reference_run.last_by_step()
    assert {r["step"]: r["loss"] for r in run.metrics} == {s: ref[s]["loss"] for s in range(12, STEPS)}
    quarantined = list((tmp_path / "checkpoints-quarantine").iterdir())
    assert len(quarantined) == 1 and quarantined[0].name.startswith(f"{STEPS}-")


def test_checkpoint_of_another_configuration_is_a_clear_error(reference_run, tmp_path):
    from trainer.elastic import train

    shutil.copytree(reference_run.run_dir / "checkpoints", tmp_path / "checkpoints")
    with pytest.raises(UsageError, match="written by a different configuration"):
        train(tiny_config(tmp_path, seed=8))
    assert (tmp_path / "checkpoints" / str(STEPS)).is_dir()  # nothing was moved or deleted
