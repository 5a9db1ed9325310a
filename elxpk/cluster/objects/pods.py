"""Pods, their containers, Events and Nodes as elxpk reads them: each field read from the API's dict here only.

Built once per object listed (see meta.py); `of` takes the dict or the view.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from elxpk.cluster.objects.meta import Condition, Meta, Ref, View, conditions_of, items, part, true_condition


@dataclass(frozen=True)
class Terminated:
    """A container's `terminated` state. exit_code stays as the API wrote it (callers differ on a bad one)."""
    exit_code: Any
    reason: str | None
    message: str | None
    finished: str | None  # finishedAt

    @classmethod
    def of(cls, state: Mapping[str, Any]) -> Terminated | None:
        term = state.get("terminated")
        if not term:
            return None
        return cls(term.get("exitCode"), term.get("reason"), term.get("message"), term.get("finishedAt"))


@dataclass(frozen=True)
class Waiting:
    reason: str | None
    message: str | None


@dataclass(frozen=True)
class ContainerStatus:
    name: str | None
    image: str | None
    restarts: int  # restartCount
    waiting: Waiting | None
    running_since: str | None  # state.running.startedAt: when the running process started
    terminated: Terminated | None  # the state now
    last_terminated: Terminated | None  # lastState: the run before the last restart

    @classmethod
    def of(cls, cs: Mapping[str, Any]) -> ContainerStatus:
        state = part(cs, "state")
        waiting = state.get("waiting") or None
        return cls(cs.get("name"), cs.get("image"), int(cs.get("restartCount") or 0),
                   None if waiting is None else Waiting(waiting.get("reason"), waiting.get("message")),
                   part(state, "running").get("startedAt"), Terminated.of(state), Terminated.of(part(cs, "lastState")))


@dataclass(frozen=True)
class Pod(View):
    meta: Meta
    node: str | None  # spec.nodeName
    node_selector: Mapping[str, str]
    tolerations: tuple[Mapping[str, Any], ...]
    limits: tuple[Mapping[str, Any], ...]  # each container's resources.limits
    container_names: tuple[str, ...]  # spec.containers[].name, in order
    phase: str | None
    reason: str | None  # status.reason: "Evicted" for the kubelet's node-pressure eviction
    message: str | None
    started: str | None  # status.startTime
    conditions: tuple[Condition, ...]
    containers: tuple[ContainerStatus, ...]
    init_containers: tuple[ContainerStatus, ...]
    raw: Mapping[str, Any] = field(repr=False, compare=False)

    @classmethod
    def read(cls, pod: Mapping[str, Any]) -> Pod:
        spec, status = part(pod, "spec"), part(pod, "status")
        return cls(Meta.of(pod), spec.get("nodeName"), part(spec, "nodeSelector"), items(spec, "tolerations"),
                   tuple(part(part(c, "resources"), "limits") for c in items(spec, "containers")),
                   tuple(c.get("name") for c in items(spec, "containers")), status.get("phase"),
                   status.get("reason"), status.get("message"), status.get("startTime"), conditions_of(status),
                   tuple(ContainerStatus.of(cs) for cs in items(status, "containerStatuses")),
                   tuple(ContainerStatus.of(cs) for cs in items(status, "initContainerStatuses")), pod)

    @property
    def disruption(self) -> Condition | None:
        """Its DisruptionTarget condition, when True: the pod is going for a reason outside the workload."""
        return true_condition(self.conditions, "DisruptionTarget")

    @property
    def done(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    @property
    def ready(self) -> bool:
        """Running with its Ready condition True."""
        return self.phase == "Running" and true_condition(self.conditions, "Ready") is not None


@dataclass(frozen=True)
class Event(View):
    meta: Meta
    type: str | None  # Normal or Warning
    reason: str | None
    message: str | None
    count: int  # 1 when absent
    involved: Ref  # involvedObject: what it is about
    host: str | None  # source.host: the node the kubelet that wrote it runs on
    last: str | None  # lastTimestamp
    first: str | None  # firstTimestamp
    event_time: str | None  # eventTime (events.k8s.io writers set only this)
    raw: Mapping[str, Any] = field(repr=False, compare=False)

    @classmethod
    def read(cls, event: Mapping[str, Any]) -> Event:
        return cls(Meta.of(event), event.get("type"), event.get("reason"), event.get("message"),
                   int(event.get("count") or 1), Ref.of(part(event, "involvedObject")),
                   part(event, "source").get("host"), event.get("lastTimestamp"), event.get("firstTimestamp"),
                   event.get("eventTime"), event)

    @property
    def time(self) -> str | None:
        """When it last happened: lastTimestamp, else eventTime, else firstTimestamp."""
        return self.last or self.event_time or self.first


@dataclass(frozen=True)
class Node(View):
    """A node as `status --why` reads it: its labels (accelerator, topology, capacity mode) and taints."""
    name: str | None
    labels: Mapping[str, str]
    taints: tuple[Mapping[str, Any], ...]

    @classmethod
    def read(cls, node: Mapping[str, Any]) -> Node:
        """From the API's Node, or from {"name", "labels", "taints"}: the shape `status --why`'s corpus keeps."""
        if "metadata" not in node:
            return cls(node.get("name"), part(node, "labels"), items(node, "taints"))
        meta = part(node, "metadata")
        return cls(meta.get("name"), part(meta, "labels"), items(part(node, "spec"), "taints"))
