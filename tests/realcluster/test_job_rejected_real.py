""""The JobSet exists but a child Job was rejected" (ml-auto-solutions#1369) on the real control plane: each
case of tests/launcher/rejected_job_cases.py, created raw through the API (the API server and the JobSet
webhook admit it), leaves the JobSet controller's JobCreationFailed Event; `elxpk workload status --why`
names the refused field in the JobSet's terms, `elxpk job inspect` writes that diagnosis to a file, and
`workload validate` had refused the same manifest offline. Then gcluster's verbs on a real submission:
`job submit --await-job-completion --timeout` (exit 124), `job list`, `job cancel`.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.launcher.rejected_job_cases import CASES, Case
from tests.realcluster.test_submit_goldens import ELXPK, elxpk
from tools.testcluster.kubeapi import JOBS, JOBSETS, LocalCluster

SUBMIT = ["--compute-type", "v5p-8", "-i", "python:3.10", "-e", "python3 train.py", "--pathways",
          "--pathways-gcs-location", "gs://my-bucket/tmp"]


def rendered(cluster: LocalCluster, name: str) -> dict:
    done = elxpk("job", "submit", "-n", name, *SUBMIT, "--dry-run", cluster=cluster)
    assert done.returncode == 0, done.stderr
    return yaml.safe_load(done.stdout)


@pytest.mark.parametrize("case", [c for c in CASES if c.on_real_cluster], ids=lambda c: c.name)
def test_status_why_names_the_field_the_job_api_refused(case: Case, testcluster: LocalCluster, tmp_path: Path):
    name = f"rej-{CASES.index(case)}"
    jobset = rendered(testcluster, name)
    case.breaks(jobset)
    manifest = tmp_path / "jobset.yaml"
    manifest.write_text(yaml.safe_dump(jobset), encoding="utf-8")
    field = f"spec.replicatedJobs[1].template.{case.field}"
    offline = subprocess.run([str(ELXPK), "workload", "validate", str(manifest)], capture_output=True, text=True,
                             timeout=120, check=False)
    assert offline.returncode == 1 and f"{field}: " in offline.stdout, offline.stdout + offline.stderr

    testcluster.remove_jobset("default", name)
    status, body = testcluster.request("POST", JOBSETS.format(ns="default"), jobset)
    assert status == 201, body  # admitted: the API server and the JobSet webhook let it through
    try:
        # this JobSet's event: an earlier run's JobSet of the same name left its own (Events outlive it)
        testcluster.wait_for("the JobSet controller's JobCreationFailed event", lambda: testcluster.items(
            "/api/v1/namespaces/default/events", fieldSelector=f"involvedObject.uid={body['metadata']['uid']},"
                                                               "reason=JobCreationFailed"), timeout=150)
        # The controller creates a JobSet's Jobs in parallel: the worker's refusal can be recorded before the
        # head's create returns (once in CI), so the head is waited for, and then it is the only one.
        def jobs() -> list[str]:
            return [j["metadata"]["name"] for j in testcluster.items(
                JOBS.format(ns="default"), labelSelector=f"jobset.sigs.k8s.io/jobset-name={name}")]

        testcluster.wait_for("the head's Job", jobs, timeout=60)
        assert jobs() == [f"{name}-pathways-head-0"]  # the head runs alone
        done = elxpk("workload", "status", name, "--why", "-o", "json", cluster=testcluster)
        assert done.returncode == 0, done.stderr
        reasons = [r for r in json.loads(done.stdout)["why"] if r["cause"] == "job-rejected"]
        assert len(reasons) == 1 and field in reasons[0]["text"] and "worker" in reasons[0]["text"], done.stdout
        assert "JobCreationFailed" not in reasons[0]["text"] and "creation failed" in reasons[0]["detail"]

        report = tmp_path / "inspect.txt"
        done = elxpk("job", "inspect", "-n", name, "--out", str(report), cluster=testcluster)  # gcluster: -n NAME
        assert done.returncode == 0 and done.stdout.strip() == str(report), done.stderr
        text = report.read_text(encoding="utf-8")
        assert "## status --why" in text and field in text and "## events" in text
        assert f"name: {name}-pathways-head-0" in text  # the objects
    finally:
        testcluster.remove_jobset("default", name)


def test_gclusters_verbs_on_a_real_submission(testcluster: LocalCluster):
    name = "gc-verbs"
    testcluster.remove_jobset("default", name)
    try:
        # Its pods never end here (kwok), so the wait gives up: exit 124, as `workload wait --timeout`.
        done = elxpk("job", "submit", "-n", name, "--compute-type", "v5p-8", "-i", "python:3.10", "-e", "true",
                     "--await-job-completion", "--timeout", "5s", cluster=testcluster)
        assert done.returncode == 124, done.stdout + done.stderr
        assert f"jobset/{name} created" in done.stdout
        _, jobset = testcluster.request("GET", JOBSETS.format(ns="default") + "/" + name)
        assert jobset["spec"]["failurePolicy"]["maxRestarts"] == 1  # gcluster's default
        listed = elxpk("job", "list", cluster=testcluster)
        assert listed.returncode == 0 and name in listed.stdout, listed.stderr
        cancelled = elxpk("job", "cancel", name, "--yes", cluster=testcluster)
        assert cancelled.returncode == 0, cancelled.stderr
        status, _ = testcluster.request("GET", JOBSETS.format(ns="default") + "/" + name)
        assert status in (200, 404)  # deleting (foreground) or gone
    finally:
        testcluster.remove_jobset("default", name)
