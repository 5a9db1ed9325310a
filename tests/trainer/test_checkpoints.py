"""Only a checkpoint proven valid is restored (items iv and v); a foreign one is a clear error."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from elxpk_contract.errors import UsageError
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
    # At 10% of the data file: where that lands in an array's raw bytes, orbax alone restores it silently
    # with one wrong element (the fingerprint catches it); the chunks' order in the file follows orbax's
    # concurrent writes, so it can land in a chunk's framing instead, which orbax cannot read.
    target = _largest_file(step_dir)
    data = bytearray(target.read_bytes())
    data[len(data) // 10] ^= 0x01
    target.write_bytes(bytes(data))


def _remove_marker(step_dir: Path) -> None:
    (step_dir / "elxpk_digest.json").unlink()


def _reshape_digest(change):
    """Rewrite the digest as valid JSON of the wrong shape: `change` maps the record to what is written."""
    def corrupt(step_dir: Path) -> None:
        path = step_dir / "elxpk_digest.json"
        path.write_text(json.dumps(change(json.loads(path.read_text()))))
    return corrupt


@pytest.mark.parametrize("corrupt, reason", [
    (_truncate, "file changed"),
    (_flip_byte, ("fingerprint mismatch: ", "orbax could not read it: ")),
    (_remove_marker, "no digest"),
    (_reshape_digest(lambda d: [d]), "digest file has the wrong shape: a JSON list, not an object"),
    (_reshape_digest(lambda d: {**d, "files": sorted(d["files"])}),
     "digest file has the wrong shape: 'files' is ["),
    (_reshape_digest(lambda d: {**d, "files": dict.fromkeys(d["files"], "1")}),
     "digest file has the wrong shape: files["),
    (_reshape_digest(lambda d: {**d, "arrays": dict.fromkeys(d["arrays"], "0" * 64)}),
     "digest file has the wrong shape: arrays["),
    (_reshape_digest(lambda d: {**d, "step": str(d["step"])}), "digest file has the wrong shape: 'step' is '16'"),
    (_reshape_digest(lambda d: {k: v for k, v in d.items() if k != "fingerprint"}),
     "digest file has the wrong shape: 'fingerprint' is None, not a str"),
])
def test_corrupt_latest_checkpoint_is_skipped_and_the_previous_restored(
        reference_run, tmp_path, corrupt, reason):
    from trainer.elastic.loop import train

    shutil.copytree(reference_run.run_dir / "checkpoints", tmp_path / "checkpoints")
    corrupt(tmp_path / "checkpoints" / str(STEPS))
    cfg = tiny_config(tmp_path)
    run = load_run(cfg, train(cfg), tmp_path)
    (skipped,) = run.events_named("checkpoint_skipped")
    assert skipped["step"] == STEPS and skipped["reason"].startswith(reason)
    assert run.events_named("restore_done")[0]["step"] == STEPS - cfg.checkpoint_period
    ref = reference_run.last_by_step()
    assert {r["step"]: r["loss"] for r in run.metrics} == {s: ref[s]["loss"] for s in range(12, STEPS)}
    quarantined = list((tmp_path / "checkpoints" / "elxpk-quarantine").iterdir())
    assert len(quarantined) == 1 and quarantined[0].name.startswith(f"{STEPS}-")


def test_checkpoint_of_another_configuration_is_a_clear_error(reference_run, tmp_path):
    from trainer.elastic.loop import train

    shutil.copytree(reference_run.run_dir / "checkpoints", tmp_path / "checkpoints")
    with pytest.raises(UsageError, match="written by a different configuration"):
        train(tiny_config(tmp_path, seed=8))
    assert (tmp_path / "checkpoints" / str(STEPS)).is_dir()  # nothing was moved or deleted


def test_checkpoint_recording_another_step_than_its_directory_is_skipped(reference_run, tmp_path):
    """A step directory copied under a newer number, with a digest rewritten to match, still records its own
    step in its metadata: resuming it would start at the wrong step with the wrong data position."""
    from elxpk_storage import digest
    from trainer.elastic.loop import train

    root = tmp_path / "checkpoints"
    shutil.copytree(reference_run.run_dir / "checkpoints", root)
    fake = STEPS + 4
    shutil.copytree(root / str(STEPS), root / str(fake))
    (root / str(fake) / "elxpk_digest.json").unlink()
    cfg = tiny_config(tmp_path, steps=fake)
    digest.write_digest(root / str(fake), fake, cfg.fingerprint(), digest.read_digest(root / str(STEPS))["arrays"])
    assert digest.verify(root / str(fake), fake) is None  # the digest alone cannot tell
    run = load_run(cfg, train(cfg), tmp_path)
    (skipped,) = run.events_named("checkpoint_skipped")
    assert skipped["step"] == fake
    assert skipped["reason"] == f"it records step {STEPS} but sits in directory {fake} (renamed or copied)"
    assert run.events_named("restore_done")[0]["step"] == STEPS
    assert [r["step"] for r in run.metrics] == list(range(STEPS, fake))  # no step was skipped
    assert run.metrics[0]["examples"][0] == STEPS * cfg.global_batch  # the data position of step 16
    (moved,) = (tmp_path / "checkpoints" / "elxpk-quarantine").iterdir()
    assert moved.name.startswith(f"{fake}-")
    assert (moved / "elxpk_skip_reason.txt").read_text().strip() == skipped["reason"]
