"""`workload validate` refuses, offline, every JobSet whose child Job the Job API refuses after the JobSet
was admitted (tests/launcher/rejected_job_cases.py), naming the field in the JobSet's terms; and
`elxpk job submit` never renders one (gcluster's #1369 render: --restart-on-exit-codes on Pathways)."""

from __future__ import annotations

import pytest
import yaml

from tests.launcher.rejected_job_cases import CASES, Case, worker

IMAGE = "us-docker.pkg.dev/my-project/my-repo/trainer:1"
PATHWAYS = ["-n", "rej-1", "--compute-type", "v5p-8", "-i", IMAGE, "-e", "python3 train.py", "--pathways",
            "--pathways-gcs-location", "gs://my-bucket/tmp", "--restart-on-exit-codes", "42", "--dry-run"]


def render(cli) -> dict:
    done = cli("job", "submit", *PATHWAYS)
    assert done.code == 0, done.err
    return yaml.safe_load(done.out)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_validate_refuses_a_jobset_whose_job_the_job_api_refuses(case: Case, cli, tmp_path):
    jobset = render(cli)
    case.breaks(jobset)
    path = tmp_path / "jobset.yaml"
    path.write_text(yaml.safe_dump(jobset), encoding="utf-8")
    done = cli("workload", "validate", str(path))
    assert done.code == 1, done.out + done.err
    field = f"spec.replicatedJobs[1].template.{case.field}"
    assert any(line.startswith(f"{path}: {field}: ") for line in done.out.splitlines()), done.out


def test_gclusters_1369_case_is_rendered_admissible(cli):
    """gcluster put a podFailurePolicy on OnFailure workers for --restart-on-exit-codes; elxpk's render of the
    same gcluster command keeps the workers restarting in place and admissible."""
    spec = worker(render(cli))
    assert spec["template"]["spec"]["restartPolicy"] == "OnFailure" and "podFailurePolicy" not in spec


# The JobSet controller's first JobCreationFailed of a JobSet, a create retried from a stale cache: client-go's
# events API folds every later one (the worker's refusal) into its series and keeps these words (CI saw it).
ALREADY = ('job "rej-1-pathways-head-0" creation failed with error: jobs.batch "rej-1-pathways-head-0" already '
           'exists')


@pytest.mark.parametrize("case", [c for c in CASES if c.on_real_cluster], ids=lambda c: c.name)
def test_why_names_the_refused_field_when_the_event_keeps_another_failures_words(case: Case, cli):
    from elxpk.cluster.diagnosis.job_rejections import rejection_reasons  # lazy: a cluster verb's module

    jobset = render(cli)
    case.breaks(jobset)
    head = {"metadata": {"name": "rej-1-pathways-head-0", "labels": {
        "jobset.sigs.k8s.io/replicatedjob-name": "pathways-head"}}}
    event = {"reason": "JobCreationFailed", "message": ALREADY, "lastTimestamp": "2026-12-07T09:09:38Z", "count": 4}
    assert rejection_reasons(jobset, [event]) == []  # the Event alone names no refusal
    (reason,) = rejection_reasons(jobset, [event], [head])
    field = f"spec.replicatedJobs[1].template.{case.field}"
    assert reason.cause == "job-rejected" and f"{field}: " in reason.text, reason.text
    assert "replicatedJob worker" in reason.text and "pathways-head may run alone" in reason.text
    assert "already exists" in reason.detail and "elxpk workload delete rej-1" in reason.fix
    # both Jobs there, or no creation failed at all: no reason (an in-order startup waits for the head first)
    worker_job = {"metadata": {"name": "rej-1-worker-0", "labels": {"jobset.sigs.k8s.io/replicatedjob-name": "worker"}}}
    assert rejection_reasons(jobset, [event], [head, worker_job]) == []
    assert rejection_reasons(jobset, [], [head]) == []
