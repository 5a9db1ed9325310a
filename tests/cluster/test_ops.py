"""wait, kill-slice, logs and delete where the fake API server is needed: a short outage, the requests as
sent, a log that grows. The objects are captured from the real control plane (tests/cluster/captured.py);
the stories on the real controllers are tests/realcluster/test_ops_real.py and test_lifecycle.py."""

from __future__ import annotations

import json

import pytest

from elxpk.cli.main import main
from elxpk.cluster.verbs.ops import (
    delete_workload,
    kill,
    log_source,
    plan_kill,
    read_logs,
    wait_for,
)
from elxpk.cluster.verbs.trainer_recovery import event_record
from elxpk.errors import ClusterError, NotFoundError
from tests.cluster.captured import load_captured, replace_with
from tests.support.fake_apiserver import Fault


def test_wait_rides_out_a_short_api_outage(fake, kube, clock):
    load_captured(fake, "running")
    kube.attempts = 1  # no per-request retry, so the outage reaches wait's own tolerance
    fake.faults.append(Fault("GET", "/jobsets/ops$", "status", code=503, times=2))
    clock.on_sleep = [lambda: None, lambda: None, lambda: replace_with(fake, "succeeded")]
    assert wait_for(kube, "default", "ops", until="completed", timeout_s=600, clock=clock,
                    sleep=clock.sleep).state == "Succeeded"
    assert len(clock.slept) == 3
    fake.faults.append(Fault("GET", "/jobsets/ops$", "status", code=503, times=10))
    with pytest.raises(ClusterError, match="answered 503"):
        wait_for(kube, "default", "ops", until="completed", timeout_s=600, clock=clock, sleep=clock.sleep,
                 max_consecutive_errors=3)


def test_reads_retry_with_backoff_then_give_a_clear_error(fake, kubeconfig):
    from elxpk.cluster.access.connect import connect
    from elxpk.cluster.access.target import ClusterTarget

    delays: list[float] = []
    kube = connect(ClusterTarget(kubeconfig=str(kubeconfig)), sleep=delays.append)
    fake.faults.append(Fault("GET", "/jobsets$", "drop", times=2))
    assert kube.list_jobsets("default") == []
    assert delays == [0.5, 1.0]
    fake.stop()  # a fresh client (no kept-alive connection) now finds the port closed
    kube = connect(ClusterTarget(kubeconfig=str(kubeconfig)), sleep=delays.append)
    with pytest.raises(ClusterError, match=r"cannot reach the Kubernetes API at http://127.0.0.1:\d+ after 4 attempts"):
        kube.list_jobsets("default")
    assert delays[2:] == [0.5, 1.0, 2.0]


def test_kill_force_deletes_exactly_the_slice(fake, kube):
    """The requests a kill sends (recorded by the fake): one DELETE per pod of the slice, grace period 0."""
    load_captured(fake)
    plan = plan_kill(kube, "default", "ops", 1, None)
    assert len(plan.pods) == 4 and plan.expected == 4
    kill(kube, "default", plan)
    deletes = [c for c in fake.calls if c.method == "DELETE"]
    assert len(deletes) == 4 and all(json.loads(c.body)["gracePeriodSeconds"] == 0 for c in deletes)
    assert all(c.path.rsplit("/", 1)[1].startswith("ops-slice-job-1-") for c in deletes)
    assert fake.store.list(("", "pods"), "default", "jobset.sigs.k8s.io/job-index=1,"
                           "jobset.sigs.k8s.io/replicatedjob-name=slice-job") == []
    assert len(fake.store.list(("", "pods"), "default", "jobset.sigs.k8s.io/job-index=0")) == 4


def test_logs_follow_streams_until_the_container_ends(fake, kube):
    """A log that grows while followed and ends with the container (kwok serves a fixed file)."""
    load_captured(fake)
    source = log_source(kube, "default", "ops", head=False, slice_index=None, vm=None)
    assert source.what == "slice 0 vm 0" and source.pod.startswith("ops-slice-job-0-0-")
    fake.store.append_log("default", source.pod, source.container, "first")
    lines = read_logs(kube, "default", source, follow=True)
    assert next(lines) == "first"
    fake.store.append_log("default", source.pod, source.container, "second", "third")
    fake.store.close_log("default", source.pod, source.container)
    assert list(lines) == ["second", "third"]


def test_delete_is_foreground(fake, kube):
    """The DELETE as sent (the real cluster's children going is tests/realcluster/test_ops_real.py)."""
    load_captured(fake)
    delete_workload(kube, "default", "ops")
    [call] = [c for c in fake.calls if c.method == "DELETE"]
    assert json.loads(call.body)["propagationPolicy"] == "Foreground"  # the body: no query is read beside one
    assert fake.store.list(("", "pods"), "default") == []  # the captured ownerReferences lead to the JobSet
    assert fake.store.list(("batch", "jobs"), "default") == []
    with pytest.raises(NotFoundError, match='workload "ops" not found in namespace "default"'):
        delete_workload(kube, "default", "ops")


def test_event_record_parses_prefixed_json():
    assert event_record('2026 I] {"event": "restore_done", "time": 1.5}') == {"event": "restore_done", "time": 1.5}
    assert event_record("{not json") is None and event_record('{"step": 1}') is None


@pytest.mark.parametrize("mode", ["delete", "evict", "exit"])
def test_kill_slice_on_a_finished_workload_kills_nothing(fake, capsys, kubeconfig, mode):
    """#43: the captured workload after it succeeded: its pods are what is left of the run (exits, logs)."""
    load_captured(fake, "succeeded")
    fake.store.on_exec = lambda namespace, pod, name, command: ("", 0)
    before = len(fake.calls)
    code = main(["workload", "kill-slice", "ops", "--slice", "0", "--mode", mode, "--yes",
                 "--kubeconfig", str(kubeconfig)])
    _, err = capsys.readouterr()
    assert (code, err) == (1, "error: workload ops has succeeded: nothing runs to kill; nothing was deleted\n")
    assert [c for c in fake.calls[before:] if c.method != "GET"] == [] and fake.store.execs == []
