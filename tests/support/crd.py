"""The JobSet CRD's schema, made strict, shared by the manifest checks and the fake API server.

"Strict": every object schema that lists properties and does not preserve unknown fields gets
`additionalProperties: false`, so a typo'd or misplaced field fails validation instead of being
silently pruned, as the API server's strict field validation would do.
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any


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


@functools.lru_cache(maxsize=4)  # parsing the 0.8 MB CRD takes a while: once per process
def strict_crd_schema(crd_file: Path, version: str = "v1alpha2") -> dict:
    """The strict openAPIV3Schema of one version of a CRD file. Callers must not mutate it: copy first."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with open(crd_file, encoding="utf-8") as handle:
        crd = yaml.load(handle, Loader=loader)
    served = next(v for v in crd["spec"]["versions"] if v["name"] == version)
    return strictify(served["schema"]["openAPIV3Schema"])
