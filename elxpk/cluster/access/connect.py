"""Turn a ClusterTarget into a Kube (an API client), without subprocesses and without writing any kubeconfig.

- GKE: google-cloud-container's ClusterManagerClient.get_cluster gives the endpoint and CA; the bearer token
  comes from google.auth (application-default credentials unless injected) and is refreshed before it
  expires, on every request, through the client's refresh hook.
- Anything else: a kubeconfig file and context, read bounded with everything it names resolved by elxpk
  (elxpk/cluster/access/kubeconfig.py), then turned into TLS settings and a header by http_client.py (no official
  client: its import was most of a CLI start).
"""

from __future__ import annotations

import base64
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from elxpk.cluster.access.defaults import resolve_target
from elxpk.cluster.access.exec_credential import EXPIRY_SKEW_S, Credential, ExecPlugin, run_plugin
from elxpk.cluster.access.kubeconfig import kubeconfig_files, select
from elxpk.cluster.access.target import ClusterTarget
from elxpk.cluster.api.http_client import ApiClient, Settings, from_kubeconfig
from elxpk.cluster.api.kube import Kube
from elxpk.errors import ClusterError, ElxpkError, NoCredentials, NotFoundError, UsageError
from elxpk.retry_policy import REQUESTS, transient_status

CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform"
# Points the Container API client elsewhere (a private endpoint, or a local fake in tests).
ENDPOINT_ENV = "ELXPK_CONTAINER_API_ENDPOINT"


def connect(target: ClusterTarget, *, credentials: Any = None, container_endpoint: str | None = None,
            sleep: Callable[[float], None] = time.sleep, environ: Mapping[str, str] = os.environ,
            resolved: bool = False) -> Kube:
    """A ready Kube for `target`. `credentials` (google.auth) are injectable; default: google.auth.default()."""
    if not resolved:
        target = resolve_target(target, environ=environ)
    if target.kubeconfig or target.context or target.default_kubeconfig:
        configuration = _kubeconfig_configuration(target, environ)
    else:
        endpoint = container_endpoint or environ.get(ENDPOINT_ENV) or None
        configuration = _gke_configuration(target, credentials, endpoint, sleep)
    import urllib3

    # Retries are Kube's job: bounded, with backoff, never for a POST. No redirect is followed: the 3xx comes
    # back to Kube, which names where it pointed (a proxy's login page, another host that would get the
    # credentials); urllib3 would otherwise follow it, or end in "too many redirects".
    configuration.retries = urllib3.util.Retry(total=0, redirect=False)

    return Kube(ApiClient(configuration), host=configuration.host, sleep=sleep)


def _kubeconfig_configuration(target: ClusterTarget, environ: Mapping[str, str]) -> Any:
    """Client settings from the kubeconfig: elxpk reads every file it names and runs its exec plugin
    (elxpk/cluster/access/kubeconfig.py), and http_client turns that one resolved context into TLS settings and a
    header (the official client's loader costs most of a CLI start in imports: google-auth among them)."""
    selected = select(kubeconfig_files(target.kubeconfig, environ), target.context)
    credential = run_plugin(selected.plugin, environ=environ) if selected.plugin else None
    if credential is not None:
        _give(selected.config["users"][0]["user"], credential)
    try:
        configuration = from_kubeconfig(selected.config)
    except Exception as exc:  # noqa: BLE001 - user data fails to parse in many types
        # ValueError (base64, PEM), TypeError/AttributeError/KeyError (a list where a mapping belongs):
        # each is the kubeconfig's fault.
        text = (str(exc).splitlines() or [type(exc).__name__])[0]
        raise UsageError(f"{selected.shown} (context {selected.context!r}): {text}; fix the kubeconfig or pick "
                         "another with --kubeconfig/--context") from None
    if selected.plugin is not None and credential is not None and credential.token and credential.expires:
        configuration.refresh_api_key_hook = _refreshing(selected.plugin, credential, environ)
    return configuration


def _give(user: dict[str, Any], credential: Credential) -> None:
    """Put what the exec plugin printed where the kubeconfig's own data would be."""
    if credential.token:
        user["token"] = credential.token
    else:
        for field, pem in (("client-certificate-data", credential.client_certificate),
                           ("client-key-data", credential.client_key)):
            user[field] = base64.b64encode(str(pem).encode()).decode()


def _refreshing(plugin: ExecPlugin, credential: Credential, environ: Mapping[str, str]) -> Callable[[Any], None]:
    """The client's refresh hook: run the plugin again (bounded) when its token is about to expire, so a long
    `wait` never sends a stale one."""
    state = {"credential": credential}

    def refresh(cfg: Any) -> None:
        expires = state["credential"].expires
        if expires is not None and time.time() >= expires - EXPIRY_SKEW_S:
            state["credential"] = run_plugin(plugin, environ=environ)
            cfg.api_key["BearerToken"] = f"Bearer {state['credential'].token}"

    return refresh


