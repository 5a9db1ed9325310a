"""Rules the API server applies to fields by their CRD type, driven by elxpk/crds/jobset-index.json:

- rule 15, list-type maps and sets (kubernetes/kubernetes
  `staging/src/k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype/validation.go`
  `ValidateListSetsAndMaps`): the items of an `x-kubernetes-list-type: map` list are unique by their
  `x-kubernetes-list-map-keys` (defaults applied first, e.g. a port's protocol TCP), those of a `set` list
  unique as values. This is what refuses two replicatedJobs, containers, env vars or volumes of one name.
- rule 17, integers typed `format: int32` / `int64`: the API server's decoder refuses an overflow.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from elxpk.admission.schema import jobset_index
from elxpk.admission.violation import INT_RANGES, Violation, join

_STEP = re.compile(r"\[\]|\{\}|[^.\[\]{}]+")


def _steps(pattern: str) -> list[str]:
    """`spec.replicatedJobs[].replicas` -> ['spec', 'replicatedJobs', '[]', 'replicas']."""
    return _STEP.findall(pattern)


def walk(obj: Any, pattern: str) -> Iterator[tuple[str, Any]]:
    """Every (field path, value) of `obj` matching an index pattern; missing or mistyped parts yield nothing."""
    nodes: list[tuple[str, Any]] = [("", obj)]
    for step in _steps(pattern):
        following: list[tuple[str, Any]] = []
        for path, node in nodes:
            if step == "[]" and isinstance(node, list):
                following += [(join(path, i), item) for i, item in enumerate(node)]
            elif step == "{}" and isinstance(node, dict):
                following += [(f"{path}[{key}]", value) for key, value in node.items()]
            elif isinstance(node, dict) and step in node:
                following.append((join(path, step), node[step]))
        nodes = following
    return iter(nodes)


def integer_problems(obj: dict) -> list[Violation]:
    """Rule 17: every int32/int64 field of the JobSet within its range."""
    found = []
    for fmt, patterns in jobset_index()["int"].items():
        low, high, message = INT_RANGES[fmt]
        for pattern in patterns:
            for path, value in walk(obj, pattern):
                if isinstance(value, int) and not isinstance(value, bool) and not low <= value <= high:
                    found.append(Violation(path, message(value)))
    return found


def _key(item: Any, keys: list[str], defaults: dict[str, Any]) -> str | None:
    if not isinstance(item, dict):
        return None
    return json.dumps({k: item.get(k, defaults.get(k)) for k in keys}, sort_keys=True, default=str)


def list_problems(obj: dict) -> list[Violation]:
    """Rule 15: `ValidateListSetsAndMaps` over every list-type map and set of the JobSet."""
    found = []
    index = jobset_index()
    for pattern, spec in index["listMaps"].items():
        for path, items in walk(obj, pattern):
            if not isinstance(items, list):
                continue
            seen: set[str] = set()
            for i, item in enumerate(items):
                key = _key(item, spec["keys"], spec["defaults"])
                if key is None:
                    continue
                if key in seen:
                    found.append(Violation(join(path, i), f"Duplicate value: {key}"))
                seen.add(key)
    for pattern in index["listSets"]:
        for path, items in walk(obj, pattern):
            if not isinstance(items, list):
                continue
            seen_values: set[str] = set()
            for i, item in enumerate(items):
                key = json.dumps(item, sort_keys=True, default=str)
                if key in seen_values:
                    found.append(Violation(join(path, i), f"Duplicate value: {key}"))
                seen_values.add(key)
    return found
