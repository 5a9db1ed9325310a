"""`workload status` and `list` over objects the real controllers left (tests/cluster/incidents_corpus/, captured
by tests/realcluster/incident_story.py): the requests they make (which only the fake API server counts),
an API server without Kueue, ages on an injected clock, and the arithmetic of a JobSet between restarts.

The stories (queued, running, a slice restarting its pods, a JobSet restart, a failure, exhausted budgets)
run on the real controllers: tests/realcluster/test_incidents_real.py and test_lifecycle.py; trainer
progress: test_progress_real.py."""

from __future__ import annotations

from elxpk.cluster.records.status import compute_status, latest_conditions, parse_time
from elxpk.cluster.verbs.observe import fetch_all, fetch_status
from tests.cluster.captured import load, name_of, seed


def created(objects: dict) -> float:
    return float(parse_time(objects["jobset"]["metadata"]["creationTimestamp"]) or 0.0)


def test_status_uses_a_bounded_number_of_calls(fake, kube):
    objects = seed(fake, "ignored")
    kube.kueue_version()  # discovery is once per process
    before = len(fake.calls)
    st = fetch_status(kube, "default", name_of(objects), now=created(objects) + 30)
    assert st.slices_healthy == 2 and st.age_s == 30  # the injected clock
    assert len(objects["pods"]) > st.slices_total  # more pods than slices: a GET per pod would show
    calls = fake.calls[before:]
    assert [c.method for c in calls] == ["GET"] * 4
    assert sum(1 for c in calls if "/pods" in c.path) == 1  # one label-selector LIST, not one call per pod


def test_status_without_kueue_and_non_pathways_jobset(jobset_crd, clock, tmp_path):
    """An API server that serves no Kueue API (Kueue not installed), and a JobSet without a Pathways head."""
    from elxpk.cluster.access.connect import connect
    from elxpk.cluster.access.target import ClusterTarget
    from tests.support.fake_apiserver import start_fake

    server = start_fake(crd_file=jobset_crd, clock=clock, kueue=False)
    try:
        objects = seed(server, "plain", without=("workloads",))
        kube = connect(ClusterTarget(kubeconfig=str(server.write_kubeconfig(tmp_path / "k"))))
        st = fetch_status(kube, "default", name_of(objects), now=clock())
        assert (st.state, st.worker_job, st.slices_total, st.head, st.admission) == (
            "Running", "slice-job", 2, None, None)
    finally:
        server.stop()


def test_list_groups_workloads_with_few_calls_and_marks_xpk(fake, kube, clock):
    plain, ours, xpk = seed(fake, "plain"), seed(fake, "ignored"), seed(fake, "xpk_shaped")
    kube.kueue_version()
    before = len(fake.calls)
    rows = {s.name: s for s in fetch_all(kube, "default", now=clock())}
    assert len(fake.calls) - before == 4  # JobSets, Jobs, Pods, Kueue Workloads: once each
    # elxpk's own render carries xpk's labels too: its submission annotation says it is elxpk's (#33)
    assert [rows[name_of(o)].created_by for o in (plain, ours, xpk)] == ["", "elxpk", "xpk"]
    for objects in (plain, ours, xpk):  # what one workload's status says of each
        alone = fetch_status(kube, "default", name_of(objects), now=clock())
        row = rows[name_of(objects)]
        assert (row.state, row.slices_healthy, row.slices_total) == (alone.state, alone.slices_healthy,
                                                                     alone.slices_total)
    assert rows[name_of(xpk)].state == "Running" and rows[name_of(plain)].state == "Running"


def test_latest_condition_is_by_time_not_list_order():
    conditions = [  # sorted by type, as Kueue >= 0.15 returns them
        {"type": "Admitted", "status": "True", "lastTransitionTime": "2026-01-01T10:00:00Z"},
        {"type": "Evicted", "status": "True", "lastTransitionTime": "2026-01-01T12:00:00Z", "message": "preempted"},
        {"type": "QuotaReserved", "status": "True", "lastTransitionTime": "2026-01-01T09:00:00Z"},
    ]
    assert [c.type for c in latest_conditions(conditions)] == ["Evicted", "Admitted", "QuotaReserved"]


def test_missing_jobs_during_recreate_count_as_down():
    """Between a restart's deletion of the Jobs and their recreation: the JobSet with no Job or pod."""
    objects = load("restarted")
    assert objects["jobset"]["status"]["restarts"] == 1
    st = compute_status(objects["jobset"], [], [], [], now=0.0)
    assert st.state == "Restarting"
    assert [s.state for s in st.slices] == ["Missing", "Missing"]
    backoff = objects["jobset"]["spec"]["replicatedJobs"][0]["template"]["spec"]["backoffLimit"]
    assert st.to_dict()["slices"][0]["budget_left"] == backoff


def test_jobs_of_a_restart_read_after_a_stale_jobset_are_restarting_not_admitted():
    """Each LIST is its own read: the JobSet may be read just before the controller counts the restart and
    the Jobs just after it recreated them. Jobs of restart attempt 1 with no pod yet are a restart."""
    objects = load("restarted")
    jobs = [j for j in objects["jobs"] if j["metadata"]["labels"]["jobset.sigs.k8s.io/restart-attempt"] == "1"]
    assert jobs, "the capture holds the recreated Jobs"
    stale = {**objects["jobset"], "status": {**objects["jobset"]["status"], "restarts": 0}}
    fresh_jobs = [{**j, "status": {}} for j in jobs]  # recreated, no pod yet
    assert compute_status(stale, fresh_jobs, [], [], now=0.0).state == "Restarting"
    first_start = [{**j, "metadata": {**j["metadata"], "labels": {
        **j["metadata"]["labels"], "jobset.sigs.k8s.io/restart-attempt": "0"}}} for j in fresh_jobs]
    assert compute_status(stale, first_start, [], [], now=0.0).state == "Admitted"  # a first start stays Admitted


def test_status_of_a_restart_never_workload_lists_failed_pods_only(fake, kube, clock):
    """restartPolicy Never in every pod template (what elxpk renders): no container restarts in place, so only
    Failed pods hold restarts or failures; status lists those (a field selector), not every pod, and counts
    what it counted from every pod."""
    from elxpk.cluster.verbs.observe import FAILED_PODS, fetch_objects

    objects = seed(fake, "ignored")
    name = name_of(objects)
    st = fetch_status(kube, "default", name, now=clock())
    pod_lists = [c.query for c in fake.calls if c.path.endswith("/pods") and not c.query.get("watch")]
    assert pod_lists[-1]["fieldSelector"] == [FAILED_PODS]
    every_pod = compute_status(*fetch_objects(kube, "default", name), now=clock())
    assert st.restart_causes == every_pod.restart_causes == {"infra": 2, "user": 0, "unknown": 0}
    assert st.slices == every_pod.slices

    xpk_shaped = seed(fake, "xpk_shaped")  # its containers restart in place (OnFailure): every pod is read
    fetch_status(kube, "default", name_of(xpk_shaped), now=clock())
    pod_lists = [c.query for c in fake.calls if c.path.endswith("/pods") and not c.query.get("watch")]
    assert "fieldSelector" not in pod_lists[-1]
