"""`elxpk workload status NAME --why` on the real scheduler, Kueue and JobSet controller: the 8 stuck causes,
each produced the way it happens on a cluster, and read back through the `elxpk` console script.

- quota: a ClusterQueue with 4 TPU chips, a workload asking 8;
- no node pool: `--tpu-type v6e-4` (topology 2x2), which no kwok node has;
- insufficient google.com/tpu: a v6e 2x2 node whose device plugin reports 2 chips, a pod asking 4;
- taint: a v6e 2x2 node with a maintenance taint the pods do not tolerate;
- image pull / crash loop: kwok playing the kubelet (stages image-pull and crash-loop of
  tools/testcluster/stages.yaml): the image registry.testcluster.invalid/no-such-image:1 never pulls, and a
  pod annotated testcluster.elxpk.dev/crash-loop=CODE keeps exiting with CODE;
- admission check: an AdmissionCheck whose controller nobody runs (Kueue marks the ClusterQueue inactive),
  then marked Active as its controller would on start, so the check stays Pending with quota reserved;
- suspended: a JobSet with spec.suspend true outside Kueue.

The objects each case leaves are what tests/cluster/why_corpus/ holds (ELXPK_WHY_CAPTURE=DIR writes them
again), so the unit tests read the components' own words, not ones made up here.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator

import pytest
import yaml

from tests.realcluster.capture import KUEUE, NODES, capture
from tests.realcluster.test_submit_goldens import elxpk
from tools.testcluster.kubeapi import JOBSETS, PODS, LocalCluster

UNPULLABLE = "registry.testcluster.invalid/no-such-image:1"
SHAPE = ["--no-pathways", "--num-slices=1", "--command", "python3 train.py"]
MERGE = "application/merge-patch+json"


def why(cluster: LocalCluster, name: str, namespace: str = "default") -> dict:
    done = elxpk("workload", "status", name, "-n", namespace, "--why", "--stuck-after", "0s", "-o", "json",
                 cluster=cluster)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


# verbs a fix may name that change the cluster: the test runs only the ones that read it
_CHANGES = ("create", "delete", "kill-slice", "create-pathways")


def run_fixes(cluster: LocalCluster, answer: dict, namespace: str = "default") -> list[str]:
    """Run every `elxpk workload ...` command the fixes of `answer` print, as printed (no placeholder in
    capitals, no verb that changes the cluster), on the case that printed it: each must work (#33: a fix
    that is a dead end). Returns the commands run."""
    ran = []
    for reason in answer["why"]:
        for command in re.findall(r"`(elxpk workload [^`]+)`", reason["fix"]):
            argv = shlex.split(command)
            if argv[2] in _CHANGES or any(len(a) > 1 and a.isupper() for a in argv):
                continue
            done = elxpk(*argv[1:], *([] if "-n" in argv else ["-n", namespace]), cluster=cluster)
            assert done.returncode == 0, (command, done.stdout[-500:], done.stderr[-500:])
            ran.append(command)
    return ran


def plain_why_line(cluster: LocalCluster, name: str, namespace: str = "default") -> str:
    done = elxpk("workload", "status", name, "-n", namespace, "--stuck-after", "0s", cluster=cluster)
    assert done.returncode == 0, done.stderr
    return " ".join(done.stdout.split())


def create(cluster: LocalCluster, name: str, *flags: str, namespace: str = "default") -> None:
    cluster.remove_jobset(namespace, name)
    done = elxpk("workload", "create", f"--workload={name}", "-n", namespace, *flags, cluster=cluster)
    assert done.returncode == 0, done.stderr


def apply(cluster: LocalCluster, path: str, obj: dict) -> None:
    status, body = cluster.request("POST", path, obj)
    assert status in (200, 201, 409), body


def delete(cluster: LocalCluster, path: str) -> None:
    cluster.request("DELETE", path, {"propagationPolicy": "Foreground"})


def pods_of(cluster: LocalCluster, name: str, namespace: str = "default") -> list[dict]:
    return cluster.items(PODS.format(ns=namespace), labelSelector=f"jobset.sigs.k8s.io/jobset-name={name}")


def causes(answer: dict) -> list[str]:
    return [r["cause"] for r in answer["why"]]


@pytest.fixture
def v6e_node(testcluster: LocalCluster) -> Iterator:
    """Adds one kwok node shaped like a v6e 2x2 node pool (what `--tpu-type v6e-4` asks for), with the
    chips and taints a test gives; removed after."""
    made: list[str] = []

    def add(name: str, *, chips: str = "4", taints: list | None = None) -> None:
        capacity = {"cpu": "200", "memory": "400Gi", "pods": "110", "google.com/tpu": chips}
        node = {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "annotations": {"kwok.x-k8s.io/node": "fake"},
                             "labels": {"cloud.google.com/gke-nodepool": name,
                                        "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
                                        "cloud.google.com/gke-tpu-topology": "2x2", "kubernetes.io/hostname": name,
                                        "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "type": "kwok"}},
                "spec": {"taints": [{"key": "google.com/tpu", "value": "present", "effect": "NoSchedule"},
                                    *(taints or [])]},
                "status": {"capacity": capacity, "allocatable": capacity}}
        apply(testcluster, NODES, node)
        made.append(name)
        testcluster.wait_for(f"node {name} Ready", lambda: any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in testcluster.request("GET", f"{NODES}/{name}")[1].get("status", {}).get("conditions", [])))

    yield add
    for name in made:
        delete(testcluster, f"{NODES}/{name}")


def scheduler_says(cluster: LocalCluster, name: str, case: str, words: str, tpu_type: str = "v6e-4") -> dict:
    """A one-slice workload, once the scheduler's message on its pod has `words`: `status --why`."""
    create(cluster, name, f"--tpu-type={tpu_type}", *SHAPE)
    cluster.wait_for(f"scheduler: {words}", lambda: any(
        c.get("reason") == "Unschedulable" and words in c.get("message", "")
        for p in pods_of(cluster, name) for c in p["status"].get("conditions", [])))
    answer = why(cluster, name)
    capture(cluster, case, name)
    run_fixes(cluster, answer)
    return answer


