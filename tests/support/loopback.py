"""A threaded HTTP(S) server on 127.0.0.1 with an ephemeral port: the transport of every fake."""

from __future__ import annotations

import socket
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def serve(handler: type[BaseHTTPRequestHandler], tls: ssl.SSLContext | None = None) -> ThreadingHTTPServer:
    """Start serving in a daemon thread; the port is `server.server_address[1]`."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    if tls is not None:
        httpd.socket = tls.wrap_socket(httpd.socket, server_side=True)
    # A short poll interval so shutdown() returns quickly at the end of each test.
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return httpd


def stop(httpd: ThreadingHTTPServer | None) -> None:
    if httpd is not None:
        httpd.shutdown()
        httpd.server_close()


def free_port() -> int:
    """A loopback port free now (for a process that binds it itself, such as a jax coordinator)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
