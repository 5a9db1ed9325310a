"""Whether a failure is the infrastructure's and passes with time: the one classifier of read failures.

A checkpoint step is set aside only for what is wrong with its content (a digest or fingerprint mismatch,
a missing or short file, metadata that cannot be decoded). Everything this module recognises says nothing
about the content: the same read succeeds once memory is freed, the storage answers again or a token is
refreshed. The trainer's restore retries those and then exits 75 (retryable), leaving every step in place;
`elxpk checkpoint inspect --quarantine` and the pre-start init container move nothing on them; and
trainer/elastic/outcome.py never maps them to a user error (70).

The classes (`transient_cause` returns the name):
- `out of memory`: MemoryError; a status RESOURCE_EXHAUSTED (XLA's device allocator, tensorstore's
  memory) that is not a disk running out of space (storage_full's class, exit 74);
- `storage unavailable`: a timeout or a dropped connection (TimeoutError, ConnectionError, the errnos
  below), an HTTP 408, 429 or 5xx from an object store (gcsfs's HttpError `.code`, an aiohttp or
  requests response's `.status`/`.status_code`, gcsfs's "ProxyError" for a 502), a status UNAVAILABLE,
  DEADLINE_EXCEEDED or ABORTED (tensorstore, jax);
- `storage access denied`: PermissionError (EACCES, EPERM), an HTTP 401 or 403 (a token expiring
  mid-restore, gcsfs's "Forbidden: ..."), a status PERMISSION_DENIED or UNAUTHENTICATED, google-auth's
  RefreshError / TransportError: the same request works once the token or the grant is back;
- `host resources`: the process could not start a thread (RuntimeError "can't start new thread") or got
  EAGAIN/ENOMEM from the kernel, or ran out of file descriptors (EMFILE/ENFILE: a restore never sets a step
  aside for them; elxpk_contract.fd_limit gives the line to raise the limit).

A FileNotFoundError (HTTP 404, a status NOT_FOUND: `is_absence`) is not here on its own: a missing file of a
committed step is content, but only when a fresh listing agrees. One "not found" for a file that a listing
still shows (an object store's front end answers that now and then) is `UnconfirmedAbsence`, which is
`storage unavailable`: elxpk_storage.digest and checkpoint_files raise it, the restore retries it. The whole
exception chain is searched (a library often wraps the cause), bounded like storage_full's. Standard
library only: the trainer, the launcher and the init container's image all import it.
"""

from __future__ import annotations

import errno
import re

from elxpk_contract.storage_full import NO_SPACE_ERRNOS, exception_chain

OUT_OF_MEMORY, UNAVAILABLE, ACCESS_DENIED, HOST = ("out of memory", "storage unavailable", "storage access denied",
                                                  "host resources")
_UNAVAILABLE_ERRNOS = frozenset({errno.ETIMEDOUT, errno.ECONNRESET, errno.ECONNREFUSED, errno.ECONNABORTED,
                                 errno.EHOSTUNREACH, errno.ENETUNREACH, errno.ENETDOWN, errno.EPIPE, errno.ESTALE,
                                 errno.EIO})
_DENIED_ERRNOS = frozenset({errno.EACCES, errno.EPERM})
_HOST_ERRNOS = frozenset({errno.EAGAIN, errno.ENOMEM, errno.EMFILE, errno.ENFILE})  # the last two: fd_limit's
# A status word at the start of a line of the message, as absl/tensorstore/XLA print it ("UNAVAILABLE: ...").
_STATUS = re.compile(r"(?:^|\n)\s*(?:[\w.]+Error: )?([A-Z][A-Z_]+):", re.MULTILINE)
_STATUS_CLASS = {"RESOURCE_EXHAUSTED": OUT_OF_MEMORY, "UNAVAILABLE": UNAVAILABLE, "DEADLINE_EXCEEDED": UNAVAILABLE,
                 "ABORTED": UNAVAILABLE, "PERMISSION_DENIED": ACCESS_DENIED, "UNAUTHENTICATED": ACCESS_DENIED}
_OS_ERROR_CODE = re.compile(r"\[os_error_code='?([0-9]{1,9})'?\]")  # tensorstore's payload
_DISK_FULL = frozenset(NO_SPACE_ERRNOS)  # storage_full's (74), never this module's


