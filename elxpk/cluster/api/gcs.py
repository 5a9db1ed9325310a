"""Small objects on Cloud Storage through its JSON API: read one, and append lines without losing any.

`append_lines` is a read-modify-write with a generation precondition (`ifGenerationMatch`): two
recorders appending at once cannot overwrite each other's lines; the loser gets 412 and retries on
the new content. Objects here are small (an incident log, a progress record), so rewriting is fine.

Every read, and the conditional write, is tried again on no connection, 408, 429 or 5xx under elxpk's one
retry policy (elxpk/retry_policy.py); a write with `ifGenerationMatch` is safe to repeat (Cloud Storage's
own retry strategy calls it conditionally idempotent): had the first landed, the repeat gets 412, and
`append_lines` reads again and finds its lines there. The 412s of concurrent appenders are not failures but
contention, with bounds of their own (ATTEMPTS, jittered pauses from BACKOFF_S).

Credentials are Application Default Credentials through google-auth's AuthorizedSession (imported
lazily: only a `gs://` path loads it); none is a UsageError naming the flag, decided in bounded time
(elxpk_storage/gcs_auth.py). With STORAGE_EMULATOR_HOST set (the convention of Google's
client libraries and of GCS emulators) requests go there, unauthenticated.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from elxpk.errors import ClusterError
from elxpk.retry_policy import REQUESTS, RetryPolicy, asked_wait_s, transient_status
from elxpk_storage import gcs_auth

ENDPOINT = "https://storage.googleapis.com"
ATTEMPTS = 20  # concurrent appenders: each 412 means someone else's lines landed; try again on top of them
BACKOFF_S = 0.01  # first pause after a 412, doubled each time up to 1 s, jittered so contenders spread out
CONTENTION = RetryPolicy(tries=ATTEMPTS, first_pause_s=BACKOFF_S, max_pause_s=1.0)


def split_url(url: str) -> tuple[str, str]:
    rest = url.removeprefix("gs://")
    bucket, _, name = rest.partition("/")
    if not bucket or not name or name.endswith("/"):
        raise ClusterError(f"{url}: not a gs://BUCKET/OBJECT path")
    return bucket, name


def session_and_endpoint(what: str) -> tuple[Any, str]:
    """A session and the endpoint for `what` (e.g. '--record gs://bkt/o'): the emulator's, unauthenticated,
    or Cloud Storage's with Application Default Credentials; UsageError (one line, in bounded time) when
    there are none (elxpk_storage/gcs_auth.py)."""
    emulator = os.environ.get(gcs_auth.EMULATOR)
    if emulator:
        import requests

        return requests.Session(), emulator.rstrip("/")
    credentials = gcs_auth.default_credentials(what)
    from google.auth.transport.requests import AuthorizedSession

    return AuthorizedSession(credentials), ENDPOINT


class Gcs:
    def __init__(self, session: Any = None, endpoint: str | None = None, *, what: str = "a gs:// path",
                 sleep: Callable[[float], None] = time.sleep, policy: RetryPolicy = REQUESTS) -> None:
        if session is None:
            session, endpoint = session_and_endpoint(what)
        self.session = session
        self.endpoint = endpoint or ENDPOINT
        self.sleep, self.policy = sleep, policy

    def _check(self, resp: Any, what: str, tries: int = 1) -> None:
        if resp.status_code >= 400:
            try:
                message = resp.json().get("error", {}).get("message", "")
            except ValueError:
                message = resp.text[:200]
            hint = " (check that the account may read and write the bucket)" if resp.status_code == 403 else ""
            tried = f" after {tries} attempts" if tries > 1 else ""
            raise ClusterError(f"Cloud Storage answered {resp.status_code} to {what}{tried}: {message}{hint}")

    def _send(self, method: str, url: str, what: str, *, repeat: bool = True, **kwargs: Any) -> tuple[Any, int]:
        """(the answer to one request, the tries it took): tried again (the retry policy) on no connection or
        a transient status, when `repeat` (safe to send twice). A transport or credential failure that
        outlasts the tries becomes one line (ClusterError)."""
        import requests
        from google.auth.exceptions import GoogleAuthError

        tries = (self.policy if repeat else self.policy._replace(tries=1)).timed_tries(self.sleep, 60.0)
        for attempt in tries:
            try:
                resp = self.session.request(method, url, timeout=tries.timeout(), **kwargs)
            except (requests.RequestException, GoogleAuthError, OSError) as exc:
                if tries.again():
                    continue
                text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                tried = f" after {attempt} attempts" if attempt > 1 else ""
                raise ClusterError(f"cannot reach Cloud Storage ({self.endpoint}) while {what}{tried}: "
                                   f"{text}") from None
            if transient_status(resp.status_code):
                if tries.again(asked_wait_s(resp.status_code, resp.headers)):
                    resp.close()
                    continue
            return resp, attempt
        raise AssertionError("unreachable")

    def read(self, url: str, *, limit: int | None = None) -> tuple[bytes | None, int]:
        """(content, generation); (None, 0) when the object does not exist. With `limit`, at most limit + 1
        bytes are downloaded (more than `limit` tells the caller the object is over its cap)."""
        resp, tried = self._send("GET", self._object_url(url), f"reading {url}", params={"alt": "media"},
                                 stream=limit is not None)
        if resp.status_code == 404:
            return None, 0
        self._check(resp, f"reading {url}", tried)
        generation = int(resp.headers.get("x-goog-generation") or 0)
        if limit is None:
            return resp.content, generation
        content = bytearray()
        try:
            for chunk in resp.iter_content(1 << 20):
                content += chunk
                if len(content) > limit:
                    break
        finally:
            resp.close()
        return bytes(content), generation

    def _object_url(self, url: str) -> str:
        bucket, name = split_url(url)
        return f"{self.endpoint}/storage/v1/b/{quote(bucket, safe='')}/o/{quote(name, safe='')}"

    def size(self, url: str) -> int:
        """The object's size in bytes (its metadata only)."""
        resp, tried = self._send("GET", self._object_url(url), f"reading the size of {url}")
        if resp.status_code == 404:
            raise ClusterError(f"{url}: no such object")
        self._check(resp, f"reading the size of {url}", tried)
        return int(resp.json()["size"])

    def read_range(self, url: str, start: int, end: int) -> bytes:
        """Bytes start..end-1 of the object: a bounded read, whatever its size."""
        if end <= start:
            return b""
        resp, tried = self._send("GET", self._object_url(url), f"reading {url}", params={"alt": "media"},
                                 headers={"Range": f"bytes={start}-{end - 1}"})
        if resp.status_code == 404:
            raise ClusterError(f"{url}: no such object")
        self._check(resp, f"reading {url}", tried)
        return bytes(resp.content[:end - start])

    def list_names(self, bucket_url: str, *, prefix: str, limit: int) -> list[str]:
        """Names of the first `limit` objects under `prefix` (one listing page: bounded)."""
        bucket = bucket_url.removeprefix("gs://").strip("/")
        resp, tried = self._send("GET", f"{self.endpoint}/storage/v1/b/{quote(bucket, safe='')}/o",
                                 f"listing gs://{bucket}/{prefix}",
                                 params={"prefix": prefix, "maxResults": limit, "fields": "items(name)"})
        if resp.status_code == 404:
            raise ClusterError(f"gs://{bucket}: no such bucket")
        self._check(resp, f"listing gs://{bucket}/{prefix}", tried)
        return [item["name"] for item in resp.json().get("items", [])][:limit]

    def write(self, url: str, data: bytes, *, if_generation_match: int | None = None) -> bool:
        """Upload the whole object; False when the generation precondition failed (412)."""
        bucket, name = split_url(url)
        params: dict[str, Any] = {"uploadType": "media", "name": name}
        if if_generation_match is not None:
            params["ifGenerationMatch"] = if_generation_match
        resp, tried = self._send("POST", f"{self.endpoint}/upload/storage/v1/b/{quote(bucket, safe='')}/o",
                                 f"writing {url}", repeat=if_generation_match is not None, params=params,
                                 data=data, headers={"Content-Type": "application/x-ndjson"})
        if resp.status_code == 412:
            return False
        self._check(resp, f"writing {url}", tried)
        return True

    def append_lines(self, url: str, make_lines: Callable[[bytes], list[str]], *, limit: int | None = None) -> int:
        """Append what `make_lines(current content)` returns (it may drop what is already there); the
        number of lines appended."""

        tries = CONTENTION.tries_of(lambda pause: self.sleep(random.uniform(0.5, 1.0) * pause))
        for _ in tries:
            content, generation = self.read(url, limit=limit)
            if limit is not None and content is not None and len(content) > limit:
                raise ClusterError(f"{url}: over {limit // (1024 * 1024)} MiB; start a new object (what is "
                                   "already there is not read again)")
            lines = make_lines(content or b"")
            if not lines:
                return 0
            body = (content or b"")
            if body and not body.endswith(b"\n"):
                body += b"\n"
            body += "".join(line + "\n" for line in lines).encode()
            if self.write(url, body, if_generation_match=generation):
                return len(lines)
            tries.again()  # a 412: another writer's lines landed first
        raise ClusterError(f"{url}: changed by other writers {ATTEMPTS} times in a row; try again")
