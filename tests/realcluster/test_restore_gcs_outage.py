"""A storage outage during a restore on `gs://` (issue 41): checkpoints on fake-gcs-server, read through a
loopback proxy that fails reads: all of them, only orbax's array reads, reads that hang, a burst of 503s.
Never a step set aside, never 70; once storage answers, the run resumes from the newest valid step.

Only fake-gcs-server runs (from `tools/testcluster build`), not the cluster. The proxy below is the test's
own: it forwards every request unchanged to the emulator, except the reads its mode fails (documented in
docs/testing.md). Both clients go through it: gcsfs (listings, digests, orbax's metadata) and tensorstore
(orbax's arrays, `ocdbt` objects). The failures are answered as GCS answers them: a 403 (a grant or token
gone: neither client retries it) and a 503 (gcsfs retries it 6 times, tensorstore up to 32).
"""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
import requests

from tests.support.gcs_server import fake_gcs_server

REPO = Path(__file__).resolve().parents[2]
BUCKET = "restore-outage"
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection"}


class FailingProxy:
    """Forwards to `upstream`; `mode` picks the reads it fails: "" none, "all" every GET (listings, metadata
    and objects), "arrays" only reads of orbax's array objects (`ocdbt` in the object name, tensorstore's),
    "burst:N" the next N array reads with 503, "hang" array reads held until the mode changes."""

    def __init__(self, upstream: str) -> None:
        self.upstream = urlsplit(upstream)
        self.mode, self.status, self.failed = "", 403, 0
        self.lock = threading.Lock()
        self.released = threading.Event()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _forward(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.command == "GET" and proxy.hangs(unquote(self.path)):
                    proxy.released.wait(300)  # a read that never answers, until the test moves on
                if self.command == "GET" and proxy.fails(unquote(self.path)):
                    data = json.dumps({"error": {"code": proxy.status, "message": "injected by the test's proxy"}})
                    self._answer(proxy.status, {"Content-Type": "application/json"}, data.encode())
                    return
                conn = http.client.HTTPConnection(proxy.upstream.hostname, proxy.upstream.port, timeout=60)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP | {"host"}}
                conn.request(self.command, self.path, body=body or None, headers=headers)
                answer = conn.getresponse()
                data = answer.read()
                self._answer(answer.status, {k: v for k, v in answer.getheaders()
                                             if k.lower() not in HOP_BY_HOP | {"content-length"}}, data)
                conn.close()

            def _answer(self, status: int, headers: dict[str, str], data: bytes) -> None:
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _forward

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request: object, client_address: object) -> None:
                pass  # a client that closed its connection mid-answer (a retry, an ended process)

        self.server = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @staticmethod
    def _array(path: str) -> bool:
        return "/o/" in path and "ocdbt" in path.split("/o/", 1)[1]

    def hangs(self, path: str) -> bool:
        with self.lock:
            return self.mode == "hang" and self._array(path)

    def fails(self, path: str) -> bool:
        with self.lock:
            mode = self.mode
            if mode == "all":
                return True
            array = self._array(path)
            if mode == "arrays":
                return array
            if mode.startswith("burst:") and array and self.failed < int(mode.split(":")[1]):
                self.failed += 1
                return True
            return False

    def set(self, mode: str, status: int = 403) -> None:
        with self.lock:
            self.mode, self.status, self.failed = mode, status, 0
            if mode == "hang":
                self.released.clear()
            else:
                self.released.set()


@pytest.fixture(scope="module")
def gcs(tmp_path_factory: pytest.TempPathFactory):
    """fake-gcs-server (memory backend, one bucket) and the proxy in front of it."""
    data = tmp_path_factory.mktemp("gcs")
    (data / BUCKET).mkdir()
    with fake_gcs_server(data) as upstream:
        proxy = FailingProxy(upstream)
        yield upstream, proxy
        proxy.server.shutdown()


def _objects(upstream: str) -> list[str]:
    """The bucket's objects, but the writer's lease (trainer/elastic/writer_lease.py): a process's, not a step's."""
    answer = requests.get(f"{upstream}/storage/v1/b/{BUCKET}/o", timeout=30).json()
    return sorted(item["name"] for item in answer.get("items", []) if not item["name"].endswith("elxpk-writer.json"))


def _trainer(proxy: FailingProxy, cwd: Path, steps: int, *flags: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "STORAGE_EMULATOR_HOST": proxy.url, "TENSORSTORE_GCS_HTTP_URL": proxy.url,
           "GOOGLE_AUTH_TOKEN_FOR_TESTING": "anon", "PYTHONPATH": str(REPO)}
    env = {k: v for k, v in env.items() if k != "XLA_FLAGS" and not k.startswith("ELXPK_")}
    return subprocess.run([sys.executable, "-m", "trainer", "--run-dir", str(cwd / "run"), "--steps", str(steps),
                           "--checkpoint-period", "2", "--checkpoint-dir", f"gs://{BUCKET}/run/ckpt", *flags],
                          env=env, cwd=cwd, capture_output=True, text=True, timeout=400, check=False)


def _restores(cwd: Path) -> list[int]:
    events = [json.loads(line) for line in (cwd / "run" / "events.jsonl").read_text().splitlines()]
    return [e["step"] for e in events if e["event"] == "restore_done"]


@pytest.mark.slow
def test_an_outage_during_a_restore_sets_no_step_aside_and_the_run_resumes_when_storage_is_back(gcs, tmp_path):
    upstream, proxy = gcs
    proxy.set("")
    first = _trainer(proxy, tmp_path, 4)
    assert first.returncode == 0, first.stderr[-3000:]
    saved = _objects(upstream)
    assert any(name.startswith("run/ckpt/4/") for name in saved) and any(n.startswith("run/ckpt/2/") for n in saved)

    # Every read denied (a grant or a token gone), then only orbax's array reads: 3 tries each, then 75.
    for mode in ("all", "arrays"):
        proxy.set(mode, 403)
        failed = _trainer(proxy, tmp_path, 6)
        assert failed.returncode == 75, (mode, failed.stderr[-3000:])
        (line,) = [x for x in failed.stderr.splitlines() if x.startswith("error: ")]
        if mode == "all":  # the first read at the start fails (a listing): the restart retries it
            assert line.startswith("error: retryable (exit 75): storage access denied: OSError: Forbidden: "), line
        else:  # orbax's reads of step 4: the restore's 3 tries, then one line
            assert line.startswith("error: restore: reading step 4 failed 3 times (storage access denied: "
                                   "ValueError: PERMISSION_DENIED: "), line
        assert _objects(upstream) == saved, mode  # nothing set aside, nothing copied into a quarantine

    # Array reads that never answer: the restore's deadline ends the process with 76 (retryable), steps kept.
    proxy.set("hang")
    hung = _trainer(proxy, tmp_path, 6, "--restore-timeout-seconds", "20")
    assert hung.returncode == 76, hung.stderr[-3000:]
    assert "error: stalled: the checkpoint restore did not finish within 20s; exit 76 (retryable)" in hung.stderr
    assert _objects(upstream) == saved

    # A burst of 503s on the array reads, within the clients' and the restore's retries: step 4, whole.
    proxy.set("burst:3", 503)
    resumed = _trainer(proxy, tmp_path, 6)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert proxy.failed == 3
    assert _restores(tmp_path)[-1] == 4
    assert not [n for n in _objects(upstream) if "elxpk-quarantine" in n]
