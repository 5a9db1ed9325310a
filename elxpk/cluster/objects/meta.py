"""What every object the API answers carries: its metadata and its status conditions, read in one place.

The API answers plain JSON; a field that is absent, null or empty reads the same here (an empty mapping, an
empty tuple, "" or None), so the modules above never write `.get("x") or {}` chains, and what a field means
is decided once. The views are read-only and built once per object listed (`of` returns a view unchanged,
so a function handed either the dict or its view builds it at most once). `raw` keeps the answer itself for
what elxpk passes on whole (JSON output, an object handed back to the API).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from elxpk.cluster.objects.labels import parse_time

EMPTY: Mapping[str, Any] = {}


def part(obj: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """obj[key] as a mapping: absent or null is empty."""
    return obj.get(key) or EMPTY


def items(obj: Mapping[str, Any], key: str) -> tuple[Any, ...]:
    """obj[key] as a tuple: absent or null is empty."""
    return tuple(obj.get(key) or ())


V = TypeVar("V", bound="View")


class View:
    """A read-only view of one object: `of` reads the API's dict (`read`), or returns a view as it is."""

    @classmethod
    def of(cls: type[V], obj: Mapping[str, Any] | V) -> V:
        if isinstance(obj, cls):
            return obj
        return cls.read(cast("Mapping[str, Any]", obj))

    @classmethod
    def read(cls: type[V], obj: Mapping[str, Any]) -> V:
        raise NotImplementedError


@dataclass(frozen=True)
class Ref:
    """Another object named by this one: an owner (ownerReferences), or what an Event is about (involvedObject)."""
    kind: str | None
    name: str | None
    uid: str | None

    @classmethod
    def of(cls, ref: Mapping[str, Any]) -> Ref:
        return cls(ref.get("kind"), ref.get("name"), ref.get("uid"))


@dataclass(frozen=True)
class Meta:
    """metadata: names, labels, owners and the times the API server keeps."""
    name: str | None
    namespace: str | None
    uid: str | None
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    owners: tuple[Ref, ...]
    created: str | None  # creationTimestamp, RFC 3339
    deletion: str | None  # deletionTimestamp: set once a delete is under way
    grace_s: float  # deletionGracePeriodSeconds (0 when absent)
    version: str | None  # resourceVersion: where a watch resumes from

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> Meta:
        meta = part(obj, "metadata")
        return cls(meta.get("name"), meta.get("namespace"), meta.get("uid"), part(meta, "labels"),
                   part(meta, "annotations"),
                   tuple(map(Ref.of, items(meta, "ownerReferences"))),
                   meta.get("creationTimestamp"), meta.get("deletionTimestamp"),
                   float(meta.get("deletionGracePeriodSeconds") or 0), meta.get("resourceVersion"))

    @property
    def deleting(self) -> bool:
        return bool(self.deletion)

    def owned_by(self, uid: str | None) -> bool:
        return any(o.uid == uid for o in self.owners)


@dataclass(frozen=True)
class Condition(View):
    """One of status.conditions (Kubernetes' own shape, the same for every kind)."""
    type: str | None
    status: str | None
    reason: str | None
    message: str | None
    time: str | None  # lastTransitionTime

    @classmethod
    def read(cls, c: Mapping[str, Any]) -> Condition:
        return cls(c.get("type"), c.get("status"), c.get("reason"), c.get("message"), c.get("lastTransitionTime"))

    @property
    def true(self) -> bool:
        return self.status == "True"

    @property
    def at(self) -> float | None:
        return parse_time(self.time)


def conditions_of(status: Mapping[str, Any]) -> tuple[Condition, ...]:
    return tuple(map(Condition.of, items(status, "conditions")))


def true_condition(conditions: Iterable[Condition], kind: str) -> Condition | None:
    """The condition `kind` when its status is True, else None."""
    return next((c for c in conditions if c.type == kind and c.true), None)
