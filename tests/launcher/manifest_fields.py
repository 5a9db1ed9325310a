"""A manifest as {dotted path: leaf}, for field-by-field comparisons against another launcher's render
(xpk's GPU renders in test_gpu_parity.py, gcluster's in test_gcluster_parity.py)."""

from __future__ import annotations

from typing import Any


def flatten(node: Any, path: str = "", out: dict[str, Any] | None = None) -> dict[str, Any]:
    """{dotted path: leaf}; lists of named objects are keyed by name (tolerations by key), so order inside
    them is not a difference (Kubernetes reads them as sets)."""
    out = {} if out is None else out
    if isinstance(node, dict):
        for key, value in node.items():
            flatten(value, f"{path}.{key}" if path else str(key), out)
    elif isinstance(node, list) and node and all(isinstance(i, dict) for i in node):
        field = "name" if all("name" in i for i in node) else "key" if all("key" in i for i in node) else None
        for index, item in enumerate(node):
            flatten(item, f"{path}[{item[field] if field else index}]", out)
    else:
        out[path] = node
    return out


ABSENT = "<absent>"


def differing(mine: dict[str, Any], theirs: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """Every path whose leaf differs: (mine, theirs), ABSENT where one side lacks it."""
    return {p: (mine.get(p, ABSENT), theirs.get(p, ABSENT)) for p in sorted(set(mine) | set(theirs))
            if mine.get(p, ABSENT) != theirs.get(p, ABSENT)}
