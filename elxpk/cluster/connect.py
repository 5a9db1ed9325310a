"""Turn a ClusterTarget into a Kube (an API client), without subprocesses and without writing any kubeconfig.

- GKE: google-cloud-container's ClusterManagerClient.get_cluster gives the endpoint and CA; the bearer token
  comes from google.auth (application-default credentials unless injected) and is refreshed before it
  expires, on every request, through the client's refresh hook.
- Anything else: a kubeconfig file and context, loaded read-only (persist_config=False).
"""

from __future__ import annotations

import base64
import logging
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from elxpk.bounded_read import KUBECONFIG_BYTES, KUBECONFIG_VALUES, read_input, yaml_values_problem
from elxpk.cluster.defaults import resolve_target
from elxpk.cluster.kube import Kube
from elxpk.cluster.target import ClusterTarget
from elxpk.errors import ClusterError, NotFoundError, UsageError

CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform"
# Points the Container API client elsewhere (a private endpoint, or a local fake in tests).
ENDPOINT_ENV = "ELXPK_CONTAINER_API_ENDPOINT"


def connect(target: ClusterTarget, *, credentials: Any = None, container_endpoint: str | None = None,
            sleep: Callable[[float], None] = time.sleep, environ: Mapping[str, str] = os.environ,
            resolved: bool = False) -> Kube:
    """A ready Kube for `target`. `credentials` (google.auth) are injectable; default: google.auth.default()."""
    if not resolved:
        target = resolve_target(target, environ=environ)
    if target.kubeconfig or target.context:
        configuration = _kubeconfig_configuration(target)
    else:
        endpoint = container_endpoint or environ.get(ENDPOINT_ENV) or None
        configuration = _gke_configuration(target, credentials, endpoint)
    configuration.retries = 0  # retries are Kube's job: bounded, with backoff, never for a POST
    from kubernetes import client

    return Kube(client.ApiClient(configuration), host=configuration.host, sleep=sleep)


def _kubeconfig_configuration(target: ClusterTarget) -> Any:
    from kubernetes import client, config

    path = os.path.expanduser(target.kubeconfig) if target.kubeconfig else None
    check_kubeconfig(path or _default_kubeconfig(), given=path is not None)
    configuration = type.__call__(client.Configuration)
    shown = target.kubeconfig or "the default kubeconfig"
    with _library_log() as logged:
        try:
            config.load_kube_config(config_file=path, context=target.context, client_configuration=configuration,
                                    persist_config=False)
        except Exception as exc:  # noqa: BLE001 - the library's parse of user data fails in many types
            # ConfigException, and ValueError (base64), TypeError/AttributeError/KeyError (a list where a
            # mapping belongs), OSError (a certificate file named in it): each is the kubeconfig's fault.
            text = (str(exc).splitlines() or [type(exc).__name__])[0]
            raise UsageError(f"--kubeconfig/--context ({shown}): {text}; fix the kubeconfig or pick another "
                             "with --kubeconfig/--context") from None
    if logged:  # the library logs (and swallows) a failed exec credential plugin, then goes on without one
        raise UsageError(f"--kubeconfig/--context ({shown}): the user's exec credential plugin failed: "
                         f"{logged[0]}; run it by hand to see why")
    return configuration


def _default_kubeconfig() -> str | None:
    """The file the kubernetes library reads when no --kubeconfig is given: the first of $KUBECONFIG, else
    ~/.kube/config (None when neither exists: the library says so itself)."""
    first = os.environ.get("KUBECONFIG", "").split(os.pathsep)[0]
    path = os.path.expanduser(first or "~/.kube/config")
    return path if os.path.exists(path) else None


