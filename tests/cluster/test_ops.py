"""wait, kill-slice, logs and delete, with the injected clock driving the scripted controller."""

from __future__ import annotations

import json

import pytest

from elxpk.cluster.ops import (
    delete_workload,
    event_record,
    kill,
    log_source,
    plan_kill,
    read_logs,
    wait_for,
    watch_recovery,
)
from elxpk.errors import CheckFailed, ClusterError, NotFoundError, Timeout, UsageError
from tests.cluster.conftest import pathways_jobset, running, scripted
from tests.support.fake_apiserver import Fault


def test_wait_follows_the_story_to_success(fake, kube, clock):
    ctl = scripted(fake, clock, pathways_jobset(slices=2, vms=2, backoff=4))
    ctl.queue()
    clock.on_sleep = [ctl.admit, ctl.run, lambda: ctl.crash_slice(1), lambda: ctl.recover_slice(1), ctl.complete]
    seen: list[str] = []
    result = wait_for(kube, "default", "train", until="completed", timeout_s=3600, clock=clock, sleep=clock.sleep,
                      poll_s=10, on_update=lambda s: seen.append(s.state))
    assert result.state == "Succeeded"
    assert seen == ["Queued", "Admitted", "Running", "Degraded", "Running", "Succeeded"]
    assert clock.slept == [10] * 5


def test_wait_for_running_returns_once_all_slices_are_ready(fake, kube, clock):
    ctl = scripted(fake, clock, pathways_jobset())
    ctl.queue()
    clock.on_sleep = [ctl.admit, ctl.run]
    assert wait_for(kube, "default", "train", until="running", timeout_s=None, clock=clock, sleep=clock.sleep,
                    poll_s=1).state == "Running"


def test_wait_fails_fast_on_a_failed_jobset(fake, kube, clock):
    ctl = running(fake, clock, slices=2, max_restarts=0)
    clock.on_sleep = [lambda: ctl.exhaust_slice(0)]
    with pytest.raises(CheckFailed, match="workload train failed: .*reached maximum number of restarts"):
        wait_for(kube, "default", "train", until="completed", timeout_s=600, clock=clock, sleep=clock.sleep)


def test_wait_times_out_with_the_state_it_saw(fake, kube, clock):
    running(fake, clock)
    with pytest.raises(Timeout, match=r"still Running after 30s \(waiting for completed"):
        wait_for(kube, "default", "train", until="completed", timeout_s=30, clock=clock, sleep=clock.sleep, poll_s=7)
    assert clock.slept == [7, 7, 7, 7, 2]  # never sleeps past the deadline


def test_wait_rides_out_a_short_api_outage(fake, kube, clock):
    ctl = running(fake, clock)
    kube.attempts = 1  # no per-request retry, so the outage reaches wait's own tolerance
    fake.faults.append(Fault("GET", "/jobsets/train$", "status", code=503, times=2))
    clock.on_sleep = [lambda: None, lambda: None, ctl.complete]
    assert wait_for(kube, "default", "train", until="completed", timeout_s=600, clock=clock,
                    sleep=clock.sleep).state == "Succeeded"
    fake.faults.append(Fault("GET", "/jobsets/train$", "status", code=503, times=10))
    with pytest.raises(ClusterError, match="answered 503"):
        wait_for(kube, "default", "train", until="completed", timeout_s=600, clock=clock, sleep=clock.sleep,
                 max_consecutive_errors=3)


def test_reads_retry_with_backoff_then_give_a_clear_error(fake, kubeconfig):
    from elxpk.cluster.connect import connect
    from elxpk.cluster.target import ClusterTarget

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


