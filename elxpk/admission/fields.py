"""Rules the API server applies to fields by their CRD type, driven by elxpk/crds/jobset-index.json:

- rule 15, list-type maps and sets (kubernetes/kubernetes
  `staging/src/k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype/validation.go`
  `ValidateListSetsAndMaps`): the items of an `x-kubernetes-list-type: map` list are unique by their
  `x-kubernetes-list-map-keys` (defaults applied first, e.g. a port's protocol TCP), those of a `set` list
  unique as values. This is what refuses two replicatedJobs, containers, env vars or volumes of one name.
- rule 17, integers typed `format: int32` / `int64`: the API server's decoder refuses an overflow.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any

from elxpk.admission.schema import jobset_index
from elxpk.admission.violation import INT_RANGES, Violation, join

_STEP = re.compile(r"\[\]|\{\}|[^.\[\]{}]+")


def _steps(pattern: str) -> list[str]:
    """`spec.replicatedJobs[].replicas` -> ['spec', 'replicatedJobs', '[]', 'replicas']."""
    return _STEP.findall(pattern)


@functools.cache
def _trie() -> dict:
    """The index as one tree of steps, so that one walk of the object visits every indexed field; a node's
    "" entry lists what applies there: ("int", format), ("map", keys, defaults) or ("set",)."""
    index = jobset_index()
    root: dict = {}

    def node_for(pattern: str) -> dict:
        node = root
        for step in _steps(pattern):
            node = node.setdefault(step, {})
        return node

    for fmt, patterns in index["int"].items():
        for pattern in patterns:
            node_for(pattern).setdefault("", []).append(("int", fmt))
    for pattern, spec in index["listMaps"].items():
        node_for(pattern).setdefault("", []).append(("map", spec["keys"], spec["defaults"]))
    for pattern in index["listSets"]:
        node_for(pattern).setdefault("", []).append(("set",))
    return root


def _visit(value: Any, node: dict, path: str, out: list[tuple[str, Any, tuple]]) -> None:
    for rule in node.get("", ()):
        out.append((path, value, rule))
    if isinstance(value, dict):
        for key, child in node.items():
            if key == "{}":
                for name, item in value.items():
                    _visit(item, child, f"{path}[{name}]", out)
            elif key not in ("", "[]") and key in value:
                _visit(value[key], child, join(path, key), out)
    elif isinstance(value, list) and "[]" in node:
        for i, item in enumerate(value):
            _visit(item, node["[]"], join(path, i), out)


def indexed_fields(obj: dict) -> list[tuple[str, Any, tuple]]:
    """(field path, value, rule) for every field of `obj` the index has a rule for."""
    out: list[tuple[str, Any, tuple]] = []
    _visit(obj, _trie(), "", out)
    return out


def integer_problems(obj: dict, fields: list[tuple[str, Any, tuple]] | None = None) -> list[Violation]:
    """Rule 17: every int32/int64 field of the JobSet within its range."""
    found = []
    for path, value, rule in indexed_fields(obj) if fields is None else fields:
        if rule[0] != "int" or not isinstance(value, int) or isinstance(value, bool):
            continue
        low, high, message = INT_RANGES[rule[1]]
        if not low <= value <= high:
            found.append(Violation(path, message(value)))
    return found


def _key(item: Any, keys: list[str], defaults: dict[str, Any]) -> str | None:
    if not isinstance(item, dict):
        return None
    return json.dumps({k: item.get(k, defaults.get(k)) for k in keys}, sort_keys=True, default=str)


def list_problems(obj: dict, fields: list[tuple[str, Any, tuple]] | None = None) -> list[Violation]:
    """Rule 15: `ValidateListSetsAndMaps` over every list-type map and set of the JobSet."""
    found = []
    for path, items, rule in indexed_fields(obj) if fields is None else fields:
        if rule[0] not in ("map", "set") or not isinstance(items, list):
            continue
        seen: set[str] = set()
        for i, item in enumerate(items):
            key = _key(item, rule[1], rule[2]) if rule[0] == "map" else json.dumps(item, sort_keys=True, default=str)
            if key is None:
                continue
            if key in seen:
                found.append(Violation(join(path, i), f"Duplicate value: {key}"))
            seen.add(key)
    return found
