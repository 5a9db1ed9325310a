"""`workload kill-slice` once (elxpk/cluster/verbs/kill_slice.py): the force-delete of one slice, its confirmation,
and --watch's bounded wait, against the fake API server with captured objects (no controllers there, so a
killed slice never comes back). The soak rounds on real controllers are tests/realcluster/test_ops_real.py."""

from __future__ import annotations

import json

import pytest

from elxpk.cluster.objects.labels import parse_time
from elxpk.cluster.verbs.kill_slice import Io, KillRequest, run
from elxpk.cluster.verbs.ops import kill, plan_kill
from elxpk.cluster.verbs.trainer_recovery import watch_recovery
from elxpk.errors import ClusterError
from elxpk.units import format_clock
from tests.cluster.captured import KINDS, load_captured, with_checkpoint_dir
from tests.cluster.conftest import run_cli
from trainer.clock import SystemClock
from trainer.elastic import drain
from trainer.elastic.progress import ProgressWriter


def _deletes(fake) -> list:
    return [c for c in fake.calls if c.method == "DELETE" and "/pods/" in c.path]


def test_one_slice_is_force_deleted_with_grace_period_zero(fake, capsys, k):
    load_captured(fake)
    code, out, err = run_cli(capsys, "workload", "kill-slice", "ops", "--slice", "1", "--yes", *k)
    assert code == 0, err
    deletes = _deletes(fake)
    assert out == f"killed slice 1 of ops: {len(deletes)} pods force-deleted\n" and deletes
    # In the body, beside the preconditions: the API server reads no query of a DELETE that has a body.
    assert all(json.loads(c.body)["gracePeriodSeconds"] == 0 and not c.query.get("gracePeriodSeconds")
               for c in deletes)


def test_without_yes_and_a_terminal_nothing_is_deleted(fake, capsys, k):
    load_captured(fake)
    code, out, err = run_cli(capsys, "workload", "kill-slice", "ops", "--slice", "0", *k)
    assert (code, out) == (2, "")
    assert err.startswith("error: force-delete ") and err.rstrip().endswith(
        "needs confirmation: pass --yes (stdin is not a terminal)")
    assert _deletes(fake) == []


def test_watch_gives_up_after_its_timeout_with_exit_124(fake, capsys, k):
    load_captured(fake)
    code, out, err = run_cli(capsys, "workload", "kill-slice", "ops", "--slice", "0", "--vm", "0", "--yes",
                             "--watch", "--timeout", "1s", "--poll", "100ms", *k)
    assert code == 124, err
    assert out.startswith("killed slice 0 vm 0 of ops: 1 pods force-deleted")
    assert "error: slice pods of ops not running again after 1.0s" in err
    assert "ops: 0/1 replacement pods ready" in err  # the progress ticks, on stderr
    # A poll every 100 ms for a second repeats its state: printed once per change, not once per poll.
    assert err.count("ops: 0/1 replacement pods ready") == 1, err


def test_watch_of_a_workload_that_finished_ends_at_once_with_exit_1(fake, capsys, k, kube, clock):
    """A kill that lands as the training ends: no controller replaces a finished JobSet's pods, so the watch
    says so at once instead of waiting out its 30 min timeout (seen in CI at a load of 20). Once it has
    finished, kill-slice kills nothing (#43: its pods are what is left of the run, their exits and logs)."""
    objects = load_captured(fake)
    plan = plan_kill(kube, "default", "ops", 0, 0)
    jobset = objects["jobset"]
    jobset.setdefault("status", {})["conditions"] = [
        {"type": "Completed", "status": "True", "reason": "AllJobsCompleted", "message": "jobset completed"}]
    fake.store.put(KINDS["jobset"], jobset)  # the training ended as the kill landed
    kill(kube, "default", plan)
    with pytest.raises(ClusterError, match="ops succeeded before its killed pods were replaced"):
        watch_recovery(kube, "default", "ops", plan, killed_at=clock(), clock=clock, sleep=clock.sleep,
                       timeout_s=300, poll_s=1)
    assert clock.slept == []  # at once
    before = len(_deletes(fake))
    code, out, err = run_cli(capsys, "workload", "kill-slice", "ops", "--slice", "1", "--yes", "--watch", *k)
    assert (code, out, err) == (1, "", "error: workload ops has succeeded: nothing runs to kill; nothing was deleted\n")
    assert len(_deletes(fake)) == before