def test_kill_slice_force_deletes_and_watch_reports_recovery(fake, kube, clock):
    ctl = running(fake, clock, slices=3, vms=2)
    plan = plan_kill(kube, "default", "train", 1, None)
    assert len(plan.pods) == 2 and plan.expected == 2
    killed_at = clock()
    kill(kube, "default", plan)
    deletes = [c for c in fake.calls if c.method == "DELETE"]
    assert len(deletes) == 2 and all(c.query["gracePeriodSeconds"] == ["0"] for c in deletes)
    assert fake.store.list(("", "pods"), "default", "jobset.sigs.k8s.io/job-index=1,"
                           "jobset.sigs.k8s.io/replicatedjob-name=worker") == []

    def trainer_recovers():
        ctl.reconcile()  # replacements start
        ctl.head_log("step 40 loss 2.1",
                     "I1130 trainer] " + json.dumps({"event": "first_step_after_recovery", "time": clock() + 5.0,
                                                     "step": 41}))

    clock.on_sleep = [ctl.reconcile, trainer_recovers]  # pods created (pending), then ready + trainer event
    ticks: list[str] = []
    recovery = watch_recovery(kube, "default", "train", plan, killed_at=killed_at, clock=clock, sleep=clock.sleep,
                              timeout_s=600, poll_s=3, on_tick=ticks.append)
    assert recovery.slice_back_s == 6
    assert recovery.next_step_s == 11
    assert ticks[0] == "0/2 replacement pods ready"


def test_kill_one_vm_and_bad_indexes(fake, kube, clock):
    running(fake, clock, slices=2, vms=4)
    plan = plan_kill(kube, "default", "train", 0, 3)
    assert len(plan.pods) == 1 and plan.expected == 1 and "-worker-0-3-" in plan.pods[0]
    with pytest.raises(UsageError) as info:
        plan_kill(kube, "default", "train", 2, 4)
    assert info.value.messages == ["--slice 2: workload train has 2 slices (0..1)", "--vm 4: each slice has 4 VMs (0..3)"]


def test_logs_of_head_and_of_a_slice_vm(fake, kube, clock):
    ctl = running(fake, clock, slices=2, vms=2)
    ctl.head_log("hello from the head", "step 1")
    head = log_source(kube, "default", "train", head=False, slice_index=None, vm=None)
    assert (head.what, head.container) == ("head", "jax-tpu")
    assert list(read_logs(kube, "default", head, follow=False)) == ["hello from the head", "step 1"]
    assert list(read_logs(kube, "default", head, follow=False, tail=1)) == ["step 1"]

    worker = log_source(kube, "default", "train", head=False, slice_index=1, vm=1)
    assert worker.what == "slice 1 vm 1" and "-worker-1-1-" in worker.pod
    fake.store.append_log("default", worker.pod, "pathways-worker", "worker line")
    assert list(read_logs(kube, "default", worker, follow=False)) == ["worker line"]
    with pytest.raises(UsageError, match="--container nope"):
        log_source(kube, "default", "train", head=True, slice_index=None, vm=None, container="nope")


def test_logs_follow_streams_until_the_container_ends(fake, kube, clock):
    ctl = running(fake, clock)
    ctl.head_log("first")
    source = log_source(kube, "default", "train", head=True, slice_index=None, vm=None)
    lines = read_logs(kube, "default", source, follow=True)
    assert next(lines) == "first"
    ctl.head_log("second", "third")
    fake.store.close_log("default", source.pod, source.container)
    assert list(lines) == ["second", "third"]


def test_delete_is_foreground_and_takes_the_children(fake, kube, clock):
    running(fake, clock)
    delete_workload(kube, "default", "train")
    [call] = [c for c in fake.calls if c.method == "DELETE"]
    assert call.query["propagationPolicy"] == ["Foreground"]
    assert fake.store.list(("", "pods"), "default") == []
    assert fake.store.list(("batch", "jobs"), "default") == []
    with pytest.raises(NotFoundError, match='workload "train" not found in namespace "default"'):
        delete_workload(kube, "default", "train")


def test_event_record_parses_prefixed_json():
    assert event_record('2026 I] {"event": "restore_done", "time": 1.5}') == {"event": "restore_done", "time": 1.5}
    assert event_record("{not json") is None and event_record('{"step": 1}') is None
