"""Faults in the data loader and during restore are recovered like any slice loss."""

from __future__ import annotations

from tests.support.runs import STEPS, run_trainer


def test_kills_in_the_data_loader_and_during_restore_still_reproduce_the_reference(reference_run, tmp_path):
    run = run_trainer(tmp_path, faults=["1@data:5", "0@restore"], revive_after=0.05)
    errors = [e["error"] for e in run.events_named("failure_detected")]
    assert errors == [
        "DATA_LOSS: simulated loss of slice 1 in the data loader at step 5",
        "DATA_LOSS: simulated loss of slice 0 while restoring step 4",
    ]
    assert run.result.attempts == 3
    ref, got = reference_run.last_by_step(), run.last_by_step()
    assert [got[s]["loss"] for s in range(STEPS)] == [ref[s]["loss"] for s in range(STEPS)]
    # The loader had advanced past step 5's batch when the slice died; the restore rewound it.
    ids = [i for s in range(STEPS) for i in range(*got[s]["examples"])]
    assert ids == list(range(STEPS * run.cfg.global_batch))