@pytest.mark.parametrize("process_started", [2.5, -100.0])
def test_watch_times_the_recovery_to_the_trainers_next_step_not_to_pods_ready(fake, kube, clock, tmp_path,
                                                                            process_started):
    """... and the rewind is what the old processes recorded at their stop (a drain that did not save: 10
    steps back to checkpoint 120), unknown where they recorded none (#52 M4: never an estimate)."""
    """#43: pods ready is not training (imports, restore and compile follow). The replacement pods come back
    at the first poll; the trainer's next step, 9.5 s after the kill, is read from its progress record as its
    restarted process writes it (at its first step), with that process's start-up (#49) when the process
    started after the kill (`process_started` s after it), not when it is one that recovered in place.
    The controllers' part is the captured objects'."""
    objects = with_checkpoint_dir(load_captured(fake), tmp_path)
    fake.store.put(KINDS["jobset"], objects["jobset"])
    # now: after the captured containers started (the replacements are those, with new uids)
    clock.now = max(parse_time(cs["state"]["running"]["startedAt"]) or 0.0 for p in objects["pods"]
                    for cs in p["status"]["containerStatuses"]) + 1.0
    killed_at = clock()

    def replaced() -> None:  # the Job controller's replacements, running and ready; the old group's last word
        load_captured(fake, fresh_uids=True, without=("jobset",))
        stopped = ProgressWriter(str(tmp_path), SystemClock())
        stopped.step_done(130, killed_at + 1.0, 1)  # a step the old processes ended after the kill: no recovery
        stopped.finish("failed", "slice 1 lost", 75,
                       drain.outcome(130, 120, False, "grace too short") if process_started > 0 else None)

    def first_step() -> None:  # the restarted trainer's first step: its first write of the record
        writer = ProgressWriter(str(tmp_path), SystemClock())
        writer.startup({"imports_done": 2.0, "restore_done": 4.0, "executable_ready": 4.5, "first_step_done": 7.0},
                       "deserialized", killed_at + process_started)
        writer.step_done(131, killed_at + 9.5, 1)

    clock.on_sleep += [replaced, lambda: None, first_step]
    lines: list[str] = []
    request = KillRequest("ops", 1, None, "delete", 143, 1, 600.0, None, True, 300.0, 2.0)
    assert run(kube, "default", request, Io(out=lines.append, tick=lambda text: None, confirm=lambda question: None,
                                            clock=clock, sleep=clock.sleep))
    assert lines[1] == "slice 1's pods running and ready again after 2.0s"
    assert lines[2] == (f"recovered: the trainer's next step 9.5s after the kill (step 131 done), at "
                        f"{format_clock(killed_at + 9.5)}, from the trainer's progress record")
    assert lines[3:] == (["  the new process's start: imports 2.00 s -> restored 4.00 s -> step (deserialized) 4.50 s -> first step 7.00 s",
                          "  rewound: 10 steps, as the trainer recorded its stop"]
                         if process_started > 0 else ["  rewound: unknown (the trainer recorded no stop with its rewind)"])
    assert clock.slept == [2.0, 2.0, 2.0]  # polled until the record showed a step after the kill


def test_watch_reads_the_first_step_of_the_recovery_not_a_later_write(fake, kube, clock, tmp_path):
    """#52: the restarted trainer writes its record again before kill-slice's next poll (a checkpoint's commit
    writes at once, with the newest step's time): the recovery still ends at its first step (the record's
    `resumed_at`), as the trainer's records and the `recovered` alert have it, not at the later step."""
    objects = with_checkpoint_dir(load_captured(fake), tmp_path)
    fake.store.put(KINDS["jobset"], objects["jobset"])
    clock.now = max(parse_time(cs["state"]["running"]["startedAt"]) or 0.0 for p in objects["pods"]
                    for cs in p["status"]["containerStatuses"]) + 1.0
    killed_at = clock()

    def replaced() -> None:
        load_captured(fake, fresh_uids=True, without=("jobset",))

    def stepped_and_saved() -> None:  # the first step at 9.5 s, then a commit at 12 s, both between two polls
        writer = ProgressWriter(str(tmp_path), SystemClock())
        writer.step_done(131, killed_at + 9.5, 1)
        writer.step_done(140, killed_at + 12.0, 1)
        writer.checkpoint(140, killed_at + 12.0)

    clock.on_sleep += [replaced, lambda: None, stepped_and_saved]
    lines: list[str] = []
    request = KillRequest("ops", 1, None, "delete", 143, 1, 600.0, None, True, 300.0, 2.0)
    assert run(kube, "default", request, Io(out=lines.append, tick=lambda text: None, confirm=lambda question: None,
                                            clock=clock, sleep=clock.sleep))
    # no step number: the record's steps_done is the newest step's, not the first's
    assert lines[2] == (f"recovered: the trainer's next step 9.5s after the kill, at {format_clock(killed_at + 9.5)}, "
                        "from the trainer's progress record")
