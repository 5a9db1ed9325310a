"""`workload kill-slice` once (elxpk/cluster/kill_slice.py): the force-delete of one slice, its confirmation,
and --watch's bounded wait, against the fake API server with captured objects (no controllers there, so a
killed slice never comes back). The soak rounds on real controllers are tests/realcluster/test_ops_real.py."""

from __future__ import annotations

import json

import pytest

from elxpk.cluster.ops import kill, plan_kill, watch_recovery
from elxpk.errors import ClusterError
from tests.cluster.captured import KINDS, load_captured
from tests.cluster.conftest import run_cli


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
