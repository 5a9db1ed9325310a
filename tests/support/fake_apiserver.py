"""A Kubernetes-compatible API server for tests: stdlib, threaded, HTTP or TLS, spoken to by the real client.

What it implements, as the real kube-apiserver answers it:
- discovery: /version, /api, /api/v1, /apis, /apis/{group}, /apis/{group}/{version};
  CRD-backed groups (JobSet) are served only while their CRD exists;
- get, list (label and field selectors, limit/continue), watch (chunked JSON lines), create (dryRun=All),
  delete (propagationPolicy, gracePeriodSeconds, cascading to owned objects), pod logs (follow, tailLines,
  previous), pod exec over a WebSocket and the eviction subresource (fake_exec.py);
- errors as `Status` bodies: 401, 403, 404, 409, 422 (JobSets are checked against the JobSet CRD schema);
- fault injection for client retries: scripted status codes, dropped connections, slow answers.
Every request is recorded in `calls`, so tests and the benchmark can count API calls.
"""

from __future__ import annotations

import json
import re
import socket
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from tests.support import loopback
from tests.support.fake_exec import PodSubresources
from tests.support.fake_paths import flag, group_doc, one, route, status_body
from tests.support.fake_streams import StreamingVerbs
from tests.support.kube_store import RESOURCES, Resource, Store, load_crd_validator

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


@dataclass
class Fault:
    """One scripted misbehaviour for requests matching `method` and a regex on the path."""

    method: str
    path: str
    # "status": answer `code`; "drop": close without acting; "slow": sleep, then act normally;
    # "lost_reply": act normally (e.g. persist a create) but close the connection instead of answering.
    action: str
    code: int = 503
    seconds: float = 0.0
    times: int = 1


@dataclass
class Call:
    method: str
    path: str
    query: dict[str, list[str]]
    body: bytes = b""


@dataclass
class FakeApiServer:
    store: Store
    jobset_validator: Callable[[dict], list[str]] | None = None
    token: str | None = None  # required bearer token; None accepts anything
    forbidden: set[tuple[str, str]] = field(default_factory=set)  # (verb, plural) answered 403
    faults: list[Fault] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    seen_tokens: list[str] = field(default_factory=list)
    tls: ssl.SSLContext | None = None
    _httpd: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._httpd is not None
        scheme = "https" if self.tls else "http"
        return f"{scheme}://127.0.0.1:{self._httpd.server_address[1]}"

    def start(self) -> FakeApiServer:
        server = self

        class Handler(_Handler):
            fake = server

        self._httpd = loopback.serve(Handler, self.tls)
        return self

    def stop(self) -> None:
        loopback.stop(self._httpd)

    def namespace_exists(self, name: str) -> bool:
        """A namespace exists when a cluster has it from the start (default, kube-system, kube-public), when
        its Namespace object was created, or when a test seeded an object into it (the store takes any)."""
        if name in ("default", "kube-system", "kube-public"):
            return True
        store = self.store
        with store.lock:
            if store.get(("", "namespaces"), "", name) is not None:
                return True
            return any(ns == name for bucket in store.objects.values() for ns, _ in bucket)

    def count(self, method: str | None = None) -> int:
        return sum(1 for c in self.calls if method is None or c.method == method)

    def write_kubeconfig(self, path: Path, *, ca_pem: bytes | None = None, token: str | None = None,
                         namespace: str = "default") -> Path:
        import base64

        import yaml

        cluster: dict = {"server": self.url}
        if ca_pem is not None:
            cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "fake",
            "clusters": [{"name": "fake", "cluster": cluster}],
            "users": [{"name": "fake", "user": {"token": token or self.token or "test-token"}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake", "namespace": namespace}}],
        }))
        return path


