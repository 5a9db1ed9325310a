"""A write that failed for want of space is the storage's fault, not the input's: the one classifier.

No space left (ENOSPC), a disk quota (EDQUOT) or a file-size limit (EFBIG, RLIMIT_FSIZE) says nothing
about the run's settings or code: the same save succeeds once space is freed, and the previous checkpoint
is still valid. So every writer (the trainer's checkpoint saves and run records, `elxpk local run`, the
files elxpk writes for the user) turns such an error into `StorageFull` (exit 74, `storage_full`, a
retryable code of elxpk_contract/exit_codes.py) through `storage_full_is_infrastructure`, and any other
error passes through unchanged.

What the writers see differs by layer, so the exception chain is searched for any of:
- an `OSError` with one of those errnos (Python's own writes, etils.epath on a local path, gcsfs);
- tensorstore's (orbax's array writer) `ValueError: RESOURCE_EXHAUSTED: ... [os_error_code='28']`: the
  status alone is not enough, device out-of-memory is RESOURCE_EXHAUSTED too and is the user's;
- an HTTP 507 Insufficient Storage from an object store or a gateway in front of one.
A quota of requests (HTTP 429) is not storage: the clients retry those themselves.

Standard library only (the trainer image ships this package).
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager

from elxpk_contract.errors import StorageFull, UsageError
from elxpk_contract.fd_limit import descriptors_error

NO_SPACE_ERRNOS: dict[int, str] = {errno.ENOSPC: "ENOSPC", errno.EDQUOT: "EDQUOT", errno.EFBIG: "EFBIG"}
_OS_ERROR_CODE = re.compile(r"\[os_error_code='?([0-9]{1,19})'?\]")  # tensorstore's status payload
_INSUFFICIENT_STORAGE = re.compile(r"\b507\b|insufficient storage", re.IGNORECASE)
_CHAIN_LIMIT = 16  # a cycle of __context__ links must not loop


def exception_chain(error: BaseException) -> Iterator[BaseException]:
    """`error` and every cause and context behind it, each once, at most _CHAIN_LIMIT (a cycle must not loop)."""
    seen: set[int] = set()
    pending: list[BaseException] = [error]
    while pending and len(seen) < _CHAIN_LIMIT:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        pending.extend(e for e in (current.__cause__, current.__context__) if e is not None)


def no_space_errno(error: BaseException) -> int | None:
    """The errno (ENOSPC, EDQUOT or EFBIG) when `error` or anything in its chain is a write that ran out of
    space; for a 507 from an object store, ENOSPC; None for any other error."""
    for link in exception_chain(error):
        if isinstance(link, OSError) and link.errno in NO_SPACE_ERRNOS:
            return link.errno
        text = str(link)[:4000]
        for found in _OS_ERROR_CODE.finditer(text):
            if int(found.group(1)) in NO_SPACE_ERRNOS:
                return int(found.group(1))
        for code in NO_SPACE_ERRNOS:
            if os.strerror(code) in text:  # "No space left on device" in a message without an errno field
                return code
        if _INSUFFICIENT_STORAGE.search(text) and _http_like(link):
            return errno.ENOSPC
    return None


def _http_like(error: BaseException) -> bool:
    """A 507 counts only from an HTTP client's error, not a number 507 anywhere in any message."""
    code = getattr(error, "code", None) or getattr(error, "status", None)
    return code == 507 or "insufficient storage" in str(error)[:4000].lower()


def describe(code: int) -> str:
    """'no space left on device (ENOSPC)'."""
    return f"{os.strerror(code)[:1].lower()}{os.strerror(code)[1:]} ({NO_SPACE_ERRNOS.get(code, code)})"


def storage_full_error(error: BaseException, where: str, *, then: str = "") -> StorageFull | None:
    """StorageFull naming `where` (e.g. "--checkpoint-dir /ckpt: saving step 40") when `error` is a write
    that ran out of space, else None. `then`: what holds after it (the previous checkpoint is intact)."""
    if isinstance(error, StorageFull):
        return error
    code = no_space_errno(error)
    if code is None:
        return descriptors_error(error, where)  # out of file descriptors: the host's limit, 74 too
    advice = "free space or raise the quota there, then run again"
    return StorageFull(f"{where}: {describe(code)}; {then + '; ' if then else ''}{advice}")


@contextmanager
def storage_full_is_infrastructure(where: str, *, then: str = "") -> Iterator[None]:
    """Re-raise a write that ran out of space inside the block as one-line StorageFull (exit 74); any other
    error passes unchanged. The original is dropped from the chain: the line says all the user needs."""
    try:
        yield
    except StorageFull:
        raise
    except Exception as exc:
        full = storage_full_error(exc, where, then=then)
        if full is None:
            raise
        raise full from None


# A place that cannot be written at all is the opposite case: a read-only filesystem (EROFS: a mount made
# read-only, a volume mounted `readOnly`) or no permission. The same write fails on every retry until the
# user points the run elsewhere, so it is the input's fault: exit 2 (UsageError), never a retryable code.
NOT_WRITABLE_ERRNOS = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})


@contextmanager
def unwritable_is_usage(flag: str, path: object, *, creating: bool = False) -> Iterator[None]:
    """Re-raise an OSError inside the block that says `path` cannot be written (EROFS, EACCES, EPERM) as one
    UsageError naming `flag`; running out of space and any other error pass unchanged. `creating`: the block
    makes `path` with its parents first, so ENOENT says no directory can be made there (a pseudo-filesystem
    such as /proc or /sys) and is the user's too; elsewhere ENOENT may be a directory removed under a run."""
    try:
        yield
    except OSError as exc:
        refused = NOT_WRITABLE_ERRNOS | ({errno.ENOENT} if creating else set())
        if exc.errno not in refused or isinstance(exc, StorageFull):
            raise
        raise UsageError(f"{flag} {path}: cannot write there ({exc.strerror or exc}); give a writable {flag}"
                         ) from None