class UnconfirmedAbsence(OSError):
    """A read answered "not found" for a file that a fresh listing still shows: the storage's answer, not
    the file's absence (ESTALE: `storage unavailable`)."""

    def __init__(self, what: str) -> None:
        super().__init__(errno.ESTALE, f"{what}: answered not found, but a fresh listing still shows it")


_NOT_FOUND = re.compile(r"(?:^|\n)\s*(?:[\w.]+Error: )?NOT_FOUND:", re.MULTILINE)


def is_absence(error: BaseException) -> bool:
    """Whether `error`, or a link of its chain, says a file is not there: FileNotFoundError, an HTTP 404, a
    status NOT_FOUND (tensorstore's). Not a verdict on its own: the caller asks a fresh listing first."""
    for link in exception_chain(error):
        if isinstance(link, FileNotFoundError) or http_status(link) == 404:
            return True
        if _NOT_FOUND.search(str(link)[:4000]):
            return True
    return False


def http_status(error: BaseException) -> int | None:
    """The HTTP status an object-store client attached to `error` (gcsfs `.code`, aiohttp `.status`,
    requests' `.response.status_code`), or None."""
    for value in (getattr(error, "code", None), getattr(error, "status", None),
                  getattr(getattr(error, "response", None), "status_code", None)):
        if isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599:
            return value
    return None


def _http_class(status: int) -> str | None:
    if status in (401, 403):
        return ACCESS_DENIED
    if status in (408, 429) or 500 <= status <= 599 and status != 507:  # 507: storage_full's
        return UNAVAILABLE
    return None


def _one(error: BaseException) -> str | None:
    if isinstance(error, MemoryError):
        return OUT_OF_MEMORY
    if isinstance(error, FileNotFoundError):
        return None  # content: a file of the step is missing
    if isinstance(error, (TimeoutError, ConnectionError)):
        return UNAVAILABLE
    if isinstance(error, OSError) and error.errno is not None:
        if error.errno in _DENIED_ERRNOS:
            return ACCESS_DENIED
        if error.errno in _UNAVAILABLE_ERRNOS:
            return UNAVAILABLE
        if error.errno in _HOST_ERRNOS:
            return HOST
    status = http_status(error)
    if status is not None and (found := _http_class(status)) is not None:
        return found
    kind = type(error).__name__
    if kind in ("RefreshError", "TransportError") and "google.auth" in type(error).__module__:
        return ACCESS_DENIED
    if kind in ("ProxyError", "ServerDisconnectedError", "ClientConnectionError", "ClientOSError", "ReadTimeout",
                "ConnectTimeout", "ChunkedEncodingError"):  # requests / aiohttp, by name: neither is imported here
        return UNAVAILABLE
    text = str(error)[:4000]
    if isinstance(error, RuntimeError) and "can't start new thread" in text:
        return HOST
    if text.startswith("Forbidden: "):  # gcsfs's 403, raised as a bare OSError
        return ACCESS_DENIED
    codes = {int(c.group(1)) for c in _OS_ERROR_CODE.finditer(text)}  # the OS error under a status, if any
    if codes & _DISK_FULL:
        return None  # a disk that ran out of space: storage_full's class (74)
    if codes & _DENIED_ERRNOS:
        return ACCESS_DENIED
    if codes & _UNAVAILABLE_ERRNOS:
        return UNAVAILABLE
    if codes & _HOST_ERRNOS:
        return HOST
    for word in _STATUS.finditer(text):
        cls = _STATUS_CLASS.get(word.group(1))
        if cls is not None:
            return cls
    return None


def transient_cause(error: BaseException) -> str | None:
    """The class (module docstring) when `error` or anything in its chain is a transient infrastructure
    failure, else None (a content problem, a bug, the user's code)."""
    return _classified(error)[0]


def _classified(error: BaseException) -> tuple[str | None, BaseException]:
    """(the class, the link of the chain that says so) or (None, `error`)."""
    for link in exception_chain(error):
        found = _one(link)
        if found is not None:
            return found, link
    return None, error


def describe(error: BaseException) -> str:
    """'storage access denied: ValueError: PERMISSION_DENIED: ...': the class and the first line of the
    link of the chain that showed it (orbax wraps tensorstore's status in a message of its own)."""
    cls, link = _classified(error)
    line = (str(link).splitlines() or [""])[0][:200] or type(link).__name__
    return f"{cls or 'error'}: {type(link).__name__}: {line}"
