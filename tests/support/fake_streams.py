"""The streaming verbs of the fake API server: watch (chunked JSON lines) and pod logs (follow)."""

from __future__ import annotations

import json
import time

from tests.support.fake_paths import flag, one
from tests.support.kube_store import Resource, parse_field_selector, parse_selector


class StreamingVerbs:
    """Mixed into the request handler; uses its fake, _chunk, _start_stream, _end_stream, _send, _status."""

    def _watch(self, res: Resource, namespace: str | None, query: dict) -> None:
        labels_ok = parse_selector(one(query, "labelSelector"))
        fields_ok = parse_field_selector(one(query, "fieldSelector"))
        store = self.fake.store
        key = (res.group, res.plural)
        timeout = float(one(query, "timeoutSeconds") or 30)
        deadline = time.monotonic() + timeout

        def wanted(obj: dict) -> bool:
            meta = obj["metadata"]
            return ((namespace is None or meta.get("namespace", "") == namespace)
                    and labels_ok(meta.get("labels") or {}) and fields_ok(obj))

        self._start_stream("application/json")
        rv_text = one(query, "resourceVersion")
        if rv_text:
            rv = int(rv_text)
        else:  # no resourceVersion: synthetic ADDED events for the current state, then changes
            with store.lock:
                rv = store.resource_version
                current = store.list(key, namespace, one(query, "labelSelector"), one(query, "fieldSelector"))
            for obj in current:
                self._chunk(json.dumps({"type": "ADDED", "object": obj}).encode() + b"\n")
        try:
            while time.monotonic() < deadline:
                with store.lock:
                    events = [e for e in store.events_after(rv) if e.key == key]
                    if not events:
                        store.lock.wait(timeout=min(0.2, max(deadline - time.monotonic(), 0)))
                        events = [e for e in store.events_after(rv) if e.key == key]
                for event in events:
                    rv = max(rv, event.rv)
                    if wanted(event.obj):
                        self._chunk(json.dumps({"type": event.type, "object": event.obj}).encode() + b"\n")
                if not events:
                    with store.lock:
                        rv = max(rv, store.resource_version)
            self._end_stream()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _logs(self, res: Resource, namespace: str, name: str, query: dict) -> None:
        store = self.fake.store
        pod = store.get((res.group, res.plural), namespace, name)
        if pod is None:
            self._not_found(res, name)
            return
        containers = [c["name"] for c in pod["spec"].get("containers", [])]
        container = one(query, "container") or (containers[0] if len(containers) == 1 else None)
        if container is None:
            self._status(400, "BadRequest", f"a container name must be specified for pod {name}, choose one"
                         f" of: [{' '.join(containers)}]")
            return
        if container not in containers:
            self._status(400, "BadRequest", f"container {container} is not valid for pod {name}")
            return
        key = (namespace, name, container)
        with store.lock:
            if flag(query, "previous"):  # the last terminated container's log, as the kubelet keeps it
                if key not in store.previous_logs:
                    self._status(400, "BadRequest", f'previous terminated container "{container}" in pod '
                                 f'"{name}" not found')
                    return
                lines = list(store.previous_logs[key])
            else:
                lines = list(store.logs.get(key, []))
        tail = one(query, "tailLines")
        if tail is not None:
            lines = lines[-int(tail):] if int(tail) else []
        if not flag(query, "follow") or flag(query, "previous"):  # a terminated container has no more
            self._send(200, "".join(line + "\n" for line in lines).encode(), "text/plain")
            return
        self._start_stream("text/plain")
        sent = len(store.logs.get(key, []))
        try:
            for line in lines:
                self._chunk(line.encode() + b"\n")
            deadline = time.monotonic() + 60  # a follow never outlives a test
            while time.monotonic() < deadline:
                with store.lock:
                    new = store.logs.get(key, [])[sent:]
                    closed = key in store.closed_logs
                    if not new and not closed:
                        store.lock.wait(timeout=0.2)
                        continue
                for line in new:
                    self._chunk(line.encode() + b"\n")
                sent += len(new)
                if closed and not new:
                    break
            self._end_stream()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
