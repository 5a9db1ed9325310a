"""What `xpk cluster create --flex` adds for flex-start (Dynamic Workload Scheduler), on the test control
plane: the ProvisioningRequest admission check `dws-prov` and its ProvisioningRequestConfig `dws-config`,
as xpk's src/xpk/templates/kueue_config.yaml.j2 renders them, and a ClusterQueue `dws-cluster-queue` with
that check behind the LocalQueue `dws-queue`. That LocalQueue is in a namespace of its own, `flex-start`:
`default` keeps exactly one LocalQueue (`multislice-queue`), which gcluster auto-discovers there (a second
one makes it fall back to `default-queue`, tests/launcher/gcluster_renders/capture.py).

One difference from xpk: `retryStrategy.backoffLimitCount: 0`. Kueue's default (3 retries, 60 s base
back-off) would make a Failed or BookingExpired request come back as a new request minutes later; with 0
Kueue rejects the check at once and deactivates the Workload, which a test reads without waiting.
No cluster autoscaler runs here: a test moves a ProvisioningRequest to Provisioned, Failed or
BookingExpired by writing its status itself (tests/realcluster/test_capacity_real.py).
"""

from __future__ import annotations

from pathlib import Path

CRD = Path(__file__).parent / "crds" / "autoscaling.x-k8s.io_provisioningrequests.yaml"
CHECK, CONFIG, CLUSTER_QUEUE, LOCAL_QUEUE = "dws-prov", "dws-config", "dws-cluster-queue", "dws-queue"
NAMESPACE = "flex-start"
PATHS = {"AdmissionCheck": "/apis/kueue.x-k8s.io/v1beta2/admissionchecks",
         "ProvisioningRequestConfig": "/apis/kueue.x-k8s.io/v1beta2/provisioningrequestconfigs"}


def flex_start_objects(tpu_chips: int, preemption: dict) -> list[dict]:
    """The objects above; `preemption` is the ClusterQueue's, xpk's for every queue it makes."""
    quota = {"cpu": "100000", "memory": "100Ti", "google.com/tpu": str(tpu_chips)}
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ProvisioningRequestConfig", "metadata": {"name": CONFIG},
         "spec": {"provisioningClassName": "queued-provisioning.gke.io",
                  "podSetUpdates": {"nodeSelector": [{"key": "autoscaling.gke.io/provisioning-request",
                                                      "valueFromProvisioningClassDetail": "ResizeRequestName"}]},
                  "managedResources": ["google.com/tpu"],
                  "retryStrategy": {"backoffLimitCount": 0}}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck", "metadata": {"name": CHECK},
         "spec": {"controllerName": "kueue.x-k8s.io/provisioning-request",
                  "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": CONFIG}}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": CLUSTER_QUEUE},
         # v1beta2 spells xpk's `admissionChecks: [dws-prov]` as admissionChecksStrategy
         "spec": {"namespaceSelector": {}, "preemption": preemption,
                  "admissionChecksStrategy": {"admissionChecks": [{"name": CHECK}]},
                  "resourceGroups": [{
             "coveredResources": list(quota),
             "flavors": [{"name": "default-flavor", "resources": [
                 {"name": name, "nominalQuota": value} for name, value in quota.items()]}]}]}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
         "metadata": {"name": LOCAL_QUEUE, "namespace": NAMESPACE}, "spec": {"clusterQueue": CLUSTER_QUEUE}},
    ]
