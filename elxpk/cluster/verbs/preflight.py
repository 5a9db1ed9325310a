"""Checks before `workload create` touches anything: is the cluster able to run this manifest?

Hard failures (the JobSet API, the namespace, a PriorityClass or ServiceAccount the pods name, Pathways' CPU
node pool) raise ClusterError with the fix; a missing Kueue LocalQueue only warns (a cluster without
Kueue runs the JobSet directly; with Kueue the workload would sit unadmitted).
"""

from __future__ import annotations

from elxpk.cluster.api.kube import Kube
from elxpk.cluster.objects.labels import KUEUE_QUEUE
from elxpk.cluster.objects.meta import EMPTY, Meta
from elxpk.cluster.objects.queues import AdmissionCheckObject, ClusterQueue, LocalQueue
from elxpk.cluster.objects.workloads import JobSet, JobSpec
from elxpk.cluster.verbs.observe import JOBSET_MISSING
from elxpk.errors import ClusterError

CPU_NODE_POOL = "cpu-np"
QUEUED_LABEL = "cloud.google.com/gke-queued"  # --flex-start's node selector (elxpk/create/capacity.py)
PROVISIONING_CONTROLLER = "kueue.x-k8s.io/provisioning-request"
NODE_POOL_LABEL = "cloud.google.com/gke-nodepool"


def _jobs(jobsets: list[JobSet]) -> list[JobSpec]:
    return [r.job for js in jobsets for r in js.replicated_jobs]


def preflight(kube: Kube, objects: list[dict], namespace: str) -> list[str]:
    """Raise ClusterError on what would make the workload fail; return warnings to print."""
    warnings: list[str] = []
    jobsets = [JobSet.of(o) for o in objects if o.get("kind") == "JobSet"]
    if not jobsets:
        return warnings
    if not kube.jobset_crd_served():
        raise ClusterError(JOBSET_MISSING)
    for each in sorted({Meta.of(o).namespace or namespace for o in objects}):
        kube.require_namespace(each)  # exit 2 before anything is created
    problems: list[str] = []
    priorities = sorted({str(job.priority_class) for job in _jobs(jobsets) if job.priority_class})
    for name in priorities:
        if not kube.priority_class_exists(name):
            problems.append(f'PriorityClass "{name}" does not exist on this cluster: choose an existing one with '
                            "--priority, or create it (xpk's cluster create makes very-low .. very-high)")
    # A missing service account is refused by the API server when the Job controller creates the pods, after
    # Kueue admitted the workload: the workload then holds its quota with no pod, and says so only in Events.
    made_here = {(Meta.of(o).namespace or namespace, Meta.of(o).name)
                 for o in objects if o.get("kind") == "ServiceAccount"}
    accounts = sorted({(js.meta.namespace or namespace, str(r.job.service_account))
                       for js in jobsets for r in js.replicated_jobs if r.job.service_account})
    for each_ns, account in accounts:
        if (each_ns, account) not in made_here and not kube.service_account_exists(each_ns, account):
            problems.append(f'ServiceAccount "{account}" does not exist in namespace "{each_ns}": the Job '
                            f"controller could create no pod; create it (`kubectl create serviceaccount {account} "
                            f"-n {each_ns}`; xpk's cluster create makes xpk-sa), or use a namespace that has it")
    labels = [js.meta.labels.get(KUEUE_QUEUE) for js in jobsets]
    queues = sorted({str(queue) for queue in labels if queue is not None})
    for queue in queues:
        found = kube.local_queue_exists(namespace, queue)
        if found is None:
            warnings.append(f'Kueue is not installed: the queue label "{queue}" is ignored and the JobSet starts '
                            "without admission control")
        elif not found:
            warnings.append(f'Kueue LocalQueue "{queue}" does not exist in namespace "{namespace}": the workload '
                            "will wait unadmitted until it is created")
        elif any(job.node_selector.get(QUEUED_LABEL) == "true" for job in _jobs(jobsets)):
            warnings += _flex_start_queue(kube, namespace, queue)
    if any(js.pathways for js in jobsets):
        if not kube.list_nodes(f"{NODE_POOL_LABEL}={CPU_NODE_POOL}", limit=1):
            problems.append(f"Pathways needs a CPU node pool named {CPU_NODE_POOL} (nodes labelled "
                            f"{NODE_POOL_LABEL}={CPU_NODE_POOL}) for its head: create it (xpk's cluster "
                            "create-pathways does), or use --no-pathways")
    if problems:
        raise ClusterError("\n".join(problems))
    return warnings



def _flex_start_queue(kube: Kube, namespace: str, queue: str) -> list[str]:
    """--flex-start asks Kueue for the capacity: without a ProvisioningRequest admission check on the queue's
    ClusterQueue nothing asks, and the pods wait for flex-start nodes that nobody makes (3 GETs at most)."""
    cq = LocalQueue.of(kube.get_kueue_object("localqueues", queue, namespace) or EMPTY).cluster_queue
    cluster_queue = kube.get_kueue_object("clusterqueues", cq) if cq else None
    if not cluster_queue:
        return []
    for name in ClusterQueue.of(cluster_queue).checks:
        check = kube.get_kueue_object("admissionchecks", str(name)) or EMPTY
        if AdmissionCheckObject.of(check).controller == PROVISIONING_CONTROLLER:
            return []
    return [f'--flex-start: ClusterQueue "{cq}" (of LocalQueue "{queue}") has no ProvisioningRequest admission '
            "check, so Kueue admits the workload without asking for capacity and its pods wait for flex-start "
            f"({QUEUED_LABEL}) nodes that nothing makes; use --queue with a LocalQueue whose ClusterQueue has "
            "one (xpk's cluster create --flex makes dws-prov), or drop --flex-start"]