def test_no_node_pool_names_the_shape_and_the_flag(testcluster: LocalCluster) -> None:
    answer = scheduler_says(testcluster, "why-nopool", "no_node_pool", "didn't match Pod's node affinity")
    first = answer["why"][0]
    assert first["cause"] == "no-node-pool", answer["why"]
    assert "gke-tpu-accelerator tpu-v6e-slice, gke-tpu-topology 2x2" in first["text"], first
    assert "node pools with tpu-v6e-slice: 4x4" in first["text"], first  # the v6e-16 pools of the cluster
    assert "`--tpu-type v6e-4` needs a node pool of ct6e-standard-4t with --tpu-topology 2x2" in first["fix"], first
    assert "didn't match Pod's node affinity/selector" in first["detail"], first  # the scheduler's words
    assert "no node pool has" in plain_why_line(testcluster, "why-nopool")
    testcluster.remove_jobset("default", "why-nopool")


def test_insufficient_tpu_and_taint(testcluster: LocalCluster, v6e_node) -> None:
    v6e_node("why-v6e-short", chips="2")
    answer = scheduler_says(testcluster, "why-short", "insufficient_tpu", "Insufficient google.com/tpu")
    assert causes(answer) == ["insufficient-tpu"], answer["why"]
    assert "1 node(s) with gke-tpu-accelerator tpu-v6e-slice" in answer["why"][0]["text"]
    assert "4 chips asked" in answer["why"][0]["text"]
    testcluster.remove_jobset("default", "why-short")
    delete(testcluster, f"{NODES}/why-v6e-short")

    v6e_node("why-v6e-tainted", taints=[{"key": "why.elxpk.dev/maintenance", "value": "true",
                                          "effect": "NoSchedule"}])
    answer = scheduler_says(testcluster, "why-taint", "taint", "untolerated taint")
    assert causes(answer) == ["taint"], answer["why"]
    # Kubernetes 1.34's scheduler says "1 node(s) had untolerated taint(s)"; the taint comes from the node.
    assert "untolerated taint(s)" in answer["why"][0]["detail"]
    assert "why.elxpk.dev/maintenance=true:NoSchedule" in answer["why"][0]["text"], answer["why"][0]
    assert answer["why"][0]["fix"].endswith("remove the taint why.elxpk.dev/maintenance from the nodes labelled "
                                            "cloud.google.com/gke-tpu-accelerator=tpu-v6e-slice,"
                                            "cloud.google.com/gke-tpu-topology=2x2"), answer["why"][0]
    testcluster.remove_jobset("default", "why-taint")


