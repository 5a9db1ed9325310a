"""Flex-start on the real Kueue: `elxpk workload create --flex-start` into the LocalQueue `dws-queue` (namespace
flex-start), whose
ClusterQueue carries the ProvisioningRequest admission check `dws-prov` (tools/testcluster/flex_start.py,
as xpk's `cluster create --flex` makes it). Kueue's own provisioning controller creates the
ProvisioningRequest; no cluster autoscaler runs here, so each test writes the request's status itself
(Provisioned, Failed, BookingExpired, as GKE's Dynamic Workload Scheduler would), and Kueue reacts as it
would on GKE. `status --why` is read through the `elxpk` console script at each stage.

ELXPK_CAPACITY_CAPTURE=DIR writes the Workload and its ProvisioningRequests of each stage to DIR/<stage>.json
(tests/cluster/capacity_corpus/, which tests/cluster/test_why_capacity.py reads).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
import yaml

from tests.launcher.capacity_cases import CAPACITY_CASES
from tests.launcher.conftest import GOLDENS
from tests.realcluster.capture import KUEUE
from tests.realcluster.test_gpu_submit import xpk_service_account  # noqa: F401 (a fixture)
from tests.realcluster.test_submit_goldens import elxpk
from tests.realcluster.test_why_real import plain_why_line
from tools.testcluster.flex_start import NAMESPACE
from tools.testcluster.kubeapi import JOBSETS, PODS, LocalCluster, server_verdict

NS = NAMESPACE
PROVREQS = f"/apis/autoscaling.x-k8s.io/v1/namespaces/{NS}/provisioningrequests"
MERGE = "application/merge-patch+json"
FLEX = ["--tpu-type=v5p-8", "--no-pathways", "--command", "python3 train.py", "--flex-start",
        "--max-run-duration=2h", "--queue=dws-queue", f"--namespace={NS}"]


def _workload(cluster: LocalCluster, name: str) -> dict | None:
    status, jobset = cluster.request("GET", JOBSETS.format(ns=NS) + "/" + name)
    if status != 200:
        return None
    uid = jobset["metadata"]["uid"]
    return next((w for w in cluster.items(f"{KUEUE}/namespaces/{NS}/workloads")
                 if (w["metadata"].get("labels") or {}).get("kueue.x-k8s.io/job-uid") == uid), None)


def _request(cluster: LocalCluster, name: str) -> dict:
    """The ProvisioningRequest Kueue made for workload `name` (owned by its Workload)."""
    def found() -> dict | None:
        workload = _workload(cluster, name)
        if workload is None:
            return None
        uid = workload["metadata"]["uid"]
        return next((r for r in cluster.items(PROVREQS)
                     if any(o.get("uid") == uid for o in r["metadata"].get("ownerReferences") or [])), None)
    return cluster.wait_for(f"the ProvisioningRequest of {name}", found)


def _set_conditions(cluster: LocalCluster, request: dict, *conditions: tuple[str, str, str, str],
                    details: dict | None = None) -> None:
    """Write the request's status as the autoscaler would: (type, status, reason, message) each."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    status: dict = {"conditions": [{"type": t, "status": s, "reason": r, "message": m, "lastTransitionTime": now}
                                   for t, s, r, m in conditions]}
    if details:
        status["provisioningClassDetails"] = details
    code, body = cluster.request("PATCH", f"{PROVREQS}/{request['metadata']['name']}/status",
                                 {"status": status}, content_type=MERGE)
    assert code == 200, body


def _check_state(cluster: LocalCluster, name: str, state: str) -> dict:
    """The Workload once its dws-prov check is in `state`. Rejected is brief: Kueue deactivates the Workload
    (spec.active false) right after, and may clear its checks, so a deactivated Workload counts too."""
    def seen(w: dict) -> bool:
        if state == "Rejected" and (w.get("spec") or {}).get("active") is False:
            return True
        return any(c.get("name") == "dws-prov" and c.get("state") == state
                   for c in (w.get("status") or {}).get("admissionChecks") or [])

    return cluster.wait_for(f"admission check dws-prov {state} on {name}", lambda: (
        w if (w := _workload(cluster, name)) and seen(w) else None), timeout=240)


