"""A real HTTP server on 127.0.0.1 (http.server, in a thread) standing for a notification webhook.

Each request takes the next answer of `script` (the last one repeats): "200", "500", "429" or "503" (with
`Retry-After: retry_after`), "hang" (reads the body, then answers nothing until `release` is set or the
test ends) or "close" (reads the body, closes the connection without a word). Every request's body is kept
in `bodies`, in arrival order, with the answer it got, and its Authorization header in `authorizations`.
`reason` is the reason phrase of every status line (None: http.server's own), e.g. a hostile one.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Webhook:
    def __init__(self, script: list[str], retry_after: str = "1", reason: str | None = None) -> None:
        self.script, self.retry_after, self.reason = list(script), retry_after, reason
        self.authorizations: list[str | None] = []
        self.bodies: list[tuple[str, bytes]] = []
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}/services/T000/B000/secret-path"

    def answer(self) -> str:
        with self.lock:
            return self.script.pop(0) if len(self.script) > 1 else self.script[0]

    def answers(self) -> list[str]:
        return [answer for answer, _ in self.bodies]


def _handler(hook: Webhook) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:  # quiet: the test reads `bodies`
            pass

        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            answer = hook.answer()
            with hook.lock:
                hook.bodies.append((answer, body))
                hook.authorizations.append(self.headers.get("Authorization"))
            if answer == "hang":
                hook.release.wait(30)
                self.close_connection = True
                return
            if answer == "close":
                self.close_connection = True
                return
            self.send_response(int(answer), hook.reason)
            if answer in ("429", "503"):
                self.send_header("Retry-After", hook.retry_after)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

    return Handler


@contextmanager
def webhook(script: list[str], retry_after: str = "1", reason: str | None = None) -> Iterator[Webhook]:
    hook = Webhook(script, retry_after, reason)
    hook.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(hook))
    hook.server.daemon_threads = True
    thread = threading.Thread(target=hook.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield hook
    finally:
        hook.release.set()
        hook.server.shutdown()
        hook.server.server_close()