def test_image_pull_and_crash_loop(testcluster: LocalCluster) -> None:
    create(testcluster, "why-image", "--tpu-type=v5p-8", f"--docker-image={UNPULLABLE}", *SHAPE)
    testcluster.wait_for("ImagePullBackOff", lambda: any(
        (s.get("state", {}).get("waiting") or {}).get("reason") == "ImagePullBackOff"
        for p in pods_of(testcluster, "why-image") for s in p["status"].get("containerStatuses", [])))
    answer = why(testcluster, "why-image")
    capture(testcluster, "image_pull", "why-image")
    run_fixes(testcluster, answer)
    assert causes(answer) == ["image-pull"], answer["why"]
    assert UNPULLABLE in answer["why"][0]["text"] and "--docker-image" in answer["why"][0]["fix"]
    assert "cannot be pulled" in plain_why_line(testcluster, "why-image")
    testcluster.remove_jobset("default", "why-image")

    create(testcluster, "why-crash", "--tpu-type=v5p-16", *SHAPE)
    testcluster.wait_for("both pods of the v5p-16 slice running", lambda: len(
        [p for p in pods_of(testcluster, "why-crash") if p["status"].get("phase") == "Running"]) == 2)
    for pod in pods_of(testcluster, "why-crash"):
        status, body = testcluster.request("PATCH", PODS.format(ns="default") + "/" + pod["metadata"]["name"],
                                           {"metadata": {"annotations": {"testcluster.elxpk.dev/crash-loop": "70"}}},
                                           content_type=MERGE)
        assert status == 200, body
    testcluster.wait_for("CrashLoopBackOff", lambda: all(
        (s.get("state", {}).get("waiting") or {}).get("reason") == "CrashLoopBackOff"
        for p in pods_of(testcluster, "why-crash") for s in p["status"].get("containerStatuses", [])))
    answer = why(testcluster, "why-crash")
    capture(testcluster, "crash_loop", "why-crash")
    assert answer["state"] == "Restarting" and causes(answer) == ["crash-loop"], answer["why"]
    assert "2 pods: container jax-tpu keeps exiting" in answer["why"][0]["text"]
    assert "exit 70 user_error: not retryable" in answer["why"][0]["text"]  # the class from exit_codes.py
    assert "elxpk workload logs why-crash --slice 0 --vm " in answer["why"][0]["fix"], answer["why"][0]
    assert len(run_fixes(testcluster, answer)) == 1  # the crashed container's log, --previous
    testcluster.remove_jobset("default", "why-crash")


