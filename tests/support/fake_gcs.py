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
    # Statuses the next requests for one object get instead (one each, in order), as one answer of a flaky
    # front end, by "read NAME" (its media) or "stat NAME" (its metadata): {"read run/30/state/_METADATA": [404]}
    # answers the next read of that object 404 once, though it exists.
    object_faults: dict[str, list[int]] = field(default_factory=dict)
    sessions: dict = field(default_factory=dict)  # resumable uploads: id -> (key, data so far, query)
    buckets: set[str] = field(default_factory=set)  # those that exist besides the ones holding objects
    failing_prefixes: dict[str, int] = field(default_factory=dict)  # every object under one: that status (an outage)
    requests: int = 0
    log: list[str] = field(default_factory=list)  # "read NAME", "stat NAME", "LIST PREFIX", "DELETE NAME"
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
                path = parts.path.removeprefix("/download")  # gcsfs reads media under /download/storage/v1
                segments = path.split("/")  # /storage/v1/b/B/o/NAME, or /storage/v1/b/B/o to list
                if len(segments) == 6 and segments[1:4] == ["storage", "v1", "b"] and segments[5] == "o":
                    self._list(unquote(segments[4]), query)
                    return
                if len(segments) == 5 and segments[1:4] == ["storage", "v1", "b"]:  # the bucket's metadata
                    self._bucket(unquote(segments[4]))
                    return
                if len(segments) != 7 or segments[1:4] != ["storage", "v1", "b"] or segments[5] != "o":
                    self._error(404, "Not Found")
                    return
                bucket, name = unquote(segments[4]), unquote(segments[6])
                kind = "read" if query.get("alt") == ["media"] else "stat"
                with fake.lock:
                    fake.log.append(f"{kind} {name}")
                    queued = fake.object_faults.get(f"{kind} {name}")
                    injected = queued.pop(0) if queued else None
                    if injected is None:
                        injected = next((code for prefix, code in fake.failing_prefixes.items()
                                         if name.startswith(prefix)), None)
                    found = fake.objects.get((bucket, name))
                if injected is not None:
                    self._error(injected, "injected by the test")
                    return
                if found is None:
                    self._error(404, "No such object")
                    return
                if query.get("alt") != ["media"]:  # metadata
                    self._send(200, json.dumps({"bucket": bucket, "name": name, "size": str(len(found[0])),
                                                "generation": str(found[1])}).encode())
                    return
                ranged = self.headers.get("Range", "")
                if ranged.startswith("bytes="):
                    start, _, stop = ranged[6:].partition("-")
                    size = len(found[0])
                    first, last = int(start), min(int(stop) if stop else size - 1, size - 1)
                    body = found[0][first:last + 1]
                    fake.range_reads.append((name, first, last))
                    self._send(206, body, {"x-goog-generation": str(found[1]),
                                           "Content-Range": f"bytes {first}-{last}/{size}"})
                    return
                self._send(200, found[0], {"x-goog-generation": str(found[1])})

            def _bucket(self, bucket: str) -> None:
                with fake.lock:
                    known = bucket in fake.buckets or any(b == bucket for b, _ in fake.objects)
                if not known:
                    self._error(404, "The specified bucket does not exist.")
                    return
                self._send(200, json.dumps({"kind": "storage#bucket", "name": bucket, "id": bucket,
                                            "hierarchicalNamespace": {"enabled": False}}).encode())

            def _list(self, bucket: str, query: dict) -> None:
                prefix = query.get("prefix", [""])[0]
                delimiter = query.get("delimiter", [""])[0]
                limit = int(query.get("maxResults", ["1000"])[0])
                with fake.lock:
                    fake.log.append(f"LIST {prefix}")
                    found = sorted((n, d) for (b, n), d in fake.objects.items() if b == bucket and n.startswith(prefix))
                items, prefixes = [], set()
                for name, (data, generation) in found:
                    rest = name[len(prefix):]
                    if delimiter and delimiter in rest:  # below a "directory": its prefix, once
                        prefixes.add(prefix + rest.split(delimiter, 1)[0] + delimiter)
                        continue
                    items.append({"bucket": bucket, "name": name, "size": str(len(data)),
                                  "generation": str(generation)})
                answer: dict = {"kind": "storage#objects", "items": items[:limit]}
                if prefixes:
                    answer["prefixes"] = sorted(prefixes)
                self._send(200, json.dumps(answer).encode())

            def do_DELETE(self) -> None:
                if self._faulted():
                    return
                segments = urlsplit(self.path).path.split("/")
                key = (unquote(segments[4]), unquote(segments[6])) if len(segments) == 7 else ("", "")
                with fake.lock:
                    fake.log.append(f"DELETE {key[1]}")
                    gone = fake.objects.pop(key, None)
                if gone is None:
                    self._error(404, "No such object")
                    return
                self._send(204, b"")

            def do_POST(self) -> None:
                parts = urlsplit(self.path)
                query = parse_qs(parts.query)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self._faulted():
                    return
                if parts.path.startswith("/upload/session/"):
                    self._upload_chunk(parts.path, body)
                    return
                segments = parts.path.split("/")  # /upload/storage/v1/b/B/o
                if len(segments) != 7 or segments[1:5] != ["upload", "storage", "v1", "b"]:
                    self._error(404, "Not Found")
                    return
                kind = query.get("uploadType", ["media"])[0]
                if kind == "multipart":  # gcsfs's small writes: a JSON part (the name), then the data
                    boundary = self.headers.get("Content-Type", "").split('boundary="', 1)[-1].rstrip('"')
                    head, data = body.split(f"--{boundary}".encode())[1:3]
                    meta = json.loads(head.split(b"\n\n", 1)[1])
                    self._store((unquote(segments[5]), meta["name"]), data.split(b"\n\n", 1)[1][:-1], query)
                    return
                name = query["name"][0] if "name" in query else json.loads(body or b"{}").get("name", "")
                key = (unquote(segments[5]), name)
                if kind == "resumable":  # gcsfs's large writes: a session URL, then PUTs of the data to it
                    with fake.lock:
                        fake.generation += 1
                        session = str(fake.generation)
                        fake.sessions[session] = (key, bytearray(), query)
                    self._send(200, b"{}", {"Location": f"{fake.url}/upload/session/{session}"})
                    return
                self._store(key, body, query)

            def do_PUT(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if not self._faulted():
                    self._upload_chunk(urlsplit(self.path).path, body)

            def _upload_chunk(self, path: str, body: bytes) -> None:  # gcsfs POSTs them, others PUT
                session = path.rsplit("/", 1)[-1]
                with fake.lock:
                    key, data, query = fake.sessions[session]
                    data += body
                total = self.headers.get("Content-Range", "").rpartition("/")[2]
                if total == "*":  # more to come
                    self._send(308, b"", {"Range": f"bytes=0-{len(data) - 1}"})
                    return
                with fake.lock:
                    fake.sessions.pop(session, None)
                self._store(key, bytes(data), query)

            def _store(self, key: tuple[str, str], body: bytes, query: dict) -> None:
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
                self._send(200, json.dumps({"bucket": key[0], "name": key[1], "size": str(len(body)),
                                            "generation": str(generation)}).encode())

        self._httpd = loopback.serve(Handler)
        return self

    def stop(self) -> None:
        loopback.stop(self._httpd)  # type: ignore[arg-type]
