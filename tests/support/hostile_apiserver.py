"""An HTTP server on 127.0.0.1 that answers every request with one scripted, possibly hostile, answer.

What a real API server never sends but a proxy, a login page or a broken middlebox does: any status, any
Content-Type, any bytes, sent whole, chunked, without a length (ended by closing), one byte at a time with
a pause (a trickle), an endless chunked stream, or headers that never end.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from tests.support import loopback

MODES = ("length", "chunked", "close", "trickle", "endless", "slow_headers")


@dataclass
class Answer:
    status: int = 200
    content_type: str = "application/json"
    body: bytes = b"{}"
    mode: str = "length"
    pause_s: float = 0.5  # between bytes of a trickle, or between header bytes
    headers: tuple[tuple[str, str], ...] = ()  # more headers: Location, Retry-After, Content-Encoding


@dataclass
class HostileServer:
    answer: Answer = field(default_factory=Answer)
    requests: int = 0
    _httpd: object = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"  # type: ignore[attr-defined]

    def start(self) -> HostileServer:
        server = self

        class Handler(_Handler):
            hostile = server

        self._httpd = loopback.serve(Handler)
        return self

    def stop(self) -> None:
        loopback.stop(self._httpd)  # type: ignore[arg-type]

    def write_kubeconfig(self, path: Path) -> Path:
        import yaml

        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "h",
            "clusters": [{"name": "h", "cluster": {"server": self.url}}],
            "users": [{"name": "h", "user": {"token": "t"}}],
            "contexts": [{"name": "h", "context": {"cluster": "h", "user": "h", "namespace": "default"}}],
        }))
        return path


class _Handler(BaseHTTPRequestHandler):
    hostile: HostileServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self._answer()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._answer()

    do_DELETE = do_POST

    def _answer(self) -> None:
        self.hostile.requests += 1
        a = self.hostile.answer
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            if a.mode == "slow_headers":
                for byte in f"HTTP/1.1 {a.status} OK\r\nX-Slow: ".encode() + b"a" * 10_000:
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(a.pause_s)
                return
            self.send_response(a.status)
            self.send_header("Content-Type", a.content_type)
            for name, value in a.headers:
                self.send_header(name, value)
            if a.mode in ("length", "trickle"):
                self.send_header("Content-Length", str(len(a.body)))
            elif a.mode in ("chunked", "endless"):
                self.send_header("Transfer-Encoding", "chunked")
            else:
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            if a.mode == "trickle":
                for byte in a.body:
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(a.pause_s)
            elif a.mode == "chunked":
                if a.body:
                    self.wfile.write(f"{len(a.body):x}\r\n".encode() + a.body + b"\r\n")
                self.wfile.write(b"0\r\n\r\n")
            elif a.mode == "endless":
                piece = b"[" * 65536
                while True:
                    self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            else:
                self.wfile.write(a.body)
            self.wfile.flush()
        except OSError:
            self.close_connection = True  # the client gave up: what a bounded client does
