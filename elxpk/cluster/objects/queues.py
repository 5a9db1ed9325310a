"""Kueue's queues and admission checks as elxpk reads them (status --why, create's flex-start preflight): each
field read from the API's dict here only. Built once per object read (see meta.py); `of` takes the dict or the view.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from elxpk.cluster.objects.meta import Condition, Meta, View, conditions_of, items, part


@dataclass(frozen=True)
class LocalQueue(View):
    meta: Meta
    cluster_queue: str | None  # spec.clusterQueue
    pending: Any  # status.pendingWorkloads, as written (None when absent)
    raw: Mapping[str, Any] = field(repr=False, compare=False)

    @classmethod
    def read(cls, queue: Mapping[str, Any]) -> LocalQueue:
        return cls(Meta.of(queue), part(queue, "spec").get("clusterQueue"),
                   part(queue, "status").get("pendingWorkloads"), queue)


@dataclass(frozen=True)
class ClusterQueue(View):
    meta: Meta
    # The admission checks it names: spec.admissionChecksStrategy.admissionChecks[].name, then v1beta1's
    # spec.admissionChecks (a list of names).
    checks: tuple[Any, ...]
    conditions: tuple[Condition, ...]
    raw: Mapping[str, Any] = field(repr=False, compare=False)

    @classmethod
    def read(cls, queue: Mapping[str, Any]) -> ClusterQueue:
        spec = part(queue, "spec")
        strategy = tuple(c.get("name") for c in items(part(spec, "admissionChecksStrategy"), "admissionChecks"))
        return cls(Meta.of(queue), strategy + items(spec, "admissionChecks"), conditions_of(part(queue, "status")),
                   queue)


@dataclass(frozen=True)
class AdmissionCheckObject(View):
    """Kueue's AdmissionCheck object (a Workload's status names its checks: workloads.AdmissionCheck)."""
    meta: Meta
    controller: str | None  # spec.controllerName
    raw: Mapping[str, Any] = field(repr=False, compare=False)

    @classmethod
    def read(cls, check: Mapping[str, Any]) -> AdmissionCheckObject:
        return cls(Meta.of(check), part(check, "spec").get("controllerName"), check)
