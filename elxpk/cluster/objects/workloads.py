"""JobSets, their Jobs, Kueue Workloads and ProvisioningRequests as elxpk reads them, each field read here only.

Built once per object listed (see meta.py); `of` takes the dict or the view.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from elxpk.cluster.objects.labels import (
    JOB_INDEX,
    KUEUE_JOB_UID,
    REPLICATED_JOB,
    RESTART_ATTEMPT,
    is_pathways,
)
from elxpk.cluster.objects.meta import Condition, Meta, View, conditions_of, items, part, true_condition


@dataclass(frozen=True)
class JobSpec:
    """A Job's spec, or a replicatedJob's template of one."""
    parallelism: int  # 1 when absent
    completions: int  # parallelism when absent
    backoff_limit: int  # 6 when absent, as the Job API defaults it
    suspend: bool
    pod_spec: Mapping[str, Any]  # template.spec

    @classmethod
    def of(cls, spec: Mapping[str, Any]) -> JobSpec:
        parallelism = spec.get("parallelism", 1)
        return cls(int(parallelism), int(spec.get("completions", parallelism)), spec.get("backoffLimit", 6),
                   bool(spec.get("suspend")), part(part(spec, "template"), "spec"))

    @property
    def pods(self) -> int:
        """The pods it runs at once: min of parallelism and completions."""
        return min(self.parallelism, self.completions)

    @property
    def node_selector(self) -> Mapping[str, str]:
        return part(self.pod_spec, "nodeSelector")

    @property
    def priority_class(self) -> str | None:
        return self.pod_spec.get("priorityClassName")

    @property
    def service_account(self) -> str | None:
        return self.pod_spec.get("serviceAccountName")

    @property
    def containers(self) -> tuple[Mapping[str, Any], ...]:
        """The pod template's containers, as written."""
        return items(self.pod_spec, "containers")


@dataclass(frozen=True)
class ReplicatedJob:
    name: str | None
    replicas: int  # 1 when absent
    job: JobSpec  # template.spec

    @classmethod
    def of(cls, rjob: Mapping[str, Any]) -> ReplicatedJob:
        return cls(rjob.get("name"), int(rjob.get("replicas", 1) or 0), JobSpec.of(part(part(rjob, "template"), "spec")))


@dataclass(frozen=True)
class JobSet(View):
    meta: Meta
    suspend: bool
    replicated_jobs: tuple[ReplicatedJob, ...]
    max_restarts: int  # spec.failurePolicy.maxRestarts (0 when absent)
    conditions: tuple[Condition, ...]
    terminal_state: str | None
    restarts: int  # status.restarts: every restart, counted or not
    restarts_counted: int  # status.restartsCountTowardsMax: absent while 0 (omitempty)
    raw: Mapping[str, Any] = field(repr=False, compare=False)

    @classmethod
    def read(cls, jobset: Mapping[str, Any]) -> JobSet:
        spec, status = part(jobset, "spec"), part(jobset, "status")
        return cls(Meta.of(jobset), bool(spec.get("suspend")),
                   tuple(ReplicatedJob.of(r) for r in items(spec, "replicatedJobs")),
                   int(part(spec, "failurePolicy").get("maxRestarts") or 0), conditions_of(status),
                   status.get("terminalState"), int(status.get("restarts") or 0),
                   int(status.get("restartsCountTowardsMax") or 0), jobset)

    def replicated_job(self, name: str) -> ReplicatedJob | None:
        return next((r for r in self.replicated_jobs if r.name == name), None)

    @property
    def pathways(self) -> bool:
        return is_pathways(self.raw)

    @property
    def end(self) -> Condition | None:
        """Its Completed or Failed condition while True (the first listed): the JobSet has finished."""
        return next((c for c in self.conditions if c.true and c.type in ("Completed", "Failed")), None)


@dataclass(frozen=True)
class Job(View):
    meta: Meta
    spec: JobSpec
    active: int
    ready: int
    succeeded: int
    failed: int
    conditions: tuple[Condition, ...]
    raw: Mapping[str, Any] = field(repr=False, compare=False)

    @classmethod
    def read(cls, job: Mapping[str, Any]) -> Job:
        status = part(job, "status")
        return cls(Meta.of(job), JobSpec.of(part(job, "spec")), int(status.get("active") or 0),
                   int(status.get("ready") or 0), int(status.get("succeeded") or 0), int(status.get("failed") or 0),
                   conditions_of(status), job)

    @property
    def replicated_job(self) -> str | None:
        return self.meta.labels.get(REPLICATED_JOB)

    @property
    def index(self) -> str | None:
        """The job-index label: the slice it is (as written; None for none)."""
        return self.meta.labels.get(JOB_INDEX)

    @property
    def attempt(self) -> int:
        """The JobSet restart attempt it belongs to (0 without the label)."""
        return int(self.meta.labels.get(RESTART_ATTEMPT, 0))

    def true(self, kind: str) -> Condition | None:
        return true_condition(self.conditions, kind)


@dataclass(frozen=True)
class AdmissionCheck:
    name: str | None
    state: str | None  # Pending, Ready, Retry, Rejected
    message: str | None


@dataclass(frozen=True)
class Workload(View):
    """Kueue's Workload for a JobSet."""
    meta: Meta
    queue: str | None  # spec.queueName
    active: Any  # spec.active: False once Kueue deactivated it (absent: active)
    # v1beta2 names the class in spec.priorityClassRef.name, v1beta1 in spec.priorityClassName
    priority_class: str | None
    priority: Any  # spec.priority: the class's value, as written
    conditions: tuple[Condition, ...]
    cluster_queue: str  # status.admission.clusterQueue ("" before it has one)
    checks: tuple[AdmissionCheck, ...]  # status.admissionChecks
    raw: Mapping[str, Any] = field(repr=False, compare=False)

    @classmethod
    def read(cls, workload: Mapping[str, Any]) -> Workload:
        spec, status = part(workload, "spec"), part(workload, "status")
        return cls(Meta.of(workload), spec.get("queueName"), spec.get("active"),
                   part(spec, "priorityClassRef").get("name") or spec.get("priorityClassName"), spec.get("priority"),
                   conditions_of(status),
                   part(status, "admission").get("clusterQueue", ""),
                   tuple(AdmissionCheck(c.get("name"), c.get("state"), c.get("message"))
                         for c in items(status, "admissionChecks")), workload)

    def of_jobset(self, uid: str | None) -> bool:
        """Whether Kueue made it for the JobSet of `uid` (its job-uid label)."""
        return self.meta.labels.get(KUEUE_JOB_UID) == uid

    def true(self, kind: str) -> Condition | None:
        return true_condition(self.conditions, kind)


@dataclass(frozen=True)
class ProvisioningRequest(View):
    """The capacity request Kueue's ProvisioningRequest admission check makes (flex-start)."""
    meta: Meta
    provisioning_class: str  # spec.provisioningClassName
    conditions: tuple[Condition, ...]
    raw: Mapping[str, Any] = field(repr=False, compare=False)

    @classmethod
    def read(cls, request: Mapping[str, Any]) -> ProvisioningRequest:
        return cls(Meta.of(request), part(request, "spec").get("provisioningClassName", ""),
                   conditions_of(part(request, "status")), request)

    def true(self, kind: str) -> Condition | None:
        return true_condition(self.conditions, kind)
