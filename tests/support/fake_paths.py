"""Pure helpers of the fake API server: resource paths, discovery documents, query parameters."""

from __future__ import annotations

import re

from tests.support.kube_store import RESOURCES, Resource


def status_body(code: int, reason: str, message: str, details: dict | None = None) -> dict:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "details": details or {}, "code": code}


def group_doc(group: str, versions: list[str]) -> dict:
    docs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"name": group, "versions": docs, "preferredVersion": docs[-1]}


def one(query: dict, key: str) -> str | None:
    values = query.get(key)
    return values[0] if values else None


def flag(query: dict, key: str) -> bool:
    return (one(query, key) or "").lower() in ("true", "1")


def route(path: str) -> tuple[Resource | None, str, str, str] | None:
    """(resource, namespace, name, subresource) for a resource path; None if it is not one."""
    m = re.fullmatch(r"/api/v1/(.*)|/apis/([^/]+)/([^/]+)/(.*)", path)
    if not m:
        return None
    group, version, rest = ("", "v1", m.group(1)) if m.group(1) is not None else m.group(2, 3, 4)
    segments = rest.split("/")
    namespace = ""
    if segments[0] == "namespaces" and len(segments) >= 3:
        namespace, segments = segments[1], segments[2:]
    plural, name, sub = (segments + ["", ""])[:3]
    res = next((r for r in RESOURCES if r.group == group and r.version == version and r.plural == plural), None)
    return res, namespace, name, sub
