"""#33, "answers that were wrong on the real cluster": the Job controller's side of `status --why`, through the
`elxpk` console script on the real Job and JobSet controllers.

- a GPU workload whose pods name the service account xpk-sa, missing in its namespace: `workload create`
  refuses it up front (nothing created); the same JobSet submitted around that check is admitted, and the
  Job controller's FailedCreate Events are what `--why` names, with the fix, which the test then applies;
- the Job controller's pod-failure back-off: a Pathways worker slice whose pod fails three times waits
  10 s, 20 s, then 40 s before its next pod; `--why` names the back-off and when the next pod comes, and the
  Job controller's replacement pod is checked against that estimate;
- piped `status` output is not cut at 80 columns.

ELXPK_WHY_CAPTURE=DIR writes the objects of the first two (tests/cluster/why_corpus/).
"""

from __future__ import annotations

import json
import os
import subprocess

import yaml

from elxpk.cluster.objects.labels import parse_time
from tests.realcluster.capture import capture
from tests.realcluster.test_submit_goldens import ELXPK, elxpk
from tests.realcluster.test_why_real import apply, create, delete, pods_of, run_fixes, why
from tools.testcluster.kubeapi import JOBS, JOBSETS, LocalCluster

NAMESPACE = "why-sa"  # a namespace without xpk-sa
GPU = ["--device-type=h100-80gb-8", "--num-nodes=1", "--docker-image=gcr.io/p/img:1", "--command", "python3 t.py"]


