"""Preflight and exactly-once create, against the fake API server over real HTTP."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from elxpk.cluster.access.target import ClusterTarget
from elxpk.cluster.objects.labels import SUBMISSION_ANNOTATION
from elxpk.cluster.verbs.submit import follow_up_commands, submit
from elxpk.errors import ClusterError, ConflictError
from tests.cluster.conftest import pathways_jobset
from tests.support.fake_apiserver import Fault

JOBSETS = ("jobset.x-k8s.io", "jobsets")


@dataclass(frozen=True)
class Manifest:  # the seam: render.Manifest has `objects`, a tuple of plain dicts
    objects: tuple[dict, ...]


def _submit(kube, jobset, **kwargs):
    warnings: list[str] = []
    created = submit(Manifest((jobset,)), ClusterTarget(kubeconfig="unused"), kube=kube, warn=warnings.append,
                     sleep=lambda s: None, **kwargs)
    return created, warnings


def _stored(fake) -> list[dict]:
    return fake.store.list(JOBSETS, "default")


def test_create_validates_server_side_and_stamps_a_submission_id(fake, kube):
    created, warnings = _submit(kube, pathways_jobset(), submission_id="sid-1")
    assert warnings == []
    assert created[0]["metadata"]["uid"]
    [stored] = _stored(fake)
    assert stored["metadata"]["annotations"][SUBMISSION_ANNOTATION] == "sid-1"
    assert stored["spec"]["replicatedJobs"][1]["replicas"] == 2


def test_server_dry_run_persists_nothing(fake, kube):
    created, _ = _submit(kube, pathways_jobset(), server_dry_run=True)
    assert created[0]["metadata"]["name"] == "train"
    assert _stored(fake) == []
    assert any(c.method == "POST" and c.query.get("dryRun") == ["All"] for c in fake.calls)


def test_invalid_jobset_is_rejected_with_the_servers_reason(fake, kube):
    bad = pathways_jobset()
    bad["spec"]["replicatedJobs"][1]["replicaz"] = 3
    with pytest.raises(ClusterError, match=r"invalid \(422\).*replicaz"):
        _submit(kube, bad)
    assert _stored(fake) == []


def test_conflict_names_delete_and_replace(fake, kube):
    _submit(kube, pathways_jobset())
    with pytest.raises(ConflictError, match=r"already exists.*elxpk workload delete train.*--replace"):
        _submit(kube, pathways_jobset())


def test_replace_deletes_then_creates(fake, kube):
    _submit(kube, pathways_jobset(slices=2), submission_id="old")
    _submit(kube, pathways_jobset(slices=3), submission_id="new", replace=True)
    [stored] = _stored(fake)
    assert stored["metadata"]["annotations"][SUBMISSION_ANNOTATION] == "new"
    assert stored["spec"]["replicatedJobs"][1]["replicas"] == 3


def test_lost_reply_after_the_create_landed_does_not_submit_twice(fake, kube):
    # The server persists the JobSet, then the connection dies before the answer: the client must
    # find its own object (by submission id) instead of creating again or reporting a conflict.
    fake.faults.append(Fault("POST", "/jobsets$", "lost_reply"))
    created, _ = _submit(kube, pathways_jobset(), submission_id="sid-lost")
    assert created[0]["metadata"]["annotations"][SUBMISSION_ANNOTATION] == "sid-lost"
    assert len(_stored(fake)) == 1
    assert sum(1 for c in fake.calls if c.method == "POST") == 1


def test_unavailable_before_the_create_retries_once_it_is_known_absent(fake, kube):
    fake.faults.append(Fault("POST", "/jobsets$", "status", code=503))
    _submit(kube, pathways_jobset(), submission_id="sid-503")
    assert len(_stored(fake)) == 1
    assert [c.method for c in fake.calls if "/jobsets" in c.path] == ["POST", "GET", "POST"]


def test_someone_elses_object_after_an_unanswered_create_is_a_conflict(fake, kube):
    other = pathways_jobset()
    other["metadata"] = {**other["metadata"], "namespace": "default", "annotations": {SUBMISSION_ANNOTATION: "x"}}
    fake.faults.append(Fault("POST", "/jobsets$", "drop"))
    fake.store.create(JOBSETS, other)
    with pytest.raises(ConflictError, match="another submission"):
        _submit(kube, pathways_jobset(), submission_id="mine")


def test_preflight_jobset_missing(jobset_crd, clock, tmp_path):
    from elxpk.cluster.access.connect import connect
    from tests.support.fake_apiserver import start_fake

    server = start_fake(crd_file=jobset_crd, clock=clock, install_jobset=False)
    try:
        kube = connect(ClusterTarget(kubeconfig=str(server.write_kubeconfig(tmp_path / "k"))))
        with pytest.raises(ClusterError, match="^JobSet is not installed on this cluster: install"):
            _submit(kube, pathways_jobset())
    finally:
        server.stop()


def test_preflight_reports_every_problem_and_warns_on_queue(fake, kube):
    fake.store.delete(("", "nodes"), "", "gke-cpu-np-1")
    js = pathways_jobset(priority="urgent", queue="no-such-queue")
    with pytest.raises(ClusterError) as info:
        _submit(kube, js)
    lines = str(info.value).splitlines()
    assert any('PriorityClass "urgent" does not exist' in line and "--priority" in line for line in lines)
    assert any("node pool named cpu-np" in line and "--no-pathways" in line for line in lines)
    assert _stored(fake) == []

    fake.store.create(("", "nodes"), {"metadata": {"name": "n", "labels": {"cloud.google.com/gke-nodepool": "cpu-np"}}})
    _, warnings = _submit(kube, pathways_jobset(queue="no-such-queue"))
    assert warnings == ['Kueue LocalQueue "no-such-queue" does not exist in namespace "default": the workload will '
                        "wait unadmitted until it is created"]


def test_preflight_names_a_missing_service_account_and_creates_nothing(fake, kube):
    """#33: a GPU render names xpk-sa; without it the Job controller creates no pod (FailedCreate), after
    Kueue admitted the workload. Checked up front: one line naming the account, the namespace and the fix."""
    js = pathways_jobset()
    js["metadata"]["name"] = "train-sa"
    for rjob in js["spec"]["replicatedJobs"]:
        rjob["template"]["spec"]["template"]["spec"]["serviceAccountName"] = "xpk-sa"
    with pytest.raises(ClusterError) as info:
        _submit(kube, js)
    assert str(info.value) == ('ServiceAccount "xpk-sa" does not exist in namespace "default": the Job controller '
                               "could create no pod; create it (`kubectl create serviceaccount xpk-sa -n default`; "
                               "xpk's cluster create makes xpk-sa), or use a namespace that has it")
    assert _stored(fake) == []
    fake.store.create(("", "serviceaccounts"), {"metadata": {"name": "xpk-sa", "namespace": "default"}})
    _submit(kube, js)
    assert [o["metadata"]["name"] for o in _stored(fake)] == ["train-sa"]


def test_forbidden_create_names_the_permission(fake, kube):
    fake.forbidden.add(("create", "jobsets"))
    with pytest.raises(ClusterError, match=r'permission denied \(403\): you need RBAC permission to create JobSet '
                                           r'"train" in namespace "default"'):
        _submit(kube, pathways_jobset())


def test_follow_up_commands_carry_the_cluster_selection():
    gke = ClusterTarget(project="p", location="us-central2-b", cluster="c", namespace="team")
    assert follow_up_commands("w", gke)[0] == "elxpk workload status w --project p --zone us-central2-b --cluster c -n team"
    regional = ClusterTarget(project="p", location="us-central2", cluster="c")
    assert "--region us-central2" in follow_up_commands("w", regional)[1]
    assert follow_up_commands("w", ClusterTarget(kubeconfig="/k.yaml"))[3] == "elxpk workload delete w --kubeconfig /k.yaml"


def test_without_kueue_the_queue_label_only_warns(jobset_crd, clock, tmp_path):
    from elxpk.cluster.access.connect import connect
    from tests.cluster.conftest import seed_cluster
    from tests.support.fake_apiserver import start_fake

    server = start_fake(crd_file=jobset_crd, clock=clock, kueue=False)
    try:
        seed_cluster(server)
        kube = connect(ClusterTarget(kubeconfig=str(server.write_kubeconfig(tmp_path / "k"))))
        _, warnings = _submit(kube, pathways_jobset())
        assert warnings == ['Kueue is not installed: the queue label "multislice-queue" is ignored and the JobSet '
                            "starts without admission control"]
        assert len(server.store.list(JOBSETS, "default")) == 1
    finally:
        server.stop()