def _why(cluster: LocalCluster, name: str) -> dict:
    done = elxpk("workload", "status", name, "-n", NS, "--why", "--stuck-after", "0s", "-o", "json", cluster=cluster)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def _capture(cluster: LocalCluster, stage: str, name: str) -> None:
    target = os.environ.get("ELXPK_CAPACITY_CAPTURE")
    if not target:
        return
    workload = _workload(cluster, name)
    assert workload is not None
    requests = [r for r in cluster.items(PROVREQS) if any(
        o.get("uid") == workload["metadata"]["uid"] for o in r["metadata"].get("ownerReferences") or [])]
    Path(target).mkdir(parents=True, exist_ok=True)
    (Path(target) / f"{stage}.json").write_text(json.dumps(
        {"name": name, "workload": workload, "provisioning_requests": requests}, indent=1, sort_keys=True) + "\n")


@pytest.fixture
def flex(testcluster: LocalCluster):
    made: list[str] = []

    def create(name: str) -> dict:
        testcluster.remove_jobset(NS, name)
        done = elxpk("workload", "create", f"--workload={name}", *FLEX, cluster=testcluster)
        assert done.returncode == 0, done.stderr
        assert "--flex-start:" not in done.stderr  # dws-queue's ClusterQueue has the check: no warning
        made.append(name)
        return _request(testcluster, name)

    yield create
    for name in made:
        testcluster.remove_jobset(NS, name)


def causes(answer: dict) -> list[str]:
    return [r["cause"] for r in answer["why"]]


def test_waiting_for_capacity(testcluster: LocalCluster, flex) -> None:
    request = flex("flex-wait")
    # What Kueue asked for: the TPU pod set only (managedResources), with --max-run-duration as a parameter.
    assert request["spec"]["provisioningClassName"] == "queued-provisioning.gke.io"
    assert request["spec"]["parameters"] == {"maxRunDurationSeconds": "7200"}
    assert [p["count"] for p in request["spec"]["podSets"]] == [1]
    _check_state(testcluster, "flex-wait", "Pending")
    answer = _why(testcluster, "flex-wait")
    assert answer["state"] == "Queued" and causes(answer) == ["capacity-waiting"], answer["why"]
    assert f"ProvisioningRequest {request['metadata']['name']} of class queued-provisioning.gke.io is not " \
           "provisioned yet" in answer["why"][0]["text"]
    assert "Kueue: admission check dws-prov Pending" == answer["why"][0]["detail"]
    _capture(testcluster, "waiting", "flex-wait")
    # Accepted, with the ETA GKE writes in the Provisioned condition's message; Kueue copies it too.
    eta = "Provisioning Request's capacity is expected to be available at 2026-12-04T09:00:00Z"
    _set_conditions(testcluster, request, ("Accepted", "True", "Accepted", "accepted by queued provisioning"),
                    ("Provisioned", "False", "Waiting", eta))
    testcluster.wait_for("Kueue copying the ETA", lambda: eta in json.dumps(_workload(testcluster, "flex-wait")))
    answer = _why(testcluster, "flex-wait")
    assert causes(answer) == ["capacity-waiting"] and "(accepted)" in answer["why"][0]["text"]
    assert answer["why"][0]["text"].endswith(f"{eta}; Kueue admits the workload once it is")
    _capture(testcluster, "accepted", "flex-wait")
    # Plain status makes no extra call: its Why line is Kueue's check state, with the ETA Kueue copied.
    plain = " ".join(plain_why_line(testcluster, "flex-wait", NS).split())
    assert "admission checks dws-prov Pending" in plain and "2026-12-04T09:00:00Z" in plain, plain


