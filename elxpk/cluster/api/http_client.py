"""The HTTP side of the Kubernetes API for elxpk, on urllib3 alone: what `Kube` asks of an API client.

Why not the official client here: `import kubernetes` costs about a second on a CLI start (its package
imports every API class, every model, its kubeconfig loader and, through that, google-auth's transport),
which was most of a `workload status` (#33). `Kube` needs only an authenticated connection pool: a request
serialized (`param_serialize`) and sent (`call_api`), the urllib3 response given back unread. The
kubeconfig is read and resolved by elxpk itself (kubeconfig.py: files inlined, exec plugin run), so what is
left is turning its one cluster and user into TLS settings and a header. `exec` into a pod (websockets)
still uses the official client, imported then: `Settings.to_kubernetes()`.
"""

from __future__ import annotations

import atexit
import base64
import json
import os
import ssl
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlencode

BEARER = "BearerToken"


@dataclass
class Settings:
    """The parts of a client configuration elxpk uses (the official Configuration's attribute names)."""
    host: str
    verify_ssl: bool = True
    ca_cert_data: str | None = None  # PEM
    cert_file: str | None = None  # client certificate and key, as files (what ssl's load_cert_chain takes)
    key_file: str | None = None
    tls_server_name: str | None = None
    proxy: str | None = None
    api_key: dict[str, str] = field(default_factory=dict)
    api_key_prefix: dict[str, str] = field(default_factory=dict)
    refresh_api_key_hook: Callable[[Any], None] | None = None
    retries: Any = None

    def authorization(self) -> str | None:
        if self.refresh_api_key_hook is not None:
            self.refresh_api_key_hook(self)
        key = self.api_key.get(BEARER)
        if not key:
            return None
        prefix = self.api_key_prefix.get(BEARER)
        return f"{prefix} {key}" if prefix else key

    @contextmanager
    def exec_configuration(self) -> Iterator[Any]:
        """`to_kubernetes()` for one exec. Its WebSocket reads the cluster's CA from a file, `ssl_ca_cert`, and
        never `ca_cert_data` (kubernetes.stream.ws_client.create_websocket): without the file, every cluster
        with a CA of its own (every GKE one) failed CERTIFICATE_VERIFY_FAILED. The PEM goes to a file only
        this user can read, removed once the exec is done."""
        configuration = self.to_kubernetes()
        path = None if self.ca_cert_data is None else _private_file(self.ca_cert_data.encode(), at_exit=False)
        configuration.ssl_ca_cert = path
        try:
            yield configuration
        finally:
            if path is not None:
                _remove(path)

    def to_kubernetes(self) -> Any:
        """The same settings as the official client's Configuration (for `exec`, which needs its websockets)."""
        from kubernetes import client

        configuration = type.__call__(client.Configuration)
        for name in ("host", "verify_ssl", "ca_cert_data", "cert_file", "key_file", "tls_server_name", "proxy",
                     "retries"):
            setattr(configuration, name, getattr(self, name))
        configuration.api_key = dict(self.api_key)
        configuration.api_key_prefix = dict(self.api_key_prefix)
        if self.refresh_api_key_hook is not None:
            hook = self.refresh_api_key_hook

            def refresh(cfg: Any) -> None:
                hook(self)
                cfg.api_key = dict(self.api_key)

            configuration.refresh_api_key_hook = refresh
        return configuration


def from_kubeconfig(config: dict) -> Settings:
    """Settings of a kubeconfig resolved by elxpk/cluster/access/kubeconfig.py (one context, its cluster and user,
    file fields already inlined as *-data, exec credentials already given), as kubectl reads them."""
    cluster = config["clusters"][0]["cluster"]
    user = config["users"][0].get("user") or {}
    settings = Settings(host=str(cluster["server"]).rstrip("/"),
                        verify_ssl=cluster.get("insecure-skip-tls-verify") is not True,
                        tls_server_name=cluster.get("tls-server-name"), proxy=cluster.get("proxy-url"))
    if cluster.get("certificate-authority-data"):
        settings.ca_cert_data = base64.b64decode(cluster["certificate-authority-data"]).decode()
    if user.get("token"):
        settings.api_key[BEARER] = f"Bearer {user['token']}"
    elif user.get("username") and user.get("password"):
        import urllib3

        settings.api_key[BEARER] = urllib3.util.make_headers(
            basic_auth=f"{user['username']}:{user['password']}")["authorization"]
    if user.get("client-certificate-data") and user.get("client-key-data"):
        settings.cert_file = _private_file(base64.b64decode(user["client-certificate-data"]))
        settings.key_file = _private_file(base64.b64decode(user["client-key-data"]))
    return settings


