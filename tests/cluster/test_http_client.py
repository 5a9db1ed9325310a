"""http_client.py, the urllib3 client `status` starts with instead of the official one (#33): what a resolved
kubeconfig becomes, checked on real sockets on 127.0.0.1 (a proxy that sees the request, a server that sees
the Authorization header). TLS with a CA and client certificates is what every real-cluster test connects
with (tools/testcluster's kubeconfig); exec into a pod still goes through the official client."""

from __future__ import annotations

import base64
import http.server
import os
import stat
import threading
from collections.abc import Iterator

import pytest

from elxpk.cluster.api.http_client import ApiClient, from_kubeconfig


@pytest.fixture
def recorder() -> Iterator[tuple[str, list]]:
    """An HTTP server that answers {} and records (request line, Authorization) of each request."""
    seen: list = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            seen.append((self.requestline, self.headers.get("Authorization")))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", seen
    server.shutdown()
    server.server_close()


def _config(cluster: dict, user: dict) -> dict:
    return {"clusters": [{"name": "c", "cluster": cluster}], "users": [{"name": "u", "user": user}],
            "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}], "current-context": "x"}


def _get(client: ApiClient, path: str, query: list | None = None) -> bytes:
    answer = client.call_api(*client.param_serialize("GET", path, query_params=query, auth_settings=["BearerToken"]))
    return answer.read()


def test_token_and_query_reach_the_server(recorder) -> None:
    url, seen = recorder
    client = ApiClient(from_kubeconfig(_config({"server": url}, {"token": "t0k"})))
    assert _get(client, "/api/v1/pods", [("labelSelector", "a in (x,y)"), ("watch", True)]) == b"{}"
    assert seen == [("GET /api/v1/pods?labelSelector=a%20in%20%28x%2Cy%29&watch=true HTTP/1.1", "Bearer t0k")]


def test_basic_auth_when_there_is_no_token(recorder) -> None:
    url, seen = recorder
    _get(ApiClient(from_kubeconfig(_config({"server": url}, {"username": "u", "password": "p"}))), "/version")
    assert seen[0][1] == "Basic " + base64.b64encode(b"u:p").decode()


def test_proxy_url_carries_the_request(recorder) -> None:
    """The kubeconfig's proxy-url: the request goes to the proxy, naming the API server in full."""
    url, seen = recorder
    settings = from_kubeconfig(_config({"server": "http://apiserver.invalid:6443", "proxy-url": url}, {"token": "t"}))
    _get(ApiClient(settings), "/api/v1/namespaces")
    assert seen == [("GET http://apiserver.invalid:6443/api/v1/namespaces HTTP/1.1", "Bearer t")]


def test_client_certificate_files_are_private() -> None:
    pem = base64.b64encode(b"-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n").decode()
    settings = from_kubeconfig(_config({"server": "https://h:6443"},
                                       {"client-certificate-data": pem, "client-key-data": pem}))
    for path in (settings.cert_file, settings.key_file):
        assert path is not None and stat.S_IMODE(os.stat(path).st_mode) == 0o600