def test_missing_service_account_is_refused_up_front_and_named_by_why(testcluster: LocalCluster) -> None:
    apply(testcluster, "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                              "metadata": {"name": NAMESPACE}})
    try:
        testcluster.remove_jobset(NAMESPACE, "why-sa")
        refused = elxpk("workload", "create", "--workload=why-sa", "-n", NAMESPACE, *GPU, cluster=testcluster)
        assert refused.returncode == 1, refused.stderr
        assert refused.stderr.strip().splitlines() == [
            f'error: ServiceAccount "xpk-sa" does not exist in namespace "{NAMESPACE}": the Job controller could '
            f"create no pod; create it (`kubectl create serviceaccount xpk-sa -n {NAMESPACE}`; xpk's cluster "
            "create makes xpk-sa), or use a namespace that has it"], refused.stderr
        assert testcluster.items(JOBSETS.format(ns=NAMESPACE)) == []  # nothing created

        # The same JobSet, submitted around the check (kubectl, another tool): outside Kueue, so it starts at once.
        rendered = elxpk("workload", "create", "--workload=why-sa", "-n", NAMESPACE, *GPU, "--dry-run",
                         cluster=testcluster)
        assert rendered.returncode == 0, rendered.stderr
        jobset = next(d for d in yaml.safe_load_all(rendered.stdout) if d and d.get("kind") == "JobSet")
        del jobset["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
        apply(testcluster, JOBSETS.format(ns=NAMESPACE), jobset)
        answer = testcluster.wait_for("the Job controller's FailedCreate", lambda: (
            a := why(testcluster, "why-sa", NAMESPACE))["why"] and a["why"][0]["cause"] == "pod-create" and a)
        capture(testcluster, "failed_create", "why-sa", NAMESPACE, events=True)
        first = answer["why"][0]
        assert answer["state"] == "Admitted" and pods_of(testcluster, "why-sa", NAMESPACE) == [], answer
        assert first["text"].startswith("the Job controller cannot create the pods of Job why-sa-slice-job-0 "
                                        "(replicatedJob slice-job, slice 0): service account xpk-sa does not "
                                        "exist"), first
        assert 'serviceaccount "xpk-sa" not found' in first["detail"], first  # the API server's words
        assert f"create ServiceAccount xpk-sa in namespace {NAMESPACE}" in first["fix"], first
        assert run_fixes(testcluster, answer, NAMESPACE) == []  # a kubectl command: applied here through the API
        plain = elxpk("workload", "status", "why-sa", "-n", NAMESPACE, "--stuck-after", "0s", "-o", "json",
                      cluster=testcluster)  # plain status's one line names it too
        # the same cause (the Event's count and time move on between the two reads)
        assert json.loads(plain.stdout)["reason"].split(" (", 2)[:2] == first["text"].split(" (", 2)[:2], plain.stdout

        apply(testcluster, f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts",
              {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "xpk-sa"}})
        testcluster.wait_for("the pod created once the account exists",
                             lambda: pods_of(testcluster, "why-sa", NAMESPACE))
        assert testcluster.wait_for("--why no longer names it", lambda: (
            a := why(testcluster, "why-sa", NAMESPACE)) and "pod-create" not in [r["cause"] for r in a["why"]]
            and a)
    finally:
        delete(testcluster, f"/api/v1/namespaces/{NAMESPACE}")


def test_pod_failure_backoff_is_named_with_the_next_try(testcluster: LocalCluster) -> None:
    name = "why-backoff"
    create(testcluster, name, "--tpu-type=v5p-8", "--num-slices=2", "--max-slice-restarts=4", "--command",
           "python3 t.py")
    slice1 = {"jobset.sigs.k8s.io/replicatedjob-name": "worker", "jobset.sigs.k8s.io/job-index": "1"}
    selector = f"jobset.sigs.k8s.io/jobset-name={name}," + ",".join(f"{k}={v}" for k, v in slice1.items())

    def slice1_pods(phase: str) -> list[dict]:
        return [p for p in pods_of(testcluster, name) if p["status"].get("phase") == phase
                and all(p["metadata"]["labels"].get(k) == v for k, v in slice1.items())]

    try:
        for failures in (1, 2, 3):  # the third failure makes the Job controller wait 40 s
            testcluster.wait_for(f"slice 1 running before failure {failures}", lambda: slice1_pods("Running"))
            assert testcluster.exit_pods("default", selector, 137) == 1
            testcluster.wait_for(f"failure {failures} seen", lambda n=failures: len(slice1_pods("Failed")) == n)

        def job_counts_three() -> bool:  # the Job controller writes its status a sync after the pod fails
            _, job = testcluster.request("GET", JOBS.format(ns="default") + f"/{name}-worker-1")
            status = job.get("status") or {}
            return int(status.get("failed") or 0) == 3 and not status.get("active")

        testcluster.wait_for("the Job's status counting the third failure", job_counts_three)
        answer = why(testcluster, name)
        capture(testcluster, "backoff", name)
        reasons = {r["cause"]: r for r in answer["why"]}
        assert "backoff" in reasons, answer["why"]
        said = reasons["backoff"]["text"]
        assert said.startswith(f"Job {name}-worker-1 (replicatedJob worker, slice 1) is in the Job controller's "
                               "pod-failure back-off: 3 failed pods since its last success, so it waits 40s"), said
        assert answer["slices"][1]["active"] == 0 and answer["slices"][1]["failed"] == 3, answer["slices"]
        assert run_fixes(testcluster, answer) == [f"elxpk workload events {name}"]
        next_try = parse_time(said.rsplit("(at ", 1)[1].rstrip(")"))
        assert next_try is not None
        replaced = testcluster.wait_for("the Job controller's next pod", lambda: slice1_pods("Running") or
                                        [p for p in slice1_pods("Pending")])
        made = parse_time(replaced[0]["metadata"]["creationTimestamp"])
        assert made is not None and made >= next_try - 1, (made, next_try)  # whole seconds on both sides
    finally:
        testcluster.remove_jobset("default", name)


def test_piped_status_is_not_cut_at_80_columns(testcluster: LocalCluster) -> None:
    """Through a pipe (not a terminal, no COLUMNS): the why lines and the tables are whole."""
    name = "why-piped"
    create(testcluster, name, "--tpu-type=v6e-4", "--no-pathways", "--num-slices=1", "--command", "python3 t.py")
    try:
        testcluster.wait_for("the scheduler's verdict", lambda: any(
            c.get("reason") == "Unschedulable" for p in pods_of(testcluster, name)
            for c in p["status"].get("conditions", [])))
        env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "COLUMNS", "LINES")}
        done = subprocess.run([str(ELXPK), "workload", "status", name, "--why", "--kubeconfig",
                               str(testcluster.kubeconfig)], capture_output=True, text=True, timeout=120, env=env,
                              check=False)  # stdout a pipe, as `| less` or `> file` makes it
        assert done.returncode == 0, done.stderr
        assert "…" not in done.stdout, done.stdout
        assert max(len(line) for line in done.stdout.splitlines()) > 80
        assert "`--tpu-type v6e-4` needs a node pool of ct6e-standard-4t with --tpu-topology 2x2" in done.stdout
    finally:
        testcluster.remove_jobset("default", name)
