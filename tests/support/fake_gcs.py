"""A Cloud Storage JSON API endpoint for tests (what STORAGE_EMULATOR_HOST points at): media download with
x-goog-generation (and Range), object metadata, listing by prefix, media upload with ifGenerationMatch (412
on a mismatch; 0 = must not exist). `faults`: statuses the next requests get instead (one each, in order;
None serves that one), as an overloaded or failing Cloud Storage would answer."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, unquote, urlsplit

from tests.support import loopback


@dataclass
class FakeGcs:
    objects: dict[tuple[str, str], tuple[bytes, int]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    generation: int = 1000
    preconditions_failed: int = 0
    range_reads: list = field(default_factory=list)  # (name, first, last): what ranged reads asked for
    faults: list[int | None] = field(default_factory=list)
    requests: int = 0
    _httpd: object = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"  # type: ignore[attr-defined]

    def start(self) -> FakeGcs:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def _send(self, code: int, body: bytes, headers: dict | None = None) -> None:
                self.send_response(code)
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _error(self, code: int, message: str) -> None:
                self._send(code, json.dumps({"error": {"code": code, "message": message}}).encode())

            def _faulted(self) -> bool:
                with fake.lock:
                    fake.requests += 1
                    code = fake.faults.pop(0) if fake.faults else None
                if code is not None:
                    self._error(code, "Backend Error")
                return code is not None

            def do_GET(self) -> None:
                if self._faulted():
                    return
                parts = urlsplit(self.path)
                query = parse_qs(parts.query)
                segments = parts.path.split("/")  # /storage/v1/b/B/o/NAME, or /storage/v1/b/B/o to list
                if len(segments) == 6 and segments[1:4] == ["storage", "v1", "b"] and segments[5] == "o":
                    self._list(unquote(segments[4]), query)
                    return
                if len(segments) != 7 or segments[1:4] != ["storage", "v1", "b"] or segments[5] != "o":
                    self._error(404, "Not Found")
                    return
                bucket, name = unquote(segments[4]), unquote(segments[6])
                with fake.lock:
                    found = fake.objects.get((bucket, name))
                if found is None:
                    self._error(404, "No such object")
                    return
                if query.get("alt") != ["media"]:  # metadata
                    self._send(200, json.dumps({"bucket": bucket, "name": name, "size": str(len(found[0])),
                                                "generation": str(found[1])}).encode())
                    return
                ranged = self.headers.get("Range", "")
                if ranged.startswith("bytes="):
                    first, _, last = ranged[6:].partition("-")
                    body = found[0][int(first):int(last) + 1]
                    fake.range_reads.append((name, int(first), int(last)))
                    self._send(206, body, {"x-goog-generation": str(found[1])})
                    return
                self._send(200, found[0], {"x-goog-generation": str(found[1])})

            def _list(self, bucket: str, query: dict) -> None:
                prefix = query.get("prefix", [""])[0]
                limit = int(query.get("maxResults", ["1000"])[0])
                with fake.lock:
                    names = sorted(n for b, n in fake.objects if b == bucket and n.startswith(prefix))[:limit]
                self._send(200, json.dumps({"items": [{"name": n} for n in names]}).encode())

            def do_POST(self) -> None:
                parts = urlsplit(self.path)
                query = parse_qs(parts.query)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self._faulted():
                    return
                segments = parts.path.split("/")  # /upload/storage/v1/b/B/o
                if len(segments) != 7 or segments[1:5] != ["upload", "storage", "v1", "b"]:
                    self._error(404, "Not Found")
                    return
                key = (unquote(segments[5]), query["name"][0])
                with fake.lock:
                    current = fake.objects.get(key)
                    wanted = query.get("ifGenerationMatch")
                    if wanted is not None and int(wanted[0]) != (current[1] if current else 0):
                        fake.preconditions_failed += 1
                        self._error(412, "At least one of the pre-conditions you specified did not hold.")
                        return
                    fake.generation += 1
                    fake.objects[key] = (body, fake.generation)
                    generation = fake.generation
                self._send(200, json.dumps({"bucket": key[0], "name": key[1], "generation": str(generation)}).encode())

        self._httpd = loopback.serve(Handler)
        return self

    def stop(self) -> None:
        loopback.stop(self._httpd)  # type: ignore[arg-type]