def _queue_objects(namespace: str, cq: str, lq: str, tpu: str, checks: list[str]) -> list[tuple[str, dict]]:
    quota = [{"name": "cpu", "nominalQuota": "100000"}, {"name": "memory", "nominalQuota": "100Ti"},
             {"name": "google.com/tpu", "nominalQuota": tpu}]
    spec: dict = {"namespaceSelector": {"matchLabels": {"why.elxpk.dev/test": namespace}},
                  "resourceGroups": [{"coveredResources": ["cpu", "memory", "google.com/tpu"],
                                      "flavors": [{"name": "default-flavor", "resources": quota}]}]}
    if checks:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": c} for c in checks]}
    return [("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {
                "name": namespace, "labels": {"why.elxpk.dev/test": namespace}}}),
            *[(f"{KUEUE}/admissionchecks", {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck",
                                            "metadata": {"name": c},
                                            "spec": {"controllerName": "why.elxpk.dev/nobody-runs-this"}})
              for c in checks],
            (f"{KUEUE}/clusterqueues", {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
                                        "metadata": {"name": cq}, "spec": spec}),
            (f"{KUEUE}/namespaces/{namespace}/localqueues", {
                "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                "metadata": {"name": lq, "namespace": namespace}, "spec": {"clusterQueue": cq}})]


@pytest.fixture
def queues(testcluster: LocalCluster) -> Iterator:
    """Makes a namespace with its own ClusterQueue and LocalQueue (and AdmissionChecks); removed after."""
    made: list[tuple[str, dict]] = []

    def make(namespace: str, cq: str, lq: str, tpu: str, checks: list[str]) -> None:
        for path, obj in _queue_objects(namespace, cq, lq, tpu, checks):
            apply(testcluster, path, obj)
            made.append((path, obj))

    yield make
    for path, obj in reversed(made):
        if obj["kind"] == "Namespace":
            for js in testcluster.items(JOBSETS.format(ns=obj["metadata"]["name"])):
                testcluster.remove_jobset(obj["metadata"]["name"], js["metadata"]["name"])
        delete(testcluster, f"{path}/{obj['metadata']['name']}")


def test_quota(testcluster: LocalCluster, queues) -> None:
    queues("why-quota", "why-small", "small-queue", "4", [])
    create(testcluster, "why-quota", "--queue=small-queue", "--tpu-type=v5p-16", *SHAPE, namespace="why-quota")
    answer = testcluster.wait_for("Kueue's quota verdict", lambda: (
        a := why(testcluster, "why-quota", "why-quota"))["why"] and a["why"][0]["cause"] == "quota" and a)
    capture(testcluster, "quota", "why-quota", "why-quota")
    run_fixes(testcluster, answer, "why-quota")
    first = answer["why"][0]
    assert answer["state"] == "Queued", answer
    assert "not enough google.com/tpu quota in flavor default-flavor: asks 8, ClusterQueue why-small has at " \
           "most 4" in first["text"], first
    assert "--num-slices" in first["fix"] and "--queue" in first["fix"], first
    assert "insufficient quota for google.com/tpu" in first["detail"], first  # Kueue's words
    # Kueue 0.17 exposes positions only through its visibility API (an aggregated API server), which the
    # test control plane does not register: status says so rather than guess.
    assert "visibility API (visibility.kueue.x-k8s.io) is not served" in first["detail"], first
    assert "not enough google.com/tpu quota" in plain_why_line(testcluster, "why-quota", "why-quota")


def test_admission_check_pending(testcluster: LocalCluster, queues) -> None:
    queues("why-check", "why-checked", "checked-queue", "1000", ["why-never-decided"])
    create(testcluster, "why-check", "--queue=checked-queue", "--tpu-type=v5p-16", *SHAPE, namespace="why-check")
    answer = testcluster.wait_for("ClusterQueue inactive", lambda: (
        a := why(testcluster, "why-check", "why-check"))["why"] and a["why"][0]["cause"] == "admission-check" and a)
    capture(testcluster, "admission_check_inactive", "why-check", "why-check")
    run_fixes(testcluster, answer, "why-check")
    first = answer["why"][0]
    assert "ClusterQueue why-checked is inactive" in first["text"], first
    assert "references inactive AdmissionCheck(s): why-never-decided" in first["text"], first
    assert "AdmissionCheck why-never-decided" in first["fix"], first

    # Its controller starts and marks the check Active, but never decides it: quota reserved, not admitted.
    status, body = testcluster.request(
        "PATCH", f"{KUEUE}/admissionchecks/why-never-decided/status",
        {"status": {"conditions": [{"type": "Active", "status": "True", "reason": "Active", "message": "up",
                                    "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}, content_type=MERGE)
    assert status == 200, body
    answer = testcluster.wait_for("quota reserved, check pending", lambda: (
        a := why(testcluster, "why-check", "why-check"))["why"] and "reserved quota" in a["why"][0]["text"] and a)
    capture(testcluster, "admission_check_pending", "why-check", "why-check")
    run_fixes(testcluster, answer, "why-check")
    first = answer["why"][0]
    assert first["cause"] == "admission-check" and "why-never-decided Pending" in first["text"], first
    assert answer["state"] == "Queued", answer


def test_suspended_outside_kueue(testcluster: LocalCluster) -> None:
    testcluster.remove_jobset("default", "why-suspended")
    rendered = elxpk("workload", "create", "--workload=why-suspended", "--tpu-type=v5p-8", *SHAPE, "--dry-run",
                     cluster=testcluster)
    assert rendered.returncode == 0, rendered.stderr
    jobset = next(d for d in yaml.safe_load_all(rendered.stdout) if d and d.get("kind") == "JobSet")
    del jobset["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
    jobset["spec"]["suspend"] = True
    apply(testcluster, JOBSETS.format(ns="default"), jobset)
    answer = testcluster.wait_for("JobSet's Suspended condition", lambda: (
        a := why(testcluster, "why-suspended"))["why"] and a["why"][0]["detail"] and a)
    capture(testcluster, "suspended", "why-suspended")
    run_fixes(testcluster, answer)
    first = answer["why"][0]
    assert first["cause"] == "suspended" and "no Kueue queue label" in first["text"], first
    assert "spec.suspend to false on JobSet why-suspended" in first["fix"] and first["detail"] == "JobSet: jobset is suspended"
    testcluster.remove_jobset("default", "why-suspended")


def test_preempted_by_higher_priority(testcluster: LocalCluster, queues) -> None:
    """Beyond the 8: Kueue evicting a running workload for a higher-priority one of the same ClusterQueue.
    The queue preempts as the test cluster's own `cluster-queue` does, which is xpk's (a queue of 8 chips
    here, so that two workloads cannot both fit)."""
    queues("why-preempt", "why-preempting", "preempt-queue", "8", [])
    status, shared = testcluster.request("GET", f"{KUEUE}/clusterqueues/cluster-queue")
    assert status == 200, shared
    preemption = shared["spec"]["preemption"]
    assert {k: preemption.get(k) for k in ("reclaimWithinCohort", "withinClusterQueue")} == {
        "reclaimWithinCohort": "Never", "withinClusterQueue": "LowerPriority"}, preemption  # xpk's
    status, body = testcluster.request("PATCH", f"{KUEUE}/clusterqueues/why-preempting",
                                       {"spec": {"preemption": preemption}}, content_type=MERGE)
    assert status == 200, body
    flags = ["--queue=preempt-queue", "--tpu-type=v5p-16", *SHAPE]
    create(testcluster, "why-low", "--priority=low", *flags, namespace="why-preempt")
    testcluster.wait_for("low running", lambda: len([p for p in pods_of(testcluster, "why-low", "why-preempt")
                                                     if p["status"].get("phase") == "Running"]) == 2)
    create(testcluster, "why-high", "--priority=high", *flags, namespace="why-preempt")
    answer = testcluster.wait_for("low preempted", lambda: (
        a := why(testcluster, "why-low", "why-preempt"))["why"] and a["why"][0]["cause"] == "evicted" and a)
    capture(testcluster, "preempted", "why-low", "why-preempt", events=True)
    run_fixes(testcluster, answer, "why-preempt")
    # #33: one preemption, one line (Kueue's Evicted and Preempted conditions, its Preempted and
    # EvictedDueToPreempted Events were 4), dated
    listed = elxpk("workload", "events", "why-low", "-n", "why-preempt", "-o", "json", cluster=testcluster)
    assert listed.returncode == 0, listed.stderr
    incidents = [json.loads(line) for line in listed.stdout.splitlines()]
    kueue = [i for i in incidents if "Preempt" in i["reason"] or "Preempt" in i["message"]]
    assert [(i["kind"], i["reason"]) for i in kueue] == [("kueue_eviction", "Preempted/InClusterQueue")], kueue
    assert all(i["time"] for i in incidents), incidents
    first = answer["why"][0]
    assert "Kueue preempted the workload (InClusterQueue)" in first["text"] and "--priority" in first["fix"], first
    assert first["detail"].startswith("Kueue: Preempted to accommodate a workload"), first  # Kueue's words


def test_first_failed_job_with_the_exit_class(testcluster: LocalCluster) -> None:
    create(testcluster, "why-failed", "--tpu-type=v5p-8", *SHAPE)
    testcluster.wait_for("running", lambda: any(p["status"].get("phase") == "Running"
                                                for p in pods_of(testcluster, "why-failed")))
    assert testcluster.exit_pods("default", "jobset.sigs.k8s.io/jobset-name=why-failed", 70) == 1
    answer = testcluster.wait_for("failed", lambda: (a := why(testcluster, "why-failed"))["state"] == "Failed" and a)
    capture(testcluster, "job_failed", "why-failed")
    first = answer["why"][0]
    assert first["cause"] == "job-failed" and "Job why-failed-slice-job-0 of replicatedJob slice-job" in first["text"]
    assert "exit 70 user_error: not retryable" in first["text"], first
    assert "failed with exit code 70" in first["detail"], first  # the Job controller's words
    # the failed pod's own log (restartPolicy Never: there is no --previous), not "is it still queued?"
    assert run_fixes(testcluster, answer) == ["elxpk workload logs why-failed --slice 0 --vm 0"], answer["why"]
    testcluster.remove_jobset("default", "why-failed")


def test_too_few_nodes_for_the_slices_is_not_another_workload(testcluster: LocalCluster) -> None:
    """#43: 6 one-host slices of v5p-8 on the cluster's 2 v5p-8 nodes, no other workload: 2 run, and the
    scheduler tells the other 4 pods that the 2 nodes have no free ports. Those nodes are held by the
    workload's own slices, so --why (and the plain status line, which the `stuck` alert carries) says there
    are not enough nodes of this type, with the numbers, and never blames another workload."""
    name = "why-few"
    create(testcluster, name, "--tpu-type=v5p-8", "--no-pathways", "--num-slices=6", "--command", "python3 t.py")
    testcluster.wait_for("2 running, the rest told no free ports", lambda: len(
        [p for p in pods_of(testcluster, name) if p["status"].get("phase") == "Running"]) == 2 and any(
        c.get("reason") == "Unschedulable" and "free ports" in c.get("message", "")
        for p in pods_of(testcluster, name) for c in p["status"].get("conditions", [])))
    answer = why(testcluster, name)
    capture(testcluster, "too_few_nodes", name)
    assert causes(answer) == ["too-few-nodes"], answer["why"]
    text = answer["why"][0]["text"]
    assert "not enough nodes of this type for the slices: 2 node(s) with gke-tpu-accelerator tpu-v5p-slice" in text
    assert "asks for 6 pods" in text and "its own pods hold the 2 taken, no other workload's do" in text, text
    assert "another workload" not in text and "--num-slices" in answer["why"][0]["fix"]
    line = plain_why_line(testcluster, name)
    assert "not enough nodes of this type" in line and "another workload" not in line, line
    testcluster.remove_jobset("default", name)


def test_hosts_held_by_another_workload(testcluster: LocalCluster) -> None:
    """Beyond the 8: both v5p-8 node pools run another workload, whose pods hold the TPU hosts' ports."""
    create(testcluster, "why-holder", "--tpu-type=v5p-8", "--no-pathways", "--num-slices=2", "--command", "python3 t.py")
    testcluster.wait_for("holder running", lambda: len([p for p in pods_of(testcluster, "why-holder")
                                                        if p["status"].get("phase") == "Running"]) == 2)
    answer = scheduler_says(testcluster, "why-ports", "host_ports", "free ports", tpu_type="v5p-8")
    assert "host-ports" in causes(answer), answer["why"]
    reason = answer["why"][causes(answer).index("host-ports")]
    assert "2 node(s) with gke-tpu-accelerator tpu-v5p-slice, gke-tpu-topology 2x2x1 are taken" in reason["text"]
    assert "elxpk workload list" in reason["fix"], reason
    assert "elxpk workload list" in run_fixes(testcluster, answer)
    testcluster.remove_jobset("default", "why-ports")
    testcluster.remove_jobset("default", "why-holder")