class _Handler(StreamingVerbs, PodSubresources, BaseHTTPRequestHandler):
    fake: FakeApiServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # quiet test output
        pass

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in separate writes: without NODELAY, Nagle + delayed ACK add 40 ms a request.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    # --- plumbing -----------------------------------------------------------------------------------

    _lost_reply = False
    _raw_body = b""

    def _send(self, code: int, body: object, content_type: str = "application/json") -> None:
        if self._lost_reply:
            self.close_connection = True
            self.connection.close()
            return
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _status(self, code: int, reason: str, message: str, details: dict | None = None) -> None:
        self._send(code, status_body(code, reason, message, details))

    def _body(self) -> dict:
        return json.loads(self._raw_body or b"{}")

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _start_stream(self, content_type: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _fault(self, method: str, path: str) -> bool:
        """Apply a scripted fault; True when the request has been answered (or dropped)."""
        for fault in self.fake.faults:
            if fault.times > 0 and fault.method == method and re.search(fault.path, path):
                fault.times -= 1
                if fault.action == "slow":
                    time.sleep(fault.seconds)
                    return False
                if fault.action == "lost_reply":
                    self._lost_reply = True
                    return False
                if fault.action == "drop":
                    self.close_connection = True
                    self.connection.close()
                    return True
                self._status(fault.code, "InternalError" if fault.code >= 500 else "BadRequest",
                             f"injected fault {fault.code}")
                return True
        return False

    def _authorized(self, verb: str, res: Resource | None, namespace: str) -> bool:
        header = self.headers.get("Authorization", "")
        token = header.removeprefix("Bearer ").strip()
        self.fake.seen_tokens.append(token)
        if self.fake.token is not None and token != self.fake.token:
            self._status(401, "Unauthorized", "Unauthorized")
            return False
        if res is not None and (verb, res.plural) in self.fake.forbidden:
            where = f' in the namespace "{namespace}"' if namespace else " at the cluster scope"
            self._status(403, "Forbidden",
                         f'{res.qualified} is forbidden: User "tester" cannot {verb} resource "{res.plural}"'
                         f' in API group "{res.group}"{where}',
                         {"group": res.group, "kind": res.plural})
            return False
        return True

    # --- routing ------------------------------------------------------------------------------------

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def _dispatch(self, method: str) -> None:
        parts = urlsplit(self.path)
        query = parse_qs(parts.query)
        path = parts.path.rstrip("/") or "/"
        # Read the whole request first: an early answer must not leave body bytes on a kept-alive connection.
        self._raw_body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.fake.calls.append(Call(method, path, query, self._raw_body))
        if self._fault(method, path):
            return
        routed = route(path)
        if routed is None or (routed[0] is None and method == "GET"):
            if self._authorized("get", None, "") and not (method == "GET" and self._discovery(path)):
                self._status(404, "NotFound", "the server could not find the requested resource")
            return
        res, namespace, name, sub = routed
        store = self.fake.store
        if res is None or not store.served(res):
            self._status(404, "NotFound", "the server could not find the requested resource")
            return
        verb = {"POST": "create", "DELETE": "delete"}.get(method) or (
            "watch" if flag(query, "watch") else ("get" if name else "list"))
        if not self._authorized(verb, res, namespace):
            return
        try:
            if method == "GET" and sub == "log":
                self._logs(res, namespace, name, query)
            elif method == "GET" and sub == "exec" and res.plural == "pods":
                self._exec(res, namespace, name, query)
            elif method == "POST" and sub == "eviction" and res.plural == "pods":
                self._evict(res, namespace, name)
            elif method == "GET" and name and res.plural == "namespaces":
                if self.fake.namespace_exists(name):
                    self._send(200, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name},
                                     "status": {"phase": "Active"}})
                else:
                    self._not_found(res, name)
            elif method == "GET" and name:
                obj = store.get((res.group, res.plural), namespace, name)
                if obj is None:
                    self._not_found(res, name)
                else:
                    self._send(200, obj)
            elif method == "GET" and verb == "watch":
                self._watch(res, namespace or None, query)
            elif method == "GET":
                self._list(res, namespace or None, query)
            elif method == "POST" and not name:
                self._create(res, namespace, query)
            elif method == "DELETE" and name:
                self._delete(res, namespace, name, query)
            else:
                self._status(405, "MethodNotAllowed", f"{method} is not supported on {path}")
        except ValueError as exc:
            self._status(400, "BadRequest", str(exc))

    def _precondition_failed(self, res: Resource, namespace: str, name: str, body: dict) -> bool:
        stored = self.fake.store.get((res.group, res.plural), namespace, name)
        message = precondition_conflict(stored, body) if stored is not None else ""
        if message:
            self._status(409, "Conflict", message)
        return bool(message)

    def _discovery(self, path: str) -> bool:
        store = self.fake.store
        served = [r for r in RESOURCES if store.served(r)]
        if path == "/version":
            self._send(200, {"major": "1", "minor": "33", "gitVersion": "v1.33.0-fake", "platform": "linux/amd64"})
        elif path == "/api":
            self._send(200, {"kind": "APIVersions", "versions": ["v1"],
                             "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": ""}]})
        elif path == "/apis":
            groups: dict[str, list[str]] = {}
            for r in served:
                if r.group:
                    groups.setdefault(r.group, [])
                    if r.version not in groups[r.group]:
                        groups[r.group].append(r.version)
            self._send(200, {"kind": "APIGroupList", "apiVersion": "v1",
                             "groups": [group_doc(g, vs) for g, vs in groups.items()]})
        elif m := re.fullmatch(r"/apis/([^/]+)", path):
            versions = sorted({r.version for r in served if r.group == m.group(1)})
            if not versions:
                self._status(404, "NotFound", "the server could not find the requested resource")
            else:
                self._send(200, {"kind": "APIGroup", "apiVersion": "v1", **group_doc(m.group(1), versions)})
        elif m := re.fullmatch(r"/api/(v1)|/apis/([^/]+)/([^/]+)", path):
            group, version = ("", "v1") if m.group(1) else (m.group(2), m.group(3))
            listed = [r for r in served if r.group == group and r.version == version]
            if not listed:
                self._status(404, "NotFound", "the server could not find the requested resource")
                return True
            resources = [{"name": r.plural, "singularName": r.kind.lower(), "namespaced": r.namespaced,
                          "kind": r.kind, "verbs": ["create", "delete", "get", "list", "watch"]} for r in listed]
            if group == "":
                resources.append({"name": "pods/log", "singularName": "", "namespaced": True, "kind": "Pod",
                                  "verbs": ["get"]})
                resources.append({"name": "pods/exec", "singularName": "", "namespaced": True,
                                  "kind": "PodExecOptions", "verbs": ["create", "get"]})
                resources.append({"name": "pods/eviction", "singularName": "", "namespaced": True,
                                  "group": "policy", "version": "v1", "kind": "Eviction", "verbs": ["create"]})
            self._send(200, {"kind": "APIResourceList", "apiVersion": "v1",
                             "groupVersion": f"{group}/{version}" if group else version, "resources": resources})
        else:
            return False
        return True

    # --- verbs --------------------------------------------------------------------------------------

    def _not_found(self, res: Resource, name: str) -> None:
        self._status(404, "NotFound", f'{res.qualified} "{name}" not found',
                     {"name": name, "group": res.group, "kind": res.plural})

    def _list(self, res: Resource, namespace: str | None, query: dict) -> None:
        store = self.fake.store
        start = int(one(query, "continue") or 0)
        limit = int(one(query, "limit") or 0)
        with store.lock:  # serialise while holding the lock instead of deep-copying a 1,000-pod list
            items = store.list((res.group, res.plural), namespace, one(query, "labelSelector"),
                               one(query, "fieldSelector"), copies=False)
            page = items[start:start + limit] if limit else items[start:]
            meta: dict = {"resourceVersion": str(store.resource_version)}
            if limit and start + limit < len(items):
                meta["continue"] = str(start + limit)
                meta["remainingItemCount"] = len(items) - start - limit
            data = json.dumps({"kind": f"{res.kind}List", "apiVersion": res.group_version, "metadata": meta,
                               "items": page}).encode()
        self._send(200, data)

    def _create(self, res: Resource, namespace: str, query: dict) -> None:
        body = self._body()
        meta = body.setdefault("metadata", {})
        if res.namespaced and not self.fake.namespace_exists(namespace):  # the NamespaceLifecycle admission plugin
            self._status(404, "NotFound", f'namespaces "{namespace}" not found',
                         {"name": namespace, "kind": "namespaces"})
            return
        if res.namespaced:
            if meta.get("namespace") not in (None, namespace):
                self._status(400, "BadRequest", "the namespace of the provided object does not match the "
                             "namespace sent on the request")
                return
            meta["namespace"] = namespace
        name = meta.get("name", "")
        errors = []
        if not name or not _NAME.match(name) or len(name) > 253:
            errors.append(f"metadata.name: Invalid value: {name!r}: a lowercase RFC 1123 subdomain must consist"
                          " of lower case alphanumeric characters, '-' or '.'")
        if res.kind == "JobSet" and self.fake.jobset_validator is not None:
            errors.extend(self.fake.jobset_validator(body))
        if body.get("kind") not in (None, res.kind):
            errors.append(f"kind: Invalid value: {body.get('kind')!r}: must be {res.kind}")
        if errors:
            self._status(422, "Invalid", f'{res.kind} "{name}" is invalid: ' + "; ".join(errors),
                         {"name": name, "group": res.group, "kind": res.kind,
                          "causes": [{"reason": "FieldValueInvalid", "message": e} for e in errors]})
            return
        dry_run = one(query, "dryRun") == "All"
        try:
            created = self.fake.store.create((res.group, res.plural), body, dry_run=dry_run)
        except KeyError:
            self._status(409, "AlreadyExists", f'{res.qualified} "{name}" already exists',
                         {"name": name, "group": res.group, "kind": res.plural})
            return
        self._send(201, created)

    def _delete(self, res: Resource, namespace: str, name: str, query: dict) -> None:
        body = self._body()
        # As the API server (apiserver pkg/endpoints/handlers/delete.go): a DELETE's options come from its
        # body when it has one, and only then from its query.
        if self._raw_body:
            dry_run, policy = body.get("dryRun") == ["All"], body.get("propagationPolicy")
        else:
            dry_run, policy = one(query, "dryRun") == "All", one(query, "propagationPolicy")
        if self._precondition_failed(res, namespace, name, body):
            return
        deleted = self.fake.store.delete((res.group, res.plural), namespace, name, dry_run=dry_run)
        if deleted is None:
            self._not_found(res, name)
            return
        if policy == "Foreground":
            deleted["metadata"]["deletionTimestamp"] = deleted["metadata"]["creationTimestamp"]
            deleted["metadata"]["finalizers"] = ["foregroundDeletion"]
            self._send(200, deleted)
        else:
            self._send(200, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                             "details": {"name": name, "group": res.group, "kind": res.plural,
                                         "uid": deleted["metadata"]["uid"]}})

