"""The vendored CRDs (elxpk/crds/), their schemas made strict, and the structural check against them.

"Strict": every object schema that lists properties and does not preserve unknown fields gets
`additionalProperties: false`, so a typo'd or misplaced field fails instead of being silently pruned, as
the API server's strict field validation (`fieldValidation=Strict`) would do. `format: int32` and
`int64` are enforced: a JSON-schema validator ignores `format` unless told to check it, while the API
server's decoder refuses the overflow.

Imports jsonschema lazily: `workload create --dry-run` never loads this module's heavy half.
"""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path
from typing import Any

from elxpk.admission.violation import INT_RANGES, Violation, join

JOBSET_API = "jobset.x-k8s.io/v1alpha2"
PATHWAYS_API = "pathways-job.pathways.domain/v1"
# (apiVersion, kind) -> (CRD file, served version)
CRDS = {
    (JOBSET_API, "JobSet"): ("jobset.x-k8s.io_jobsets.yaml", "v1alpha2"),
    (PATHWAYS_API, "PathwaysJob"): ("pathways-job.pathways.domain_pathwaysjobs.yaml", "v1"),
}
JOBSET_INDEX = "jobset-index.json"


def crds_dir() -> Path:
    """The CRDs shipped in the package (elxpk/crds, in the wheel and in a checkout alike)."""
    from importlib.resources import (
        files,  # lazy: keeps importlib.resources, importlib.resources._adapters ... off `workload create --dry-run`
    )

    return Path(str(files("elxpk").joinpath("crds")))


def strictify(schema: Any) -> Any:
    """A copy of an OpenAPI v3 schema that forbids unknown fields wherever the API server would prune them."""
    schema = copy.deepcopy(schema)

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if (
                "properties" in node
                and not node.get("x-kubernetes-preserve-unknown-fields")
                and "additionalProperties" not in node
            ):
                node["additionalProperties"] = False
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    return schema


@functools.lru_cache(maxsize=4)  # parsing a 0.8 MB CRD takes a while: once per process
def served_schema(crd_file: Path, version: str) -> dict:
    """The openAPIV3Schema of one served version of a CRD file, as written. Callers must not mutate it."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with open(crd_file, encoding="utf-8") as handle:
        crd = yaml.load(handle, Loader=loader)
    served = next(v for v in crd["spec"]["versions"] if v["name"] == version)
    return served["schema"]["openAPIV3Schema"]


@functools.lru_cache(maxsize=4)
def strict_crd_schema(crd_file: Path, version: str = "v1alpha2") -> dict:
    """The strict openAPIV3Schema of one version of a CRD file. Callers must not mutate it: copy first."""
    return strictify(served_schema(crd_file, version))


def derive_index(schema: dict) -> dict:
    """What the admission rules need from the JobSet schema, without parsing it: the paths of integer
    fields with a `format`, and of list-type map and set lists (with their keys and the keys' defaults).
    Paths are dotted, `[]` for each list item and `{}` for each value of a map. `status` is left out: the
    API server drops it from a create request (the CRD has a status subresource)."""
    ints: dict[str, list[str]] = {"int32": [], "int64": []}
    maps: dict[str, dict] = {}
    sets: list[str] = []

    def walk(node: Any, path: str) -> None:
        if not isinstance(node, dict):
            return
        if node.get("type") == "integer" and node.get("format") in ints:
            ints[node["format"]].append(path)
        list_type = node.get("x-kubernetes-list-type")
        if list_type == "map":
            props = node.get("items", {}).get("properties", {})
            keys = list(node.get("x-kubernetes-list-map-keys", []))
            maps[path] = {"keys": keys,
                          "defaults": {k: props[k]["default"] for k in keys if "default" in props.get(k, {})}}
        elif list_type == "set":
            sets.append(path)
        for key, child in node.get("properties", {}).items():
            if not path and key == "status":
                continue
            walk(child, f"{path}.{key}" if path else key)
        if isinstance(node.get("items"), dict):
            walk(node["items"], f"{path}[]")
        if isinstance(node.get("additionalProperties"), dict):
            walk(node["additionalProperties"], f"{path}{{}}")

    walk(schema, "")
    return {"int": ints, "listMaps": maps, "listSets": sets}


@functools.cache
def jobset_index() -> dict:
    """The index derived from the vendored JobSet CRD (elxpk/crds/jobset-index.json, a few KiB). Found
    next to this package rather than through importlib.resources (the same directory, installed or not):
    importing that machinery costs ~8 ms of `workload create --dry-run`'s start-up budget."""
    with open(Path(__file__).resolve().parent.parent / "crds" / JOBSET_INDEX, encoding="utf-8") as handle:
        return json.load(handle)


def _field_path(parts: Any) -> str:
    path = ""
    for part in parts:
        path = join(path, part)
    return path or "<root>"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


@functools.lru_cache(maxsize=4)
def _validator(api_version: str, kind: str) -> Any:
    import jsonschema

    crd_file, version = CRDS[(api_version, kind)]
    schema = copy.deepcopy(strict_crd_schema(crds_dir() / crd_file, version))
    # metadata is checked by the API server's ObjectMeta rules (elxpk/admission/objectmeta.py).
    schema.setdefault("properties", {})["metadata"] = {"type": "object"}
    checker = jsonschema.FormatChecker(formats=())
    for name, (low, high, _) in INT_RANGES.items():
        checker.checks(name)(lambda v, low=low, high=high: not isinstance(v, int) or low <= v <= high)
    return jsonschema.Draft7Validator(schema, format_checker=checker)


def without_nulls(node: Any) -> Any:
    """A copy without the object fields whose value is null: the API server prunes them before it validates a
    custom resource whose schema does not mark them `nullable`, and no field of the vendored CRDs is
    (tests/launcher/test_admission.py holds that). xpk renders `nodeSelector: null` for GPU workloads."""
    if isinstance(node, dict):
        return {k: without_nulls(v) for k, v in node.items() if v is not None}
    if isinstance(node, list):
        return [without_nulls(v) for v in node]
    return node


def schema_problems(obj: dict) -> list[Violation]:
    """Structural problems of a JobSet or PathwaysJob against its vendored CRD (strict, formats enforced).
    Give it the object as the API server validates it: nulls pruned (`without_nulls`), and a JobSet after
    its webhook's defaults (`webhook.defaulted`: unnamed failure rules get names)."""
    key = (obj.get("apiVersion"), obj.get("kind"))
    if key not in CRDS:
        return []
    found = []
    for error in _validator(*key).iter_errors(obj):
        path = _field_path(error.absolute_path)
        if error.validator == "format" and error.validator_value in INT_RANGES:
            message = INT_RANGES[error.validator_value][2](error.instance)
        elif error.validator == "enum":  # the API server's wording
            allowed = [json.dumps(v) for v in error.validator_value]
            shown = ", ".join(allowed[:8]) + (f", ... ({len(allowed)} in all)" if len(allowed) > 8 else "")
            message = f"Unsupported value: {_short(error.instance)}: supported values: {shown}"
        elif error.validator == "additionalProperties":
            message = f"unknown field: {error.message.split('(')[-1].rstrip(')')}"
        elif error.validator in ("type", "required", "minimum", "maximum", "minItems", "maxItems",
                                 "minLength", "maxLength", "pattern", "format"):
            message = f"{error.validator}: {error.message if len(error.message) <= 160 else _short(error.instance)}"
        else:
            message = error.message if len(error.message) <= 160 else f"{error.validator}: {_short(error.instance)}"
        found.append(Violation(path, message))
    return sorted(set(found))
