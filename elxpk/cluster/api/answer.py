"""One API answer, read with bounds: a size cap, a total deadline, and a check of its shape.

The API server's answer is input like any other: a proxy's login page, a truncated body, a server that
trickles one byte every few seconds, or an endless chunked stream must each end in one line naming the
host and what it sent, never in a hang, an exhausted memory or an internal error.

- Size: a body is read in pieces and refused past RESPONSE_BYTES (64 MiB; a LIST page of 500 pods of
  ~10 KB each is ~5 MB, the 1,024 pods of a 256-slice workload ~10 MB). A watch or log line stops at
  LINE_BYTES.
- Time: a socket timeout bounds each read, not the answer: a server sending a byte per read timeout never
  trips it. A `Guard` per request shuts the connection's socket down at the request's deadline, from a
  timer thread, so a read blocked in the headers or the body returns at once. The connection classes of the
  client's pool register their socket with the guard of the request in flight (`guard_pools`).
- Shape: a body must be a JSON object; a LIST's `items` a list of objects; 100,000-deep arrays end in
  RecursionError inside `json`, which is caught here like any other unparsable body.
"""

from __future__ import annotations

import gc
import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

from elxpk.errors import ClusterError

RESPONSE_BYTES = 64 * 2**20
LINE_BYTES = 16 * 2**20  # one watch event (an object of at most etcd's 1.5 MiB) or one log line
CHUNK = 64 * 1024
_PREVIEW = 60

_current = threading.local()  # the Guard of the request this thread has in flight


class Guard:
    """Shuts down every socket a request used once `deadline` (time.monotonic) passes."""

    def __init__(self, deadline: float | None) -> None:
        self.deadline = deadline
        self.fired = False
        self._sockets: list[Any] = []
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None

    def __enter__(self) -> Guard:
        _current.guard = self
        return self

    def __exit__(self, *exc: object) -> None:
        _current.guard = None

    def watch(self, sock: Any) -> None:
        if self.deadline is None:
            return
        with self._lock:
            self._sockets.append(sock)
            if self.fired:
                _shutdown(sock)
            elif self._timer is None:
                self._timer = threading.Timer(max(0.0, self.deadline - time.monotonic()), self._fire)
                self._timer.daemon = True
                self._timer.start()

    def expired(self) -> bool:
        return self.fired or (self.deadline is not None and time.monotonic() >= self.deadline)

    def _fire(self) -> None:
        with self._lock:
            self.fired = True
            for sock in self._sockets:
                _shutdown(sock)

    def cancel(self) -> None:
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()


def _shutdown(sock: Any) -> None:
    try:  # what urllib3's own HTTPResponse.shutdown() does to interrupt a read blocked in another thread
        sock.shutdown(socket.SHUT_RDWR)
    except (OSError, AttributeError, ValueError):
        pass  # closed already


class _GuardedConnection:
    """Mixed into the pool's connection classes: the request in flight on this thread watches the socket
    before the response's headers are read."""

    def getresponse(self, *args: Any, **kwargs: Any) -> Any:
        guard = getattr(_current, "guard", None)
        sock = getattr(self, "sock", None)
        if guard is not None and sock is not None:
            guard.watch(sock)
        return super().getresponse(*args, **kwargs)  # type: ignore[misc]


def guard_pools(api_client: Any) -> None:
    """Make the API client's connection pools (direct, HTTP proxy or SOCKS) register each socket
    with the Guard of the request in flight."""
    manager = getattr(getattr(api_client, "rest_client", None), "pool_manager", None)
    classes = getattr(manager, "pool_classes_by_scheme", None)
    if manager is None or not isinstance(classes, dict):
        return
    guarded = {}
    for scheme, pool in classes.items():
        if issubclass(pool.ConnectionCls, _GuardedConnection):
            guarded[scheme] = pool
            continue
        connection = type(f"Guarded{pool.ConnectionCls.__name__}", (_GuardedConnection, pool.ConnectionCls), {})
        guarded[scheme] = type(f"Guarded{pool.__name__}", (pool,), {"ConnectionCls": connection})
    manager.pool_classes_by_scheme = guarded


# --- reading ---------------------------------------------------------------------------------------------


class TooLarge(Exception):
    """A body or a line past its cap (turned into a ClusterError naming the host by the caller)."""


def read_body(resp: Any, *, cap: int = RESPONSE_BYTES) -> bytes:
    """The whole body of urllib3 response `resp`, up to `cap` bytes (TooLarge past it)."""
    parts: list[bytes] = []
    size = 0
    for chunk in resp.stream(CHUNK, decode_content=True):
        size += len(chunk)
        if size > cap:
            raise TooLarge(size)
        parts.append(chunk)
    return b"".join(parts)