def check_kubeconfig(path: str | None, *, given: bool = True) -> None:
    """The kubeconfig is a bounded, regular, UTF-8 YAML file whose top level is a mapping; UsageError (exit
    2) otherwise. The kubernetes library reads it unbounded and fails in its own types on bad content."""
    if path is None:
        return
    import yaml


    flag = "--kubeconfig" if given else "kubeconfig"
    text = str(read_input(path, flag=flag, limit=KUBECONFIG_BYTES))
    too_many = yaml_values_problem(text, limit=KUBECONFIG_VALUES)
    if too_many:
        raise UsageError(f"{flag} {path}: {too_many} for a kubeconfig; check what produced it")
    try:
        data = yaml.load(str(text), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise UsageError(f"{flag} {path}: not valid YAML{where}; fix the file") from None
    except (RecursionError, ValueError):  # ValueError: a constructor's own, e.g. an integer of 5,000 digits
        raise UsageError(f"{flag} {path}: nested too deeply or holding a value YAML cannot read; fix the "
                         "file") from None
    if not isinstance(data, dict):
        raise UsageError(f"{flag} {path}: not a kubeconfig (its top level is not a mapping of clusters, users "
                         "and contexts)")
    for key in ("clusters", "users", "contexts"):
        entries = data.get(key)
        if entries is not None and (not isinstance(entries, list)
                                    or not all(isinstance(e, dict) for e in entries)):
            raise UsageError(f"{flag} {path}: {key} must be a list of named entries")


class _library_log:
    """Collect what libraries log through the root logger while loading (the kubernetes client logs a failed
    exec plugin with logging.error): nothing reaches stderr as a stray `ERROR:root:` line."""

    def __enter__(self) -> list[str]:
        class Collect(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                if record.levelno >= logging.ERROR:
                    messages.append((record.getMessage().splitlines() or [""])[0])

        messages: list[str] = []
        self._root = logging.getLogger()
        self._handler = Collect()
        self._root.addHandler(self._handler)  # a handler present: logging.error() adds no stderr handler
        return messages

    def __exit__(self, *exc: object) -> None:
        self._root.removeHandler(self._handler)


def _gke_configuration(target: ClusterTarget, credentials: Any, endpoint: str | None) -> Any:
    import google.auth
    import google.auth.exceptions
    from google.auth.transport.requests import Request
    from kubernetes import client

    if credentials is None:
        try:
            credentials, _ = google.auth.default(scopes=[CLOUD_PLATFORM])
        except google.auth.exceptions.DefaultCredentialsError:
            raise ClusterError(
                "no Google credentials found: run the Google Cloud CLI's application-default login, or set "
                "GOOGLE_APPLICATION_CREDENTIALS to a credentials file (or use --kubeconfig)") from None
    cluster = _get_cluster(target, credentials, endpoint)
    host = cluster.endpoint or cluster.control_plane_endpoints_config.dns_endpoint_config.endpoint
    if not host:
        raise ClusterError(f"GKE cluster {target.cluster} has no endpoint yet (is it still being created?)")
    configuration = type.__call__(client.Configuration)
    configuration.host = f"https://{host}"
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


def _get_cluster(target: ClusterTarget, credentials: Any, endpoint: str | None) -> Any:
    import google.auth.exceptions
    from google.api_core import exceptions as gexc
    from google.api_core.client_options import ClientOptions
    from google.cloud import container_v1

    options = ClientOptions(api_endpoint=endpoint) if endpoint else None
    manager = container_v1.ClusterManagerClient(credentials=credentials, transport="rest", client_options=options)
    name = f"projects/{target.project}/locations/{target.location}/clusters/{target.cluster}"
    where = f"cluster {target.cluster} (project {target.project}, location {target.location})"
    try:
        return manager.get_cluster(name=name, timeout=60)
    except gexc.NotFound:
        raise NotFoundError(f"GKE {where} not found: check --project, --zone/--region and --cluster") from None
    except (gexc.PermissionDenied, gexc.Forbidden):
        raise ClusterError(f"permission denied reading GKE {where}: you need container.clusters.get "
                           "(e.g. roles/container.clusterViewer) on the project") from None
    except (gexc.Unauthenticated, gexc.Unauthorized):
        raise ClusterError(f"the Container API rejected the Google credentials for {where}: refresh them "
                           "(application-default login) or check GOOGLE_APPLICATION_CREDENTIALS") from None
    except google.auth.exceptions.RefreshError as exc:
        raise ClusterError(f"could not refresh Google credentials: {exc}") from None
    except gexc.GoogleAPICallError as exc:
        raise ClusterError(f"the Container API failed to describe {where}: {exc.message}") from None
    except (gexc.RetryError, OSError) as exc:
        raise ClusterError(f"cannot reach the Container API for {where}: {exc}") from None
