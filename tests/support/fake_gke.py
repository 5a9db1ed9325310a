"""A local stand-in for Google's Container API (REST, v1) and OAuth2 token endpoint, for the GKE credential path.

- GET /v1/projects/{p}/locations/{l}/clusters/{c}: a Cluster in proto-JSON (endpoint, masterAuth CA);
  404 NOT_FOUND and 403 PERMISSION_DENIED in Google's error shape;
- POST /token: the OAuth2 refresh-token grant, handing out numbered access tokens;
- `unavailable`: that many cluster reads answer 503 UNAVAILABLE first, as an overloaded API does.
google-cloud-container's ClusterManagerClient (transport="rest") and google.auth's authorized-user
credentials talk to it unchanged; only the endpoints are pointed at loopback.
"""

from __future__ import annotations

import base64
import json
import re
import socket
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from tests.support import loopback


@dataclass
class FakeGke:
    clusters: dict[str, dict] = field(default_factory=dict)  # "projects/P/locations/L/clusters/C" -> Cluster
    token_lifetime_s: int = 3600
    issued: list[str] = field(default_factory=list)
    requests: list[tuple[str, str, str]] = field(default_factory=list)  # (method, path, authorization)
    denied: bool = False
    unavailable: int = 0
    _httpd: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def add_cluster(self, project: str, location: str, name: str, *, endpoint: str, ca_pem: bytes) -> None:
        self.clusters[f"projects/{project}/locations/{location}/clusters/{name}"] = {
            "name": name,
            "location": location,
            "endpoint": endpoint,
            "status": 2,  # RUNNING
            "masterAuth": {"clusterCaCertificate": base64.b64encode(ca_pem).decode()},
            "controlPlaneEndpointsConfig": {
                "dnsEndpointConfig": {"endpoint": f"gke-{name}.{location}.example.invalid"},
            },
        }

    def user_credentials(self):  # noqa: ANN201
        """google.oauth2 user credentials (no token yet) whose refresh goes to this fake's /token."""
        import google.oauth2.credentials

        return google.oauth2.credentials.Credentials(
            token=None, refresh_token="1//fake-refresh", token_uri=f"{self.url}/token",
            client_id="fake-client.apps.example", client_secret="fake-secret")

    def write_service_account(self, path: Path) -> Path:
        """A service-account key file for application-default credentials; its token_uri is this fake.

        (An authorized-user file would not do: google.auth always sends those to Google's own endpoint.)
        """
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa

        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
        path.write_text(json.dumps({
            "type": "service_account", "project_id": "proj", "private_key_id": "k1", "private_key": pem,
            "client_email": "trainer@proj.iam.gserviceaccount.com", "client_id": "1",
            "token_uri": f"{self.url}/token",
        }))
        return path

    def start(self) -> FakeGke:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def setup(self) -> None:
                super().setup()
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # no 40 ms Nagle stalls

            def _send(self, code: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _error(self, code: int, status: str, message: str) -> None:
                self._send(code, {"error": {"code": code, "message": message, "status": status}})

            def do_POST(self) -> None:
                parts = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                form = parse_qs(self.rfile.read(length).decode())
                fake.requests.append(("POST", parts.path, self.headers.get("Authorization", "")))
                grants = (["refresh_token"], ["urn:ietf:params:oauth:grant-type:jwt-bearer"])
                if parts.path != "/token" or form.get("grant_type") not in grants:
                    self._error(400, "INVALID_ARGUMENT", "unsupported grant")
                    return
                token = f"ya29.fake-{len(fake.issued) + 1}"
                fake.issued.append(token)
                self._send(200, {"access_token": token, "expires_in": fake.token_lifetime_s,
                                 "token_type": "Bearer", "scope": "https://www.googleapis.com/auth/cloud-platform"})

            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                auth = self.headers.get("Authorization", "")
                fake.requests.append(("GET", parts.path, auth))
                match = re.fullmatch(r"/v1/(projects/[^/]+/locations/[^/]+/clusters/[^/]+)", parts.path)
                if not match:
                    self._error(404, "NOT_FOUND", "Not found")
                elif not _accepted(auth.removeprefix("Bearer "), fake.issued):
                    self._error(401, "UNAUTHENTICATED", "Request had invalid authentication credentials.")
                elif fake.unavailable > 0:
                    fake.unavailable -= 1
                    self._error(503, "UNAVAILABLE", "The service is currently unavailable.")
                elif fake.denied:
                    self._error(403, "PERMISSION_DENIED",
                                f"Required \"container.clusters.get\" permission(s) for \"{match.group(1)}\".")
                elif match.group(1) not in fake.clusters:
                    self._error(404, "NOT_FOUND", f"Not found: {match.group(1)}.")
                else:
                    self._send(200, fake.clusters[match.group(1)])

        self._httpd = loopback.serve(Handler)
        return self

    def stop(self) -> None:
        loopback.stop(self._httpd)


def _accepted(token: str, issued: list[str]) -> bool:
    """A token from /token, or a self-signed JWT (GAPIC clients sign one with a service-account key)."""
    if token in issued:
        return True
    parts = token.split(".")
    if len(parts) != 3:
        return False
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except ValueError:
        return False
    return str(claims.get("iss", "")).endswith(".iam.gserviceaccount.com")