def test_provisioned_admits_and_the_pods_get_the_request_selector(testcluster: LocalCluster, flex) -> None:
    request = flex("flex-prov")
    _set_conditions(testcluster, request, ("Provisioned", "True", "Provisioned", "capacity is provisioned"),
                    details={"ResizeRequestName": "resize-request-1"})
    _check_state(testcluster, "flex-prov", "Ready")
    pods = testcluster.wait_for("the pod of flex-prov", lambda: testcluster.items(
        PODS.format(ns=NS), labelSelector="jobset.sigs.k8s.io/jobset-name=flex-prov"))
    # Kueue's podSetUpdates (dws-config): the pod now also selects the nodes made for this request.
    assert pods[0]["spec"]["nodeSelector"]["autoscaling.gke.io/provisioning-request"] == "resize-request-1"
    assert pods[0]["spec"]["nodeSelector"]["cloud.google.com/gke-queued"] == "true"
    testcluster.wait_for("the scheduler's verdict", lambda: any(
        c.get("reason") == "Unschedulable" for p in testcluster.items(
            PODS.format(ns=NS), labelSelector="jobset.sigs.k8s.io/jobset-name=flex-prov")
        for c in p["status"].get("conditions") or []))
    answer = _why(testcluster, "flex-prov")
    assert causes(answer) == ["capacity-provisioned", "no-node-pool"], answer["why"]
    assert answer["why"][0]["text"].endswith("Provisioned: capacity is provisioned")
    # The v5p 2x2x1 nodes exist; what they lack is what the capacity mode and Kueue's update select.
    assert answer["why"][1]["text"].endswith("lack what the pod also selects: autoscaling.gke.io/provisioning-"
                                             "request=resize-request-1, cloud.google.com/gke-queued=true")
    _capture(testcluster, "provisioned", "flex-prov")


@pytest.mark.parametrize(("conditions", "cause", "says"), [
    ([("Failed", "True", "FailedToProvision", "GCE out of resources for ct5p-hightpu-4t in us-east5-a")],
     "capacity-failed", "Failed: GCE out of resources for ct5p-hightpu-4t in us-east5-a"),
    ([("Provisioned", "True", "Provisioned", "capacity is provisioned"),
      ("BookingExpired", "True", "BookingExpired", "capacity booking expired: no pod used it within 10m")],
     "capacity-booking-expired", "BookingExpired: capacity booking expired: no pod used it within 10m"),
])
def test_failed_or_expired_request_is_named_with_the_fix(testcluster: LocalCluster, flex, conditions, cause,
                                                         says) -> None:
    name = f"flex-{cause.split('-', 1)[1]}"
    request = flex(name)
    _set_conditions(testcluster, request, *conditions)
    _check_state(testcluster, name, "Rejected")  # backoffLimitCount 0 (flex_start.py): no retry
    # Kueue then deactivates the Workload and resets the check ("Reset to Pending after eviction").
    testcluster.wait_for(f"Kueue deactivating {name}", lambda: (_workload(testcluster, name) or {}).get(
        "spec", {}).get("active") is False)
    answer = _why(testcluster, name)
    assert causes(answer)[0] == cause, answer["why"]
    assert says in answer["why"][0]["text"] and "--replace" in answer["why"][0]["fix"]
    assert answer["why"][0]["text"].endswith("; Kueue rejected the check and deactivated the workload")
    assert answer["why"][0]["detail"].startswith("Kueue: admission check dws-prov")
    assert "evicted" not in causes(answer) and "admission-check" not in causes(answer)
    _capture(testcluster, cause.split("-", 1)[1], name)


@pytest.mark.usefixtures("xpk_service_account")
@pytest.mark.parametrize("name", sorted(CAPACITY_CASES))
def test_every_capacity_golden_is_admitted(testcluster: LocalCluster, name: str) -> None:
    """The API server and JobSet webhook (dryRun=All, strict), then each Job and a pod of it: no refusal
    (the GPU pods name xpk's service account, which `xpk cluster create` makes)."""
    doc = yaml.safe_load((GOLDENS / f"{name}.yaml").read_text(encoding="utf-8"))
    assert server_verdict(testcluster, doc) == []


def test_flex_start_into_a_queue_without_the_check_is_warned(testcluster: LocalCluster) -> None:
    """multislice-queue's ClusterQueue has no ProvisioningRequest check: Kueue would admit at once and the
    pods would wait for gke-queued nodes nothing makes. Said before submitting (a server-side dry run here)."""
    argv = [a for a in FLEX if not a.startswith(("--queue", "--namespace"))]
    done = elxpk("workload", "create", "--workload=flex-noqueue", *argv, "--dry-run-server", cluster=testcluster)
    assert done.returncode == 0, done.stderr
    assert ('--flex-start: ClusterQueue "cluster-queue" (of LocalQueue "multislice-queue") has no '
            "ProvisioningRequest admission check") in done.stderr
    assert testcluster.request("GET", JOBSETS.format(ns="default") + "/flex-noqueue")[0] == 404
