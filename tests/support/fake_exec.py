"""The fake API server's pod subresources beyond logs: `exec` over a WebSocket, and `eviction`.

exec speaks what the kubernetes client's `kubernetes.stream` expects (RFC 6455 + the channel protocol of
k8s.io/apimachinery/pkg/util/httpstream/wsstream, `v4.channel.k8s.io`): the HTTP/1.1 upgrade handshake,
then unmasked binary frames whose first byte is the channel (1 stdout, 2 stderr, 3 the error channel
carrying a `Status`: Success, or Failure with reason NonZeroExitCode and the code in details.causes),
then a close frame. What the command does is the test's: `Store.on_exec` plays the container.

eviction is POST .../pods/NAME/eviction with a policy/v1 Eviction body, as `kubectl drain` sends it: the
pod is deleted after `Store.on_evict` has seen it (where a controller marks it DisruptionTarget); a
PodDisruptionBudget whose minAvailable the eviction would break answers 429, as the real server does.
"""

from __future__ import annotations

import base64
import hashlib
import json
import struct

from tests.support.fake_paths import one, status_body
from tests.support.kube_store import Resource, parse_selector

_WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"  # RFC 6455 section 1.3
CHANNEL_PROTOCOL = "v4.channel.k8s.io"
STDOUT, STDERR, ERROR = 1, 2, 3
OP_BINARY, OP_CLOSE = 0x2, 0x8


def ws_frame(opcode: int, payload: bytes) -> bytes:
    """One final, unmasked frame (a server never masks)."""
    head = bytes([0x80 | opcode])
    n = len(payload)
    if n < 126:
        head += bytes([n])
    elif n < 1 << 16:
        head += bytes([126]) + struct.pack("!H", n)
    else:
        head += bytes([127]) + struct.pack("!Q", n)
    return head + payload


def accept_key(key: str) -> str:
    return base64.b64encode(hashlib.sha1((key + _WS_GUID).encode()).digest()).decode()


class PodSubresources:
    """Mixed into the request handler; uses its fake, headers, wfile, _send, _status, _not_found."""

    def _exec(self, res: Resource, namespace: str, name: str, query: dict) -> None:
        store = self.fake.store
        pod = store.get((res.group, res.plural), namespace, name)
        if pod is None:
            self._not_found(res, name)
            return
        key = self.headers.get("Sec-WebSocket-Key")
        offered = [p.strip() for p in (self.headers.get("Sec-WebSocket-Protocol") or "").split(",")]
        if not key or "websocket" not in (self.headers.get("Upgrade") or "").lower():
            self._status(400, "BadRequest", "Upgrade request required")
            return
        if CHANNEL_PROTOCOL not in offered:
            self._status(400, "BadRequest", f"no supported channel protocol in {offered}")
            return
        containers = [c["name"] for c in pod["spec"].get("containers", [])]
        container = one(query, "container") or containers[0]
        command = query.get("command") or []
        store.execs.append((namespace, name, container, command))
        stdout, code = store.on_exec(namespace, name, container, command) if store.on_exec else ("", 0)
        self.send_response(101, "Switching Protocols")
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept_key(key))
        self.send_header("Sec-WebSocket-Protocol", CHANNEL_PROTOCOL)
        self.end_headers()
        status: dict | None
        if code is None:  # the connection ends with the container: no Status comes (a kill of PID 1 may do it)
            status = None
        elif code == 0:
            status = {"metadata": {}, "status": "Success"}
        else:
            status = {"metadata": {}, "status": "Failure", "reason": "NonZeroExitCode",
                      "message": f"command terminated with non-zero exit code: exit status {code}",
                      "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]}}
        try:
            if stdout:
                self.wfile.write(ws_frame(OP_BINARY, bytes([STDOUT]) + stdout.encode()))
            if status is not None:
                self.wfile.write(ws_frame(OP_BINARY, bytes([ERROR]) + json.dumps(status).encode()))
            self.wfile.write(ws_frame(OP_CLOSE, struct.pack("!H", 1000)))
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.close_connection = True

    def _evict(self, res: Resource, namespace: str, name: str) -> None:
        store = self.fake.store
        body = self._body()
        if body.get("kind") != "Eviction":
            self._status(400, "BadRequest", f"expected an Eviction (policy/v1), got {body.get('kind')!r}")
            return
        pod = store.get((res.group, res.plural), namespace, name)
        if pod is None:
            self._not_found(res, name)
            return
        if self._precondition_failed(res, namespace, name, body.get("deleteOptions") or {}):
            return
        blocking = self._blocking_budget(namespace, pod)
        if blocking:
            self._send(429, status_body(429, "TooManyRequests", "Cannot evict pod as it would violate the pod's "
                                        "disruption budget.", {"causes": [{"reason": "DisruptionBudget",
                                                                           "message": blocking}]}))
            return
        if store.on_evict is not None:
            store.on_evict(pod)
        store.delete((res.group, res.plural), namespace, name)
        self._send(201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201})

    def _blocking_budget(self, namespace: str, pod: dict) -> str:
        """The message of a PodDisruptionBudget this eviction would violate, or ''."""
        store = self.fake.store
        labels = pod["metadata"].get("labels") or {}
        for pdb in store.list(("policy", "poddisruptionbudgets"), namespace):
            match = (pdb["spec"].get("selector") or {}).get("matchLabels") or {}
            selector = ",".join(f"{k}={v}" for k, v in match.items())
            if not parse_selector(selector)(labels):
                continue
            healthy = [p for p in store.list(("", "pods"), namespace, selector or None)
                       if p["status"].get("phase") == "Running"]
            min_available = int(pdb["spec"].get("minAvailable", 0))
            if len(healthy) - 1 < min_available:
                return (f"The disruption budget {pdb['metadata']['name']} needs {min_available} healthy pods "
                        f"and has {len(healthy)} currently")
        return ""