def _private_file(data: bytes, *, at_exit: bool = True) -> str:
    """A file only this user can read (mkstemp: 0600), removed at exit unless the caller removes it (ssl loads
    a client certificate from files only, and the official client's WebSocket a CA)."""
    fd, path = tempfile.mkstemp(prefix="elxpk-tls-")
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    if at_exit:
        atexit.register(_remove, path)
    return path


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


class _Rest:
    def __init__(self, settings: Settings) -> None:
        import urllib3

        pool: dict[str, Any] = {"num_pools": 4, "maxsize": 4, "retries": settings.retries}
        if settings.host.startswith("https"):
            pool.update(cert_reqs=ssl.CERT_REQUIRED if settings.verify_ssl else ssl.CERT_NONE,
                        ca_cert_data=settings.ca_cert_data, cert_file=settings.cert_file,
                        key_file=settings.key_file)
            if settings.ca_cert_data is None and settings.verify_ssl:
                import certifi

                pool["ca_certs"] = certifi.where()
            if settings.tls_server_name:
                pool["server_hostname"] = settings.tls_server_name
            if not settings.verify_ssl:
                pool["assert_hostname"] = False
        if settings.proxy and settings.proxy.startswith("socks"):
            from urllib3.contrib.socks import SOCKSProxyManager

            self.pool_manager: Any = SOCKSProxyManager(settings.proxy, **pool)
        elif settings.proxy:
            self.pool_manager = urllib3.ProxyManager(settings.proxy, **pool)
        else:
            self.pool_manager = urllib3.PoolManager(**pool)


class Answer:
    """What `call_api` gives back: the urllib3 response (`response`, unread), and the official client's
    RESTResponse reads of it (`read`, `data`, `status`, `reason`, `headers`, `getheaders`)."""

    def __init__(self, response: Any) -> None:
        self.response = response
        self.status, self.reason, self.headers = response.status, response.reason, response.headers
        self.data: bytes | None = None

    def read(self) -> bytes:
        if self.data is None:
            self.data = self.response.data
        return self.data

    def getheaders(self) -> Any:
        return self.response.headers

    def getheader(self, name: str, default: str | None = None) -> str | None:
        return self.response.headers.get(name, default)


class ApiClient:
    """The two calls `Kube` makes of the official ApiClient, with its argument order."""

    def __init__(self, settings: Settings) -> None:
        self.configuration = settings
        self.rest_client = _Rest(settings)

    def param_serialize(self, method: str, resource_path: str, query_params: list | None = None,
                        header_params: dict | None = None, body: Any = None, auth_settings: list | None = None,
                        **_: Any) -> tuple:
        headers = dict(header_params or {})
        if auth_settings and BEARER in auth_settings:
            authorization = self.configuration.authorization()
            if authorization:
                headers["authorization"] = authorization
        url = self.configuration.host + resource_path
        if query_params:
            url += "?" + urlencode([(k, _text(v)) for k, v in query_params], quote_via=quote)
        return method, url, headers, body, None

    def call_api(self, method: str, url: str, header_params: dict | None = None, body: Any = None,
                 post_params: Any = None, _request_timeout: Any = None) -> Answer:
        import urllib3

        data = None if body is None else json.dumps(body).encode()
        timeout = None
        if isinstance(_request_timeout, tuple):
            timeout = urllib3.Timeout(connect=_request_timeout[0], read=_request_timeout[1])
        elif _request_timeout is not None:
            timeout = urllib3.Timeout(total=_request_timeout)
        response = self.rest_client.pool_manager.request(method, url, body=data, headers=header_params or {},
                                                         preload_content=False, timeout=timeout)
        return Answer(response)


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