def precondition_conflict(stored: dict | None, body: dict) -> str:
    """The API server's answer to DeleteOptions.preconditions (uid, resourceVersion) that the stored object
    does not meet: the message of its 409, or '' (apiserver registry/rest/delete.go, storage preconditions)."""
    wanted = (body or {}).get("preconditions") or {}
    meta = (stored or {}).get("metadata") or {}
    for key in ("uid", "resourceVersion"):
        if wanted.get(key) and wanted[key] != meta.get(key):
            return (f"Precondition failed: {key} in precondition: {wanted[key]}, {key} in object meta: "
                    f"{meta.get(key)}")
    return ""


def start_fake(*, crd_file: Path | None, clock: Callable[[], float] = time.time, tls: ssl.SSLContext | None = None,
               token: str | None = None, install_jobset: bool = True, kueue: bool = True) -> FakeApiServer:
    """A started server; with `install_jobset` the JobSet CRD object is present, so the group is served."""
    store = Store(clock=clock, kueue_installed=kueue)
    validator = load_crd_validator(crd_file) if crd_file is not None else None
    if install_jobset:
        store.create(("apiextensions.k8s.io", "customresourcedefinitions"), {
            "metadata": {"name": "jobsets.jobset.x-k8s.io"},
            "spec": {"group": "jobset.x-k8s.io", "names": {"kind": "JobSet", "plural": "jobsets"},
                     "scope": "Namespaced", "versions": [{"name": "v1alpha2", "served": True, "storage": True}]},
        })
    return FakeApiServer(store=store, jobset_validator=validator, token=token, tls=tls).start()
