"""The object store behind the fake API server: resources, label selectors, resource versions, events.

Kept apart from the HTTP layer so the scripted controller can write objects the way a real
controller's writes would appear to clients (new resourceVersion, a watch event) without HTTP.
"""

from __future__ import annotations

import copy
import functools
import re
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tests.support.crd import strict_crd_schema


@dataclass(frozen=True)
class Resource:
    group: str  # "" for the core group
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    # Only served (discovery and paths) while this returns True: CRD-backed groups appear when installed.
    served: Callable[[Store], bool] | None = None

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural


JOBSET_CRD = "jobsets.jobset.x-k8s.io"


def _jobset_served(store: Store) -> bool:
    return store.get(("apiextensions.k8s.io", "customresourcedefinitions"), "", JOBSET_CRD) is not None


def _kueue_served(store: Store) -> bool:
    return store.kueue_installed


RESOURCES: tuple[Resource, ...] = (
    Resource("", "v1", "pods", "Pod"),
    Resource("", "v1", "nodes", "Node", namespaced=False),
    Resource("", "v1", "configmaps", "ConfigMap"),
    Resource("", "v1", "services", "Service"),
    Resource("", "v1", "namespaces", "Namespace", namespaced=False),
    Resource("", "v1", "events", "Event"),
    Resource("", "v1", "serviceaccounts", "ServiceAccount"),
    Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget"),
    Resource("batch", "v1", "jobs", "Job"),
    Resource("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", namespaced=False),
    Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False),
    Resource("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet", served=_jobset_served),
    Resource("kueue.x-k8s.io", "v1beta2", "localqueues", "LocalQueue", served=_kueue_served),
    Resource("kueue.x-k8s.io", "v1beta2", "workloads", "Workload", served=_kueue_served),
)


def utc_iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- label selectors (the apimachinery grammar: =, ==, !=, in, notin, exists, !exists) ------------------

_SET_TERM = re.compile(r"^\s*([^\s!=]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")


def _split_terms(selector: str) -> list[str]:
    terms, depth, current = [], 0, ""
    for ch in selector:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            terms.append(current)
            current = ""
        else:
            current += ch
    if current.strip():
        terms.append(current)
    return terms


def parse_selector(selector: str | None) -> Callable[[dict[str, str]], bool]:
    """A predicate on a label map; raises ValueError on a malformed selector (the server answers 400)."""
    if not selector:
        return lambda labels: True
    checks: list[Callable[[dict[str, str]], bool]] = []
    for raw in _split_terms(selector):
        term = raw.strip()
        if match := _SET_TERM.match(term):
            key, op, values = match.group(1), match.group(2), {v.strip() for v in match.group(3).split(",")}
            if op == "in":
                checks.append(lambda lb, k=key, vs=values: lb.get(k) in vs)
            else:
                checks.append(lambda lb, k=key, vs=values: lb.get(k) not in vs)
        elif "!=" in term:
            key, value = (s.strip() for s in term.split("!=", 1))
            checks.append(lambda lb, k=key, v=value: lb.get(k) != v)
        elif "=" in term:
            key, value = (s.strip() for s in term.replace("==", "=").split("=", 1))
            checks.append(lambda lb, k=key, v=value: lb.get(k) == v)
        elif term.startswith("!"):
            checks.append(lambda lb, k=term[1:].strip(): k not in lb)
        elif re.fullmatch(r"[A-Za-z0-9./_-]+", term):
            checks.append(lambda lb, k=term: k in lb)
        else:
            raise ValueError(f"unable to parse requirement: {term!r}")
    return lambda labels: all(check(labels) for check in checks)


def field_getter(obj: dict, path: str) -> Any:
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def parse_field_selector(selector: str | None) -> Callable[[dict], bool]:
    if not selector:
        return lambda obj: True
    checks = []
    for term in selector.split(","):
        negate = "!=" in term
        key, value = (s.strip() for s in term.replace("==", "=").replace("!=", "=").split("=", 1))
        checks.append(lambda o, k=key, v=value, n=negate: (str(field_getter(o, k) or "") == v) != n)
    return lambda obj: all(check(obj) for check in checks)


# --- the store ------------------------------------------------------------------------------------------

Key = tuple[str, str]  # (group, plural)


@dataclass
class Event:
    rv: int
    key: Key
    type: str  # ADDED, MODIFIED, DELETED
    obj: dict


