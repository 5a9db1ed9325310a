"""The transport under `Kube`: one API request with bounded retries, deadlines and one-line errors, and paging.

Requests go through http_client.ApiClient (the kubeconfig's TLS settings and auth on a urllib3 pool; the
official client's own import cost most of a CLI start) with REST paths built here, and large lists are
parsed once by `json` instead of into model objects. Reads retry under elxpk's one retry policy
(elxpk/retry_policy.py: back-off from 0.5 s, doubled; a Retry-After honoured up to 30 s) on connection
errors, timeouts, 408, 429 and 5xx; a create is never blindly retried (see submit.py). The resources built
on it (JobSets, pods, Kueue objects) are `kube.Kube`'s methods.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import quote

from elxpk.cluster.api.answer import (
    RESPONSE_BYTES,
    Guard,
    NotAnObject,
    Stream,
    TooLarge,
    close_response,
    guard_pools,
    not_json,
    parse_object,
    read_body,
    shape_problem,
    too_large,
)
from elxpk.cluster.api.api_errors import Answer, ApiFailure, Retry, api_error, redirected
from elxpk.errors import ElxpkError, Timeout, UsageError
from elxpk.retry_policy import REQUESTS, RetryPolicy, asked_wait_s, transient_status
from elxpk_contract.failure_classes import API_UNAVAILABLE

PAGE_SIZE = 500  # list page size: a 1,024-pod workload is 3 pages, never one call per pod
# The most one request may take, its retries included (a LIST page of 500 pods is ~5 MB): a server that
# trickles its answer, or a retried outage, ends here. docs/cluster.md states it.
REQUEST_TOTAL_S = REQUESTS.total_s
DEADLINE_ENV = "ELXPK_API_DEADLINE"
WATCH_MARGIN_S = 30.0  # a watch asked to end after N s is cut at N + this, should the server not end it
DEFAULT: Any = object()  # `total_s` not given: the Kube's own


def api_path(api_version: str, plural: str, namespace: str | None = None, name: str | None = None,
             sub: str | None = None) -> str:

    if name is not None and (not name.strip() or name != name.strip()):
        # An empty name would make this the collection's path: a GET lists, a DELETE deletes every object.
        raise UsageError(f"object name {name!r}: empty or padded with spaces; name exactly one object")
    path = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    if namespace:
        path += f"/namespaces/{quote(namespace, safe='')}"
    path += f"/{plural}"
    if name:
        path += f"/{quote(name, safe='')}"
    if sub:
        path += f"/{sub}"
    return path


def plural_of(kind: str) -> str:
    return kind.lower() + "s"  # JobSet, ConfigMap, Secret, Service, ServiceAccount, PathwaysJob


def request_deadline_s(environ: Any = None) -> float:
    """REQUEST_TOTAL_S, or ELXPK_API_DEADLINE (seconds) when set: a slow link may need longer, a test less."""
    text = (environ if environ is not None else os.environ).get(DEADLINE_ENV, "").strip()
    if not text:
        return REQUEST_TOTAL_S
    try:
        seconds = float(text)
    except ValueError:
        seconds = 0.0
    if not 0 < seconds <= 86400:
        raise UsageError(f"{DEADLINE_ENV}={text!r}: give the seconds one API request may take, more than 0 and "
                         f"at most 86400 (default {REQUEST_TOTAL_S:.0f}), or unset it")
    return seconds


class KubeTransport:
    """One cluster's API server as a transport: requests, retries, deadlines and pages. `calls` counts HTTP
    requests made (retries included)."""

    def __init__(self, api_client: Any, *, host: str, sleep: Callable[[float], None] = time.sleep,
                 attempts: int = REQUESTS.tries, base_delay: float = REQUESTS.first_pause_s, timeout: tuple[float, float] = (5.0, 30.0),
                 total_s: float | None = None):
        self.api_client = api_client
        self.host = host
        self.sleep = sleep
        self.attempts = attempts  # the policy's, changeable (a test takes 1 to reach a caller's own tolerance)
        self.base_delay = base_delay
        self.timeout = timeout
        self.total_s = total_s if total_s is not None else request_deadline_s()
        self.calls = 0
        self.until: float | None = None  # the caller's own deadline (time.monotonic), see `within`
        guard_pools(api_client)

    def retry_policy(self, retry: bool = True) -> RetryPolicy:
        """elxpk's one retry policy with this transport's tries and first pause (one try when not `retry`)."""
        return REQUESTS._replace(tries=self.attempts if retry else 1, first_pause_s=self.base_delay)

    @contextmanager
    def within(self, seconds: float | None) -> Iterator[None]:
        """Every request made inside ends by the caller's deadline, `seconds` from now (Timeout past it):
        `wait --timeout` holds while a request is in flight."""
        previous = self.until
        self.until = None if seconds is None else time.monotonic() + max(0.0, seconds)
        try:
            yield
        finally:
            self.until = previous

    # --- one request --------------------------------------------------------------------------------

    def request(self, method: str, path: str, *, verb: str, what: str, query: dict | None = None,
                body: dict | None = None, retry: bool = True, stream: bool = False,
                total_s: float | None = DEFAULT) -> Any:
        """One API request: the JSON object answered, or a `Stream` when `stream`. It ends within `total_s`
        seconds (default: the Kube's `total_s`; None: no deadline, for a followed log), retries included,
        and by the caller's deadline (`within`)."""
        headers = {"Accept": "application/json, */*" if stream else "application/json"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        params = [(k, v) for k, v in (query or {}).items() if v is not None]
        own = None if total_s is None else time.monotonic() + (self.total_s if total_s is DEFAULT else total_s)
        deadline = min((d for d in (own, self.until) if d is not None), default=None)
        tries = self.retry_policy(retry).tries_of(self.sleep, deadline=deadline)
        for attempt in tries:
            self.calls += 1
            try:
                return self._once(method, path, params, headers, body, deadline, stream, verb, what)
            except Retry as exc:
                if exc.late:
                    raise self._late(verb, what, attempt, own) from None
                if tries.again(exc.retry_after):
                    continue
                # Retryable: a read is safe to repeat; after an unanswered create the caller checks what landed.
                raise exc.error(verb, what, self.host, attempt) from None
        raise AssertionError("unreachable")

    def _late(self, verb: str, what: str, attempts: int, own: float | None) -> ElxpkError:
        tried = f" ({attempts} attempts)" if attempts > 1 else ""
        if self.until is not None and (own is None or self.until <= own):
            return Timeout(f"the Kubernetes API at {self.host} had not answered to {verb} {what} when the time "
                           f"given ran out{tried}")
        return ApiFailure(f"the Kubernetes API at {self.host} did not finish answering to {verb} {what} "
                          f"within {self.total_s:.0f} s{tried}, retries included: check the endpoint and "
                          "your network path to it", retryable=API_UNAVAILABLE.retryable)

    def _once(self, method: str, path: str, params: list, headers: dict, body: dict | None,
              deadline: float | None, stream: bool, verb: str, what: str) -> Any:
        """One attempt; Retry for what another attempt may mend (no connection, 429, 5xx) or a deadline."""
        import urllib3

        remaining = None if deadline is None else deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            raise Retry(late=True)
        guard = Guard(deadline)
        resp = None
        try:
            with guard:
                serialized = self.api_client.param_serialize(
                    method, path, query_params=params or None, header_params=dict(headers), body=body,
                    auth_settings=["BearerToken"])
                connect, read = self.timeout
                if remaining is not None:
                    connect, read = min(connect, remaining), min(read, remaining)
                # A followed log may stay quiet for hours: with no deadline, a stream's reads wait.
                timeout = (connect, None) if stream and deadline is None else (connect, read)
                resp = self.api_client.call_api(*serialized, _request_timeout=timeout).response
                if stream and 200 <= resp.status <= 299:
                    return Stream(resp, guard, self.host)
                data = read_body(resp)
        except TooLarge:
            _close(resp, guard)
            raise too_large(self.host, RESPONSE_BYTES, f"{verb} {what}") from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            _close(resp, guard)
            raise Retry(cause=exc, late=guard.expired()) from None
        if guard.expired():  # a body cut short by the deadline may still parse: it is not the answer
            _close(resp, guard)
            raise Retry(late=True)
        guard.cancel()
        resp.release_conn()  # read to its end: the connection can serve the next request
        answer = Answer(resp.status, resp.reason, data)
        if transient_status(answer.status):
            raise Retry(answer=answer, retry_after=asked_wait_s(answer.status, resp.headers))
        if 300 <= answer.status <= 399:
            raise redirected(self.host, answer.status, resp.reason, resp.headers.get("Location"), f"{verb} {what}")
        if not 200 <= answer.status <= 299:
            raise api_error(answer, verb, what, self.host)
        if not data and method != "GET":
            return {}
        content_type = resp.headers.get("Content-Type", "")
        try:
            parsed = parse_object(data)
        except NotAnObject as exc:
            raise not_json(self.host, answer.status, content_type, data, str(exc), f"{verb} {what}") from None
        problem = shape_problem(parsed, verb)
        if problem:
            raise not_json(self.host, answer.status, content_type, data, problem, f"{verb} {what}")
        return parsed

    def get(self, path: str, *, what: str, query: dict | None = None) -> dict:
        return self.request("GET", path, verb="get", what=what, query=query)

    def _paged(self, path: str, *, what: str, label_selector: str | None = None,
               field_selector: str | None = None) -> list[dict]:
        items: list[dict] = []
        token = None
        while True:
            body = self.request("GET", path, verb="list", what=what,
                                query={"labelSelector": label_selector, "fieldSelector": field_selector,
                                       "limit": PAGE_SIZE, "continue": token})
            items.extend(body.get("items") or [])
            token = (body.get("metadata") or {}).get("continue")
            if not token:
                return items


def _close(resp: Any, guard: Guard) -> None:
    guard.cancel()
    close_response(resp)
