"""The names JobSet derives from a workload name, and the limit each shape puts on that name.

JobSet builds every child name from the JobSet name (kubernetes-sigs/jobset at 08dfbdf):
- Job `<jobset>-<replicatedJob>-<jobIndex>` (`pkg/util/placement/placement.go` `GenJobName`), a DNS-1035
  label of at most 63 characters;
- pod `<jobset>-<replicatedJob>-<jobIndex>-<podIndex>` (`GenPodName`) plus the Job controller's 5 random
  characters `-xxxxx`, at most 63 (`pkg/webhooks/jobset_webhook.go` `ValidateCreate`);
- the coordinator label value `<jobset>-<replicatedJob>-<jobIndex>-<podIndex>.<subdomain>`
  (`pkg/controllers/jobset_controller.go` `CoordinatorEndpoint`, checked by the webhook's
  `validateCoordinatorLabelValue`), where the subdomain defaults to the JobSet name (`GetSubdomain`).

With the default subdomain a Pathways workload name could have at most 22 characters
(2 x name + 19 <= 63). elxpk lifts that with a short, deterministic `spec.network.subdomain` for longer
names, as the JobSet maintainers advise (kubernetes-sigs/jobset#1056): the head's address is read from the
coordinator label by every container (`PATHWAYS_HEAD`), so it follows the subdomain by itself. What remains
is the pod-name limit, computed here for each shape.
"""

from __future__ import annotations

from collections.abc import Mapping

from elxpk.admission.identifiers import LABEL_VALUE_MAX
from elxpk.admission.violation import as_int
from elxpk.units import INT32, INT64
from elxpk_contract.spelling import said

MAX_INT32, MAX_INT64 = INT32[1], INT64[1]
POD_SUFFIX = "-xxxxx"  # the Job controller's generateName suffix: 5 random characters
HEAD_JOB = "pathways-head"
WORKER_JOB = "worker"
SLICE_JOB = "slice-job"
# The containers of the Pathways head pod besides the user's (elxpk/create/templates/pathways.yaml.j2).
PATHWAYS_HEAD_CONTAINERS = ("pathways-proxy", "pathways-rm")


def gen_job_name(jobset: str, replicated_job: str, job_index: int) -> str:
    """`placement.GenJobName`."""
    return f"{jobset}-{replicated_job}-{job_index}"


def gen_pod_name(jobset: str, replicated_job: str, job_index: int, pod_index: int) -> str:
    """`placement.GenPodName`."""
    return f"{jobset}-{replicated_job}-{job_index}-{pod_index}"


def coordinator_endpoint(jobset: str, replicated_job: str, job_index: int, pod_index: int,
                         subdomain: str | None) -> str:
    """`controllers.CoordinatorEndpoint` with `GetSubdomain`: an empty subdomain means the JobSet name."""
    return f"{gen_pod_name(jobset, replicated_job, job_index, pod_index)}.{subdomain or jobset}"


def pathways_subdomain(workload: str) -> str | None:
    """The `spec.network.subdomain` a Pathways JobSet named `workload` needs: None while the default (the
    JobSet name) keeps the coordinator label within 63 characters, so those manifests do not change.

    Otherwise the longest label that still fits: a prefix of the name, '-', and 6 characters of a hash of
    the whole name (so two long names with one prefix still get two headless Services), or, when fewer than
    10 characters are left, the name's first letter and the hash. Always a DNS-1035 label.
    """
    head = coordinator_endpoint(workload, HEAD_JOB, 0, 0, None)
    if len(head) <= LABEL_VALUE_MAX:
        return None

    import base64  # lazy: only a name this long needs the hash
    import hashlib  # lazy: its OpenSSL load was ~3 ms of every `workload create --dry-run`

    room = LABEL_VALUE_MAX - len(coordinator_endpoint(workload, HEAD_JOB, 0, 0, "x")) + 1
    digest = base64.b32encode(hashlib.sha256(workload.encode("utf-8")).digest()).decode("ascii").lower()
    digest = digest.rstrip("=")
    if room >= 10:
        return f"{workload[:room - 7].rstrip('-')}-{digest[:6]}"
    return workload[:1] + digest[:max(room - 1, 1)]


def _shape(pathways: bool, num_slices: int, vms_per_slice: int) -> list[tuple[str, int, int]]:
    """(replicatedJob, replicas, completions) of each replicated Job elxpk renders."""
    if pathways:
        return [(HEAD_JOB, 1, 1), (WORKER_JOB, num_slices, vms_per_slice)]
    return [(SLICE_JOB, num_slices, vms_per_slice)]