@dataclass
class Store:
    clock: Callable[[], float]
    kueue_installed: bool = True
    objects: dict[Key, dict[tuple[str, str], dict]] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    logs: dict[tuple[str, str, str], list[str]] = field(default_factory=dict)
    closed_logs: set[tuple[str, str, str]] = field(default_factory=set)
    # (namespace, pod, container) -> the log of the last terminated container (`previous=true`)
    previous_logs: dict[tuple[str, str, str], list[str]] = field(default_factory=dict)
    # exec: (namespace, pod, container, command) -> (stdout, exit code); a test's script plays the container
    on_exec: Callable[[str, str, str, list[str]], tuple[str, int | None]] | None = None
    execs: list[tuple[str, str, str, list[str]]] = field(default_factory=list)
    # eviction: called with the evicted pod (a controller marks it DisruptionTarget and replaces it)
    on_evict: Callable[[dict], None] | None = None
    resource_version: int = 100
    lock: threading.Condition = field(default_factory=threading.Condition)

    def resource(self, group: str, plural: str) -> Resource | None:
        for res in RESOURCES:
            if res.group == group and res.plural == plural:
                return res
        return None

    def served(self, res: Resource) -> bool:
        return res.served is None or res.served(self)

    def _bump(self) -> int:
        self.resource_version += 1
        return self.resource_version

    def _emit(self, key: Key, kind: str, obj: dict) -> None:
        self.events.append(Event(self.resource_version, key, kind, copy.deepcopy(obj)))
        del self.events[:-20000]  # bounded history, like etcd compaction
        self.lock.notify_all()

    def get(self, key: Key, namespace: str, name: str) -> dict | None:
        with self.lock:
            obj = self.objects.get(key, {}).get((namespace, name))
            return copy.deepcopy(obj) if obj is not None else None

    def list(self, key: Key, namespace: str | None, label_selector: str | None = None,
             field_selector: str | None = None, *, copies: bool = True) -> list[dict]:
        """Matching objects; `copies=False` returns the stored dicts (only while holding `lock`)."""
        labels_ok = parse_selector(label_selector)
        fields_ok = parse_field_selector(field_selector)
        with self.lock:
            items = [
                obj for (ns, _), obj in sorted(self.objects.get(key, {}).items())
                if (namespace is None or ns == namespace)
                and labels_ok(obj["metadata"].get("labels") or {}) and fields_ok(obj)
            ]
            return [copy.deepcopy(o) for o in items] if copies else items

    def create(self, key: Key, obj: dict, *, dry_run: bool = False) -> dict:
        """Fill server-set metadata and store; raises KeyError if the name is taken."""
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        res = self.resource(*key)
        namespace = meta.get("namespace", "") if res and res.namespaced else ""
        with self.lock:
            bucket = self.objects.setdefault(key, {})
            if (namespace, meta["name"]) in bucket:
                raise KeyError(meta["name"])
            meta.setdefault("uid", str(uuid.uuid4()))
            meta.setdefault("creationTimestamp", utc_iso(self.clock()))
            meta.setdefault("generation", 1)
            if res:
                obj.setdefault("apiVersion", res.group_version)
                obj.setdefault("kind", res.kind)
            if dry_run:
                meta["resourceVersion"] = str(self.resource_version)
                return obj
            meta["resourceVersion"] = str(self._bump())
            bucket[(namespace, meta["name"])] = obj
            self._emit(key, "ADDED", obj)
            return copy.deepcopy(obj)

    def put(self, key: Key, obj: dict) -> dict:
        """Create or replace (a controller's write); keeps uid and creationTimestamp of an existing object."""
        obj = copy.deepcopy(obj)
        meta = obj["metadata"]
        res = self.resource(*key)
        namespace = meta.get("namespace", "") if res and res.namespaced else ""
        with self.lock:  # a re-entrant lock: create() below takes it again
            bucket = self.objects.setdefault(key, {})
            old = bucket.get((namespace, meta["name"]))
            if old is None:
                return self.create(key, obj)
            meta["uid"] = old["metadata"]["uid"]
            meta["creationTimestamp"] = old["metadata"]["creationTimestamp"]
            meta["resourceVersion"] = str(self._bump())
            bucket[(namespace, meta["name"])] = obj
            self._emit(key, "MODIFIED", obj)
            return copy.deepcopy(obj)

    def delete(self, key: Key, namespace: str, name: str, *, dry_run: bool = False) -> dict | None:
        """Remove an object and, like the garbage collector, everything it owns (transitively)."""
        with self.lock:
            bucket = self.objects.get(key, {})
            obj = bucket.get((namespace, name))
            if obj is None or dry_run:
                return copy.deepcopy(obj) if obj is not None else None
            del bucket[(namespace, name)]
            self._bump()
            self._emit(key, "DELETED", obj)
            self._collect_orphans(obj["metadata"]["uid"])
            return copy.deepcopy(obj)

    def _collect_orphans(self, owner_uid: str) -> None:
        for key, bucket in self.objects.items():
            for (ns, name), obj in list(bucket.items()):
                owners = obj["metadata"].get("ownerReferences") or []
                if any(ref.get("uid") == owner_uid for ref in owners):
                    del bucket[(ns, name)]
                    self._bump()
                    self._emit(key, "DELETED", obj)
                    self._collect_orphans(obj["metadata"]["uid"])

    def events_after(self, rv: int) -> list[Event]:
        with self.lock:
            return [e for e in self.events if e.rv > rv]

    def append_log(self, namespace: str, pod: str, container: str, *lines: str) -> None:
        with self.lock:
            self.logs.setdefault((namespace, pod, container), []).extend(lines)
            self.lock.notify_all()

    def restart_log(self, namespace: str, pod: str, container: str) -> None:
        """The container restarted: its log so far becomes the previous container's, a new one starts."""
        with self.lock:
            key = (namespace, pod, container)
            self.previous_logs[key] = self.logs.pop(key, [])
            self.lock.notify_all()

    def close_log(self, namespace: str, pod: str, container: str) -> None:
        with self.lock:
            self.closed_logs.add((namespace, pod, container))
            self.lock.notify_all()


@functools.lru_cache(maxsize=4)  # parsing the 0.8 MB CRD takes a while: once per process
def load_crd_validator(crd_file: Path) -> Callable[[dict], list[str]]:
    """jsonschema over the CRD's openAPIV3Schema, made strict (unknown fields rejected, as the server does)."""
    import jsonschema

    schema = copy.deepcopy(strict_crd_schema(crd_file))
    # metadata is validated by the server's ObjectMeta rules, not the CRD schema.
    schema["properties"]["metadata"] = {"type": "object"}
    validator = jsonschema.Draft7Validator(schema)

    def validate(obj: dict) -> list[str]:
        errors = []
        for err in sorted(validator.iter_errors(obj), key=lambda e: list(e.absolute_path)):
            path = ".".join(str(p) for p in err.absolute_path) or "<root>"
            errors.append(f"{path}: {err.message}")
        return errors

    return validate
