"""A verb that names one workload acts on that one object or on nothing (issue #21).

`workload delete ""` used to reach the API as DELETE on the JobSets collection (every workload of the
namespace), and `status ""` read the collection's list as a workload. Every verb taking NAME is run here
through the real console script against the fake API server, which records every request, with every kind
of bad name; the objects it serves are captured from the real control plane (tests/cluster/captured.py).
On the real API server: tests/realcluster/test_ops_real.py::test_a_bad_name_reaches_nothing.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from elxpk.errors import ClusterError, ConflictError, UsageError
from tests.cluster.captured import load_captured
from tests.cluster.conftest import run_cli

ELXPK = Path(sys.executable).parent / "elxpk"
BAD_NAMES = ["", " ", "\t", "train ", " train", "Train", "train_1", "1train", "train-", "a" * 64, "tr/ain", "..",
             "train\n"]
# Each verb with what it needs besides NAME (kill-slice: a slice; --yes so nothing waits for a terminal).
VERBS = {
    "status": [], "wait": ["--timeout", "1s"], "logs": [], "events": [], "delete": ["--yes"],
    "kill-slice": ["--slice", "0", "--yes"],
}


def _elxpk(*argv: str, tmp_path: Path) -> subprocess.CompletedProcess:
    config = tmp_path / "config.yaml"
    config.write_text("{}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ELXPK_")}
    env["ELXPK_CONFIG"] = str(config)
    return subprocess.run([str(ELXPK), *argv], capture_output=True, text=True, timeout=60, env=env,
                          stdin=subprocess.DEVNULL)


def _collection_deletes(fake) -> list[str]:
    collections = ("/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets", "/api/v1/namespaces/default/pods")
    return [c.path for c in fake.calls if c.method == "DELETE" and c.path.rstrip("/") in collections]


@pytest.mark.parametrize("verb", sorted(VERBS))
def test_every_bad_name_is_exit_2_one_line_and_no_request(verb, fake, k, tmp_path, capsys, monkeypatch):
    load_captured(fake)  # a workload `ops` exists
    monkeypatch.setenv("ELXPK_CONFIG", str(tmp_path / "config.yaml"))
    (tmp_path / "config.yaml").write_text("{}\n")
    before = len(fake.calls)
    for name in BAD_NAMES[:2]:  # the console script in its own process, as a user's shell runs it
        done = _elxpk("workload", verb, name, *VERBS[verb], *k, tmp_path=tmp_path)
        assert done.returncode == 2, (verb, name, done.stderr)
        assert done.stdout == "" and len(done.stderr.splitlines()) == 1, (verb, name, done.stderr)
        assert done.stderr.startswith("error: NAME") and "Traceback" not in done.stderr, (verb, name)
    for name in BAD_NAMES:  # the same entry point in process, for every kind of bad name
        code, out, err = run_cli(capsys, "workload", verb, name, *VERBS[verb], *k)
        assert code == 2 and out == "" and len(err.splitlines()) == 1, (verb, name, err)
        assert err.startswith("error: NAME"), (verb, name, err)
    assert fake.calls[before:] == []  # refused before any request, let alone a collection DELETE
    assert fake.store.get(("jobset.x-k8s.io", "jobsets"), "default", "ops") is not None


def test_delete_and_kill_name_exactly_their_objects(fake, k, tmp_path):
    """Every DELETE as sent: the pods of the slice one by one, then the JobSet by name; another workload of
    the namespace (why-crash, captured by tests/realcluster/test_why_real.py) keeps everything."""
    load_captured(fake)
    other = load_captured(fake, "crash_loop", "why_corpus")
    done = _elxpk("workload", "kill-slice", "ops", "--slice", "1", "--yes", *k, tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    done = _elxpk("workload", "delete", "ops", *k, tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    deletes = [c.path for c in fake.calls if c.method == "DELETE"]
    assert deletes[-1] == "/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets/ops"
    assert all(p.rsplit("/", 1)[1].startswith("ops-slice-job-1-") for p in deletes[:-1]) and len(deletes) == 5
    assert _collection_deletes(fake) == []
    assert fake.store.get(("jobset.x-k8s.io", "jobsets"), "default", "why-crash") is not None
    assert {p["metadata"]["name"] for p in fake.store.list(("", "pods"), "default")} == {
        p["metadata"]["name"] for p in other["pods"]}


def test_a_delete_reaches_only_the_object_it_read(fake, kube):
    """The uid read is a precondition of the DELETE: a JobSet recreated under the name meanwhile stays."""
    load_captured(fake)
    stale = fake.store.get(("jobset.x-k8s.io", "jobsets"), "default", "ops")["metadata"]["uid"]
    fake.store.delete(("jobset.x-k8s.io", "jobsets"), "default", "ops")
    load_captured(fake, fresh_uids=True)  # same name, new uid
    with pytest.raises(ConflictError):
        kube.delete_jobset("default", "ops", uid=stale)
    assert fake.store.get(("jobset.x-k8s.io", "jobsets"), "default", "ops") is not None
    pod = fake.store.list(("", "pods"), "default", label_selector="jobset.sigs.k8s.io/job-index=0")[0]["metadata"]
    with pytest.raises(ConflictError):
        kube.delete_pod("default", pod["name"], uid="not-" + pod["uid"], grace_period_seconds=0)
    with pytest.raises(ClusterError, match="uid is unknown"):
        kube.delete_pod("default", pod["name"], uid="", grace_period_seconds=0)
    assert fake.store.get(("", "pods"), "default", pod["name"]) is not None


@pytest.mark.parametrize("name", ["", " ", "train "])
def test_the_client_never_builds_a_collection_path_from_a_name(name, fake, kube):
    from elxpk.cluster.api.kube_transport import api_path

    with pytest.raises(UsageError, match="name exactly one object"):
        api_path("v1", "pods", "default", name)
    before = len(fake.calls)
    for call in (lambda: kube.get_jobset("default", name),
                 lambda: kube.delete_jobset("default", name, uid="u"),
                 lambda: kube.delete_pod("default", name, uid="u")):
        with pytest.raises(UsageError):
            call()
    assert fake.calls[before:] == []


def test_an_answer_that_is_not_the_named_jobset_is_refused(fake, kube):
    """Whatever a server answers for a name, elxpk acts only on an answer that is that JobSet."""
    from elxpk.cluster.verbs.observe import the_named_jobset

    load_captured(fake)
    jobset = kube.get_jobset("default", "ops")
    assert the_named_jobset(jobset, "default", "ops") is jobset
    listed = {"kind": "JobSetList", "apiVersion": "jobset.x-k8s.io/v1alpha2", "items": [jobset]}
    other = {**jobset, "metadata": {**jobset["metadata"], "name": "other"}}
    elsewhere = {**jobset, "metadata": {**jobset["metadata"], "namespace": "team-b"}}
    for answer in (listed, other, elsewhere, [], None, {"kind": "JobSet"}):
        with pytest.raises(ClusterError, match='asked for JobSet "ops" in namespace "default"'):
            the_named_jobset(answer, "default", "ops")