def workload_name_limit(*, pathways: bool, num_slices: int, vms_per_slice: int) -> tuple[int, str]:
    """The longest workload name this shape admits, and the derived name that sets the limit (with
    `<name>` for the workload name)."""
    limit, culprit = LABEL_VALUE_MAX, "the label xpk.google.com/workload=<name>"
    for job, replicas, completions in _shape(pathways, num_slices, vms_per_slice):
        pod = gen_pod_name("<name>", job, replicas - 1, completions - 1) + POD_SUFFIX
        room = LABEL_VALUE_MAX - (len(pod) - len("<name>"))
        if room < limit:
            limit, culprit = room, f"pod {pod}"
    return limit, culprit


def workload_name_problem(name: str, *, pathways: bool, num_slices: int, vms_per_slice: int) -> str | None:
    """One line naming --workload and the exact limit for this shape, or None when the name fits."""
    limit, culprit = workload_name_limit(pathways=pathways, num_slices=num_slices, vms_per_slice=vms_per_slice)
    if len(name) <= limit:
        return None
    shape = ("a Pathways workload" if pathways else
             f"a --no-pathways workload of {num_slices} slice(s) x {vms_per_slice} VM(s)")
    return (f"{said('workload')} {name!r} has {len(name)} characters: use at most {limit} for {shape}: JobSet derives "
            f"{culprit} (63 max)")


def container_name_problem(docker_name: str, *, pathways: bool, headless: bool) -> str | None:
    """Two containers of one pod must not share a name (`validateContainers` in kubernetes/kubernetes
    `pkg/apis/core/validation/validation.go`): the JobSet is admitted, but its Jobs are never created."""
    if pathways and not headless and docker_name in PATHWAYS_HEAD_CONTAINERS:
        return (f"--docker-name {docker_name!r}: the Pathways head pod already has a container of that name "
                f"({', '.join(PATHWAYS_HEAD_CONTAINERS)}); choose another, e.g. --docker-name jax-tpu")
    return None


def flag_problems(fields: Mapping[str, object]) -> list[str]:
    """What `workload create` must refuse (exit 2) because JobSet or the API server would: the workload
    name for this shape, container-name collisions, and the integers the CRD stores as int32.

    `fields` are the WorkloadSpec fields checked so far (elxpk/create/checks.py); a value that already
    failed its own check is None or its default, and whatever depends on it is skipped.
    """
    problems: list[str] = []
    pathways, headless = bool(fields.get("pathways", True)), bool(fields.get("headless", False))
    tpu = fields.get("tpu")
    vms = as_int(getattr(tpu, "vms_per_slice", None))
    if fields.get("gpu") is not None:  # a GPU workload: one node group of --num-nodes pods
        vms = as_int(fields.get("num_nodes"))
    slices = as_int(fields.get("num_slices"))
    name = fields.get("workload")
    if isinstance(name, str) and name and vms and slices:
        problem = workload_name_problem(name, pathways=pathways, num_slices=slices, vms_per_slice=vms)
        if problem:
            problems.append(problem)
    elif isinstance(name, str) and len(name) > LABEL_VALUE_MAX:  # the shape is unknown: the bound of every shape
        problems.append(f"{said('workload')} {name!r} has {len(name)} characters: use at most {LABEL_VALUE_MAX} (it is a "
                        f"label value), and fewer for most shapes")
    docker_name = fields.get("docker_name")
    if isinstance(docker_name, str):
        problem = container_name_problem(docker_name, pathways=pathways, headless=headless)
        if problem:
            problems.append(problem)
    problems += _int32_problems(fields, vms, slices)
    return problems


def _int32_problems(fields: Mapping[str, object], vms: int | None, slices: int | None) -> list[str]:
    """Fields typed `format: int32` in the JobSet CRD (rule 17) that a flag sets, directly or multiplied."""
    problems = []
    why = "JobSet stores it as a 32-bit integer"
    for key, field in (("max_restarts", "failurePolicy.maxRestarts"),
                       ("ttl_seconds_after_finished", "ttlSecondsAfterFinished"), ("num_slices", "replicas")):
        value = as_int(fields.get(key))
        if value is not None and value > MAX_INT32:
            problems.append(f"{said(key)} {value}: must be at most {MAX_INT32} ({field}: {why})")
    if vms and slices and slices <= MAX_INT32 and slices * vms > MAX_INT32:
        problems.append(f"--num-slices {slices}: at most {MAX_INT32 // vms} slices of {vms} VMs (JobSet: replicas x "
                        f"parallelism must not exceed {MAX_INT32})")
    return problems  # the worker backoffLimit's bound: elxpk/create/failure_policy.py backoff_limit_problem
