"""What the real control plane holds of one workload, written to a corpus file for the unit tier's tests
(tests/cluster/captured.py loads them into the fake API server; tests/cluster/test_why.py reads them):
captured by a test run, never written by hand. Each capturing test names its own variable, DIR=<corpus>."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tools.testcluster.kubeapi import JOBS, JOBSETS, PODS, LocalCluster

KUEUE = "/apis/kueue.x-k8s.io/v1beta2"
NODES = "/api/v1/nodes"
EVENTS = "/api/v1/namespaces/{ns}/events"


def capture(cluster: LocalCluster, case: str, name: str, namespace: str = "default", *,
            env: str = "ELXPK_WHY_CAPTURE", events: bool = False) -> None:
    """With ENV=DIR, write what the API server holds of workload `name` to DIR/CASE.json: the objects `status`
    and `status --why` read (and, with `events`, the Events of those objects, which `events` reads)."""
    target = os.environ.get(env)
    if not target:
        return
    status, jobset = cluster.request("GET", JOBSETS.format(ns=namespace) + "/" + name)
    assert status == 200, jobset
    selector = f"jobset.sigs.k8s.io/jobset-name={name}"
    workloads = [w for w in cluster.items(f"{KUEUE}/namespaces/{namespace}/workloads")
                 if (w["metadata"].get("labels") or {}).get("kueue.x-k8s.io/job-uid") == jobset["metadata"]["uid"]]
    queue = (jobset["metadata"].get("labels") or {}).get("kueue.x-k8s.io/queue-name")
    local_queue = cluster.request("GET", f"{KUEUE}/namespaces/{namespace}/localqueues/{queue}")[1] if queue else None
    cq = ((local_queue or {}).get("spec") or {}).get("clusterQueue")
    pods = cluster.items(PODS.format(ns=namespace), labelSelector=selector)
    unschedulable = any(c.get("reason") == "Unschedulable" for p in pods for c in p["status"].get("conditions", []))
    objects = {"jobset": jobset, "jobs": cluster.items(JOBS.format(ns=namespace), labelSelector=selector),
               "pods": pods, "workloads": workloads,
               "local_queue": local_queue,
               "cluster_queue": cluster.request("GET", f"{KUEUE}/clusterqueues/{cq}")[1] if cq else None,
               "nodes": [{"metadata": {"name": n["metadata"]["name"], "labels": n["metadata"]["labels"]},
                          "spec": {"taints": n["spec"].get("taints")}}
                         for n in cluster.items(NODES, labelSelector="cloud.google.com/gke-tpu-accelerator")
                         if unschedulable]}  # what --why lists, only then
    if events:
        names = {name} | {o["metadata"]["name"] for o in (*objects["jobs"], *pods, *workloads)}
        objects["events"] = [e for e in cluster.items(EVENTS.format(ns=namespace))
                             if (e.get("involvedObject") or {}).get("name") in names]
    for obj in [jobset, *objects["jobs"], *pods, *workloads, local_queue, objects["cluster_queue"],
                *objects.get("events", [])]:
        (obj or {}).get("metadata", {}).pop("managedFields", None)  # bulk, and nothing why.py reads
    Path(target).mkdir(parents=True, exist_ok=True)
    (Path(target) / f"{case}.json").write_text(json.dumps(objects, indent=1, sort_keys=True) + "\n")
