"""The API server's limit on the size of one stored object.

etcd refuses a value over 1.5 MiB (its default `--max-request-bytes`, 1.5 MiB, which the API server's
storage layer meets as "etcdserver: request is too large"); the API server answers `413 Request Entity
Too Large` or `500` for such a create. The object is stored as JSON (or protobuf, which is smaller for
built-in kinds but not for a custom resource such as a JobSet), so its compact JSON size is what counts.
"""

from __future__ import annotations

import json
from typing import Any

OBJECT_MAX_BYTES = 3 * 1024 * 1024 // 2  # 1.5 MiB


def object_bytes(obj: Any) -> int:
    return len(json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass"))


def size_problem(obj: Any) -> str | None:
    """Why the API server would refuse `obj` for its size, or None."""
    size = object_bytes(obj)
    if size <= OBJECT_MAX_BYTES:
        return None
    return (f"is {size // 1024} KiB as JSON, over the {OBJECT_MAX_BYTES // 1024} KiB (1.5 MiB) the API server "
            "stores for one object (etcd's request limit)")


def largest_env(obj: Any) -> tuple[str, int] | None:
    """(name, bytes) of the largest env value in a JobSet's containers, to name in a size refusal."""
    best: tuple[str, int] | None = None
    stack = [obj]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if isinstance(node.get("env"), list):
                for var in node["env"]:
                    if isinstance(var, dict) and isinstance(var.get("value"), str):
                        size = len(var["value"].encode("utf-8", "surrogatepass"))
                        if best is None or size > best[1]:
                            best = (str(var.get("name")), size)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return best
