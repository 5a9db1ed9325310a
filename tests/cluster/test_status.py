"""Elastic-aware status against the scripted controller's realistic object sequences."""

from __future__ import annotations

from elxpk.cluster.observe import fetch_all, fetch_status
from elxpk.cluster.status import compute_status, latest_conditions
from tests.cluster.conftest import pathways_jobset, scripted


def _status(kube, clock, name="train"):
    return fetch_status(kube, "default", name, now=clock())


def test_story_admitted_running_slice_fails_restarts_recovers_completes(fake, kube, clock):
    ctl = scripted(fake, clock, pathways_jobset(slices=4, vms=2, backoff=4, max_restarts=2))
    ctl.queue()
    st = _status(kube, clock)
    assert st.state == "Queued"
    assert st.admission == "Pending" and "insufficient unused quota" in st.admission_message
    assert st.queue == "multislice-queue"

    clock.now += 30
    ctl.admit()
    st = _status(kube, clock)
    assert (st.state, st.admission, st.slices_healthy, st.slices_total) == ("Admitted", "Admitted", 0, 4)

    ctl.run()
    st = _status(kube, clock)
    assert (st.state, st.slices_healthy, st.head) == ("Running", 4, "Running")
    assert st.age_s == 30

    ctl.crash_slice(2)  # slice 2's pods restart in place: 2 VMs x 1 restart of a budget of 4
    st = _status(kube, clock)
    assert st.state == "Degraded" and st.slices_healthy == 3
    bad = st.slices[2]
    assert (bad.state, bad.pod_restarts, bad.budget_used, bad.budget_left) == ("Restarting", 2, 2, 2)
    assert "slice 2 restarting (budget 2/4 used)" in st.message

    ctl.recover_slice(2)
    st = _status(kube, clock)
    assert st.state == "Running" and st.slices[2].budget_left == 2  # restarts stay counted against the budget

    ctl.exhaust_slice(2)  # past backoffLimit: the Job fails, the JobSet recreates every Job (restart 1 of 2)
    st = _status(kube, clock)
    assert st.state == "Restarting"
    assert (st.restarts, st.max_restarts, st.restarts_left) == (1, 2, 1)
    assert all(s.pod_restarts == 0 for s in st.slices)  # fresh Jobs, fresh pods, fresh per-slice budget

    ctl.run()
    st = _status(kube, clock)
    assert st.state == "Running" and st.slices_healthy == 4 and st.restarts == 1

    ctl.complete()
    st = _status(kube, clock)
    assert st.state == "Succeeded" and st.admission == "Finished"


def test_budget_exhausted_ends_failed(fake, kube, clock):
    ctl = scripted(fake, clock, pathways_jobset(slices=2, vms=2, backoff=2, max_restarts=1))
    ctl.queue()
    ctl.admit()
    ctl.run()
    ctl.exhaust_slice(0)  # restart 1 of 1
    ctl.run()
    assert _status(kube, clock).restarts_left == 0
    ctl.exhaust_slice(1)  # no budget left
    st = _status(kube, clock)
    assert st.state == "Failed"
    assert "reached maximum number of restarts" in st.message
    assert st.slices[1].state == "Failed"


def test_status_uses_a_bounded_number_of_calls(fake, kube, clock):
    ctl = scripted(fake, clock, pathways_jobset(slices=8, vms=4))
    ctl.queue()
    ctl.admit()
    ctl.run()
    kube.kueue_version()  # discovery is once per process
    before = len(fake.calls)
    st = _status(kube, clock)
    assert st.slices_healthy == 8
    calls = fake.calls[before:]
    assert [c.method for c in calls] == ["GET"] * 4
    assert sum(1 for c in calls if "/pods" in c.path) == 1  # one label-selector LIST, not one call per pod


def test_status_without_kueue_and_non_pathways_jobset(jobset_crd, clock, tmp_path):
    from elxpk.cluster.connect import connect
    from elxpk.cluster.target import ClusterTarget
    from tests.support.fake_apiserver import start_fake
    from tests.support.jobset_controller import ScriptedJobSet

    server = start_fake(crd_file=jobset_crd, clock=clock, kueue=False)
    try:
        js = pathways_jobset("plain", slices=3, vms=1)
        js["spec"]["replicatedJobs"] = [dict(js["spec"]["replicatedJobs"][1], name="slice")]
        del js["spec"]["coordinator"], js["spec"]["successPolicy"]
        server.store.create(("jobset.x-k8s.io", "jobsets"), {**js, "metadata": {**js["metadata"], "namespace": "default"}})
        ctl = ScriptedJobSet(server.store, "default", "plain", clock)
        ctl._create_jobs(attempt=0)  # no Kueue: the JobSet controller starts the Jobs at once
        ctl.run()
        kube = connect(ClusterTarget(kubeconfig=str(server.write_kubeconfig(tmp_path / "k"))))
        st = fetch_status(kube, "default", "plain", now=clock())
        assert (st.state, st.worker_job, st.slices_total, st.head, st.admission) == ("Running", "slice", 3, None, None)
    finally:
        server.stop()