def lines_of(resp: Any, *, cap: int = LINE_BYTES) -> Iterator[bytes]:
    """The lines of a streamed body; a line longer than `cap` is cut at `cap` (the rest of it is skipped),
    so one endless line cannot hold the memory."""
    buffer = b""
    skipping = False
    for chunk in resp.stream(CHUNK, decode_content=True):
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            if skipping:
                skipping = False  # the tail of a line already cut and yielded
                continue
            yield line
        if len(buffer) > cap:
            if not skipping:
                yield buffer[:cap]
            skipping, buffer = True, b""
    if buffer and not skipping:
        yield buffer


# --- parsing and shape ------------------------------------------------------------------------------------


class NotAnObject(Exception):
    """The body is not the JSON object asked for; str() says what it is instead."""


def _no_constant(name: str) -> Any:
    """NaN, Infinity and -Infinity are not JSON (RFC 8259), no API server sends them, and a NaN in a count
    reached `int()` far from here."""
    raise NotAnObject(f"{name} is not a JSON number")


def parse_object(data: bytes) -> dict:
    """`data` as a JSON object. A 1,000-pod list is ~100k fresh containers: pausing the cyclic GC while
    parsing (nothing in it can be garbage yet) makes this 2-4x faster."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        parsed = json.loads(data, parse_constant=_no_constant)
    except RecursionError:
        raise NotAnObject("JSON nested too deeply to read") from None
    except ValueError:  # JSONDecodeError, UnicodeDecodeError
        raise NotAnObject("not JSON") from None
    finally:
        if enabled:
            gc.enable()
    if not isinstance(parsed, dict):
        raise NotAnObject(f"a JSON {type(parsed).__name__.replace('dict', 'object')}, not an object")
    return parsed


def shape_problem(body: dict, verb: str) -> str:
    """'' when `body` has the shape `verb` expects of it, else what is wrong. A LIST: `items` a list of
    objects, `metadata` an object whose `continue` is a string."""
    meta = body.get("metadata")
    if meta is not None and not isinstance(meta, dict):
        return "its metadata is not an object"
    if verb != "list":
        return ""
    items = body.get("items")
    if items is not None and (not isinstance(items, list) or not all(isinstance(i, dict) for i in items)):
        return "a list whose items are not a list of objects"
    token = (meta or {}).get("continue")
    if token is not None and not isinstance(token, str):
        return "a list whose metadata.continue is not a string"
    return ""


def preview(data: bytes) -> str:
    """The first characters of a body, quoted on one line."""
    text = data[:_PREVIEW * 4].decode("utf-8", "replace")
    text = " ".join(text.split())
    return repr(text[:_PREVIEW] + ("…" if len(text) > _PREVIEW or len(data) > _PREVIEW * 4 else ""))


def not_json(host: str, status: int, content_type: str, data: bytes, what_is_wrong: str, asked: str) -> ClusterError:
    sent = f"with {content_type}" if content_type else "with no Content-Type"
    body = preview(data) if data else "an empty body"
    return ClusterError(f"{host} answered {status} {sent} to {asked}, {what_is_wrong}: {body}; is "
                        "--kubeconfig/--context pointing at the API server (not a proxy or login page)?")


def too_large(host: str, cap: int, asked: str) -> ClusterError:
    return ClusterError(f"{host} sent more than {cap // 2**20} MiB to {asked}: stopped reading there (the cap "
                        "of one answer); is --kubeconfig/--context pointing at the API server?")


class Stream:
    """A streamed answer (a watch, a log): its lines, each at most LINE_BYTES, until the server ends it or the
    request's deadline (if any) shuts it down."""

    def __init__(self, resp: Any, guard: Guard, host: str) -> None:
        self.resp = resp
        self.guard = guard
        self.host = host

    def lines(self) -> Iterator[bytes]:
        """ClusterError when the connection breaks before the server ended the stream (not at the deadline,
        which ends it like the server would)."""
        import urllib3

        try:
            yield from lines_of(self.resp)
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            if not self.guard.expired():
                text = (str(exc).splitlines() or [type(exc).__name__])[0]
                raise ClusterError(f"the stream from the Kubernetes API at {self.host} broke off: {text}") from None
        finally:
            self.close()

    def close(self) -> None:
        self.guard.cancel()
        close_response(self.resp)


def close_response(resp: Any) -> None:
    """Close (not release) a response: a connection read only in part, or shut down by a Guard, must not go
    back to the pool."""
    if resp is None:
        return
    try:
        resp.close()
    except (OSError, ValueError):
        pass
    try:
        resp.release_conn()
    except (OSError, ValueError, AttributeError):
        pass
