"""One line for each way the Kubernetes API can refuse or fail a request, naming what was asked, the host and
the fix (kube_transport.py makes the requests)."""

from __future__ import annotations

from typing import Any, NamedTuple

from elxpk.cluster.api.answer import NotAnObject, parse_object
from elxpk.errors import ClusterError, ConflictError, ElxpkError, NotFoundError, UsageError
from elxpk_contract.failure_classes import API_UNAVAILABLE

_GKE_ROLE_HINT = "grant it with a Role/ClusterRole binding, or the GKE role roles/container.developer"


class Answer(NamedTuple):
    """A complete answer that is not a success (what api_error reads)."""

    status: int
    reason: str | None
    data: bytes

    @property
    def body(self) -> bytes:
        return self.data


class ApiFailure(ClusterError):
    """The Kubernetes API failed a request, or answered it with an error no narrower class names (a 403, a 500
    after the tries): `http_status` is the answer's (0: none came); `retryable` when another call may mend it
    (the failure class API_UNAVAILABLE: no answer, or a 408, 429 or 5xx, after the tries ran out), with
    `retry_after`, the seconds the last answer asked to wait (None: the back-off applies)."""

    def __init__(self, message: str, *, http_status: int = 0, retryable: bool = False,
                 retry_after: float | None = None) -> None:
        super().__init__(message)
        self.http_status = http_status
        self.retryable = retryable
        self.retry_after = retry_after


class Retry(Exception):
    """An attempt another one may mend: no connection (`cause`), a 408, 429 or 5xx (`answer`, with the
    seconds its Retry-After asked for), or `late`: the request's deadline has passed."""

    def __init__(self, *, cause: BaseException | None = None, answer: Answer | None = None,
                 late: bool = False, retry_after: float | None = None) -> None:
        self.cause, self.answer, self.late, self.retry_after = cause, answer, late, retry_after

    def error(self, verb: str, what: str, host: str, attempts: int) -> ApiFailure:
        """The error once the tries ran out: retryable by a caller that may call again (a watch riding an
        outage, a create read back first)."""
        if self.answer is not None:
            return _answered(self.answer, verb, what, host, attempts, API_UNAVAILABLE.retryable, self.retry_after)
        return ApiFailure(unreachable_message(host, self.cause or self, attempts),
                          retryable=API_UNAVAILABLE.retryable, retry_after=self.retry_after)


def _details(body: Any) -> dict:
    """The `details` of a Status body ({} for anything else)."""
    try:
        details = parse_object(body).get("details")
    except (NotAnObject, TypeError):
        return {}
    return details if isinstance(details, dict) else {}


def _status_message(body: Any) -> str:
    """The `message` of a Status body, on one line and at most 300 characters; '' for anything else."""
    try:
        message = parse_object(body).get("message", "")
    except (NotAnObject, TypeError):
        return ""
    text = " ".join(message.split()) if isinstance(message, str) else ""
    return text[:300] + ("…" if len(text) > 300 else "")


def api_error(exc: Any, verb: str, what: str, host: str, attempts: int = 1) -> ElxpkError:
    """One line for an API error answer, naming what was asked and what to do."""
    status = exc.status or 0
    message = _status_message(exc.body)
    if status == 0:
        return ApiFailure(f"TLS or connection failure talking to the Kubernetes API at {host}: "
                          f"{str(exc.reason).splitlines()[-1]}")
    if status == 401:
        return ApiFailure(f"the Kubernetes API at {host} rejected the credentials (401 Unauthorized) while "
                          f"trying to {verb} {what}: refresh them (`gcloud auth application-default login`) or check "
                          "the kubeconfig user", http_status=status)
    if status == 403:
        return ApiFailure(f"permission denied (403): you need RBAC permission to {verb} {what}; "
                          f"{_GKE_ROLE_HINT}" + (f" (server: {message})" if message else ""), http_status=status)
    if status == 404 and _details(exc.body).get("kind") == "namespaces":  # NamespaceLifecycle on a create
        return missing_namespace(str(_details(exc.body).get("name") or ""))
    if status == 404:
        return NotFoundError(f"{what} not found")
    if status == 409 and verb == "create":
        return ConflictError(f"{what} already exists")
    if status == 409:  # a delete's precondition (another uid now holds the name), or a conflict on a read
        return ConflictError(f"the Kubernetes API at {host} answered 409 Conflict to {verb} {what}"
                             + (f": {message}" if message else ""))
    if status == 422:
        return ApiFailure(f"the Kubernetes API rejected {what} as invalid (422): {message}", http_status=status)
    return _answered(exc, verb, what, host, attempts)


def _answered(exc: Any, verb: str, what: str, host: str, attempts: int, retryable: bool = False,
              retry_after: float | None = None) -> ApiFailure:
    """An answer no narrower line names: its status and reason, and the server's message."""
    message = _status_message(exc.body)
    tried = f" after {attempts} attempts" if attempts > 1 else ""
    return ApiFailure(f"the Kubernetes API at {host} answered {exc.status} {exc.reason or ''} to {verb} {what}"
                      f"{tried}" + (f": {message}" if message else ""), http_status=exc.status,
                      retryable=retryable, retry_after=retry_after)


def redirected(host: str, status: int, reason: str | None, location: str | None, asked: str) -> ClusterError:
    """A 3xx is not followed: it would carry the credentials to wherever it points (a proxy's login page,
    another host), and a loop would end in urllib3's "too many redirects"."""
    to = f"a redirect to {' '.join(location.split())[:200]!r}" if location else "a redirect with no Location"
    return ClusterError(f"{host} answered {status} {reason or ''} to {asked}, {to}: elxpk follows no redirect; "
                        "point --kubeconfig/--context at the API server itself (not a proxy or login page)")


def missing_namespace(namespace: str) -> UsageError:
    return UsageError(f'namespace "{namespace}" does not exist on this cluster: create it (kubectl create namespace '
                      f"{namespace}) or pass --namespace/-n with an existing one")


def unreachable_message(host: str, exc: BaseException, attempts: int) -> str:
    reason = getattr(exc, "reason", None) or exc
    text = str(reason).splitlines()[0] if str(reason) else type(exc).__name__
    return (f"cannot reach the Kubernetes API at {host} after {attempts} attempts ({text}): check the cluster "
            "endpoint, your network path to it, and --kubeconfig/--context or --project/--zone/--cluster")