def test_list_groups_workloads_with_few_calls_and_marks_xpk(fake, kube, clock):
    a = scripted(fake, clock, pathways_jobset("alpha", slices=2))
    b = scripted(fake, clock, pathways_jobset("beta-xpk", slices=3, xpk=True))
    for ctl in (a, b):
        ctl.queue()
        ctl.admit()
        ctl.run()
    b.crash_slice(0)
    kube.kueue_version()
    before = len(fake.calls)
    rows = {s.name: s for s in fetch_all(kube, "default", now=clock())}
    assert len(fake.calls) - before == 4  # JobSets, Jobs, Pods, Kueue Workloads: once each
    assert rows["alpha"].state == "Running" and rows["alpha"].created_by == ""
    assert rows["beta-xpk"].state == "Degraded" and rows["beta-xpk"].created_by == "xpk"
    assert (rows["beta-xpk"].slices_healthy, rows["beta-xpk"].slices_total) == (2, 3)


def test_latest_condition_is_by_time_not_list_order():
    conditions = [  # sorted by type, as Kueue >= 0.15 returns them
        {"type": "Admitted", "status": "True", "lastTransitionTime": "2026-01-01T10:00:00Z"},
        {"type": "Evicted", "status": "True", "lastTransitionTime": "2026-01-01T12:00:00Z", "message": "preempted"},
        {"type": "QuotaReserved", "status": "True", "lastTransitionTime": "2026-01-01T09:00:00Z"},
    ]
    assert [c.type for c in latest_conditions(conditions)] == ["Evicted", "Admitted", "QuotaReserved"]


def test_missing_jobs_during_recreate_count_as_down():
    js = pathways_jobset(slices=2, vms=1)
    js["metadata"].update(uid="u1", namespace="default", creationTimestamp="2026-01-01T00:00:00Z")
    js["status"] = {"restarts": 1}
    st = compute_status(js, [], [], [], now=0.0)
    assert st.state == "Restarting"
    assert [s.state for s in st.slices] == ["Missing", "Missing"]
    assert st.to_dict()["slices"][0]["budget_left"] == 1


def test_status_of_a_restart_never_workload_lists_failed_pods_only(fake, kube, clock):
    """restartPolicy Never in every pod template (what elxpk renders): no container restarts in place, so only
    Failed pods hold restarts or failures; status lists those (a field selector), not every pod, and counts
    what it counted from every pod."""
    from elxpk.cluster.observe import FAILED_PODS, fetch_objects

    jobset = pathways_jobset(slices=2, vms=2, backoff=4)
    jobset["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]["restartPolicy"] = "Never"
    ctl = scripted(fake, clock, jobset)
    ctl.queue()
    ctl.admit()
    ctl.run()
    failed = ctl.pods("jobset.sigs.k8s.io/replicatedjob-name=worker")[0]
    failed["status"].update(phase="Failed", containerStatuses=[{"name": "pathways-worker", "restartCount": 0, "state": {
        "terminated": {"exitCode": 75, "reason": "Error", "finishedAt": "2026-05-28T20:30:00Z"}}}])
    fake.store.put(("", "pods"), failed)
    st = _status(kube, clock)
    pod_lists = [c.query for c in fake.calls if c.path.endswith("/pods") and not c.query.get("watch")]
    assert pod_lists[-1]["fieldSelector"] == [FAILED_PODS]
    every_pod = compute_status(*fetch_objects(kube, "default", "train"), now=clock())
    assert st.restart_causes == every_pod.restart_causes == {"infra": 1, "user": 0, "unknown": 0}
    assert st.slices == every_pod.slices

    xpk_shaped = pathways_jobset("xpk-shaped")  # its workers restart in place (OnFailure): every pod is read
    running_ctl = scripted(fake, clock, xpk_shaped)
    running_ctl.queue()
    running_ctl.admit()
    running_ctl.run()
    _status(kube, clock, "xpk-shaped")
    pod_lists = [c.query for c in fake.calls if c.path.endswith("/pods") and not c.query.get("watch")]
    assert "fieldSelector" not in pod_lists[-1]