def _gke_configuration(target: ClusterTarget, credentials: Any, endpoint: str | None,
                       sleep: Callable[[float], None] = time.sleep) -> Any:
    import google.auth
    import google.auth.exceptions
    from google.auth.transport.requests import Request

    if credentials is None:
        try:
            credentials, _ = google.auth.default(scopes=[CLOUD_PLATFORM])
        except google.auth.exceptions.DefaultCredentialsError:
            from elxpk_storage.gcs_auth import how_to_authenticate  # lazy: as google.auth, only for GKE

            raise NoCredentials(f"no Google credentials found: {how_to_authenticate()} (or use --kubeconfig)") from None
    cluster = _get_cluster(target, credentials, endpoint, sleep)
    host = cluster.endpoint or cluster.control_plane_endpoints_config.dns_endpoint_config.endpoint
    if not host:
        raise ClusterError(f"GKE cluster {target.cluster} has no endpoint yet (is it still being created?)")
    configuration = Settings(host=f"https://{host}")
    ca = cluster.master_auth.cluster_ca_certificate
    if ca:
        configuration.ca_cert_data = base64.b64decode(ca).decode()
    configuration.api_key_prefix["BearerToken"] = "Bearer"
    request = Request()

    def refresh_token(cfg: Any) -> None:
        # google.auth marks a token invalid shortly before its expiry, so a long `wait` never sends a stale one.
        if not credentials.valid:
            try:
                credentials.refresh(request)
            except google.auth.exceptions.RefreshError as exc:
                raise ClusterError(f"could not refresh Google credentials: {exc}") from None
        cfg.api_key["BearerToken"] = credentials.token

    configuration.refresh_api_key_hook = refresh_token
    refresh_token(configuration)
    return configuration


def _get_cluster(target: ClusterTarget, credentials: Any, endpoint: str | None,
                 sleep: Callable[[float], None]) -> Any:
    """The cluster as the Container API describes it, tried under elxpk's one retry policy (no connection,
    408, 429, 5xx; elxpk/retry_policy.py) instead of the client's own default (0.1 s x 1.3 for 20 s, on
    503 and 504 only)."""
    import google.auth.exceptions
    from google.api_core import exceptions as gexc
    from google.api_core.client_options import ClientOptions
    from google.cloud import container_v1

    options = ClientOptions(api_endpoint=endpoint) if endpoint else None
    manager = container_v1.ClusterManagerClient(credentials=credentials, transport="rest", client_options=options)
    name = f"projects/{target.project}/locations/{target.location}/clusters/{target.cluster}"
    where = f"cluster {target.cluster} (project {target.project}, location {target.location})"
    tries = REQUESTS.timed_tries(sleep, 60.0)
    for attempt in tries:
        try:
            return manager.get_cluster(name=name, timeout=tries.timeout(), retry=None)
        except (gexc.GoogleAPICallError, gexc.RetryError, google.auth.exceptions.RefreshError, OSError) as exc:
            code = getattr(exc, "code", None) if isinstance(exc, gexc.GoogleAPICallError) else None
            unanswered = isinstance(exc, (gexc.RetryError, OSError))
            if (unanswered or (code is not None and transient_status(int(code)))) and tries.again():
                continue
            raise _failure(exc, where, attempt) from None
    raise AssertionError("unreachable")


def _failure(exc: Exception, where: str, attempts: int) -> ElxpkError:
    """The one line for a Container API failure, after `attempts` tries."""
    import google.auth.exceptions
    from google.api_core import exceptions as gexc

    tried = f" after {attempts} attempts" if attempts > 1 else ""
    if isinstance(exc, gexc.NotFound):
        return NotFoundError(f"GKE {where} not found: check --project, --zone/--region and --cluster")
    if isinstance(exc, (gexc.PermissionDenied, gexc.Forbidden)):
        return ClusterError(f"permission denied reading GKE {where}: you need container.clusters.get "
                            "(e.g. roles/container.clusterViewer) on the project")
    if isinstance(exc, (gexc.Unauthenticated, gexc.Unauthorized)):
        return ClusterError(f"the Container API rejected the Google credentials for {where}: refresh them "
                            "(`gcloud auth application-default login`) or check GOOGLE_APPLICATION_CREDENTIALS")
    if isinstance(exc, google.auth.exceptions.RefreshError):
        return ClusterError(f"could not refresh Google credentials: {exc}")
    if isinstance(exc, gexc.GoogleAPICallError):
        return ClusterError(f"the Container API failed to describe {where}{tried}: {exc.message}")
    return ClusterError(f"cannot reach the Container API for {where}{tried}: {exc}")
