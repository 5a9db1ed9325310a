"""Running out of file descriptors is the host's limit, not the input's and not a bug: its own class.

EMFILE (this process's limit, `ulimit -n`) and ENFILE (the whole system's, fs.file-max) say nothing about
the command or the run's settings: the same command works once the limit is raised or other programs close
their files. They used to end as "internal error" (exit 1) or as the error of whatever happened to open a
file. Now any of them, anywhere in an exception's chain, is StorageFull's exit 74 (retryable: a host
resource ran out, as a disk does) with one line saying which limit and how to raise it. Every writer gets
it through elxpk_contract.storage_full.storage_full_error; elxpk's one error handler and the trainer's exit
codes ask `descriptors_error` for everything else. Standard library only.
"""

from __future__ import annotations

import errno
import os

from elxpk_contract.errors import StorageFull

try:  # imported now: with no descriptor left, importing it then (a file to open) would fail too
    import resource
except ImportError:  # not on this platform
    resource = None  # type: ignore[assignment]

FD_ERRNOS = {errno.EMFILE: "EMFILE", errno.ENFILE: "ENFILE"}
_CHAIN_LIMIT = 16


def fd_errno(error: BaseException) -> int | None:
    """EMFILE or ENFILE when `error` or a link of its chain is one (by errno, or by the C library's words
    in a message a library wrapped it in), else None."""
    seen: set[int] = set()
    pending = [error]
    while pending and len(seen) < _CHAIN_LIMIT:
        link = pending.pop()
        if id(link) in seen:
            continue
        seen.add(id(link))
        if isinstance(link, OSError) and link.errno in FD_ERRNOS:
            return link.errno
        text = str(link)[:4000]
        for code in FD_ERRNOS:
            if os.strerror(code) in text:  # "Too many open files", "Too many open files in system"
                return errno.ENFILE if os.strerror(errno.ENFILE) in text else code
        pending.extend(e for e in (link.__cause__, link.__context__) if e is not None)
    return None


def how_to_raise(code: int) -> str:
    """The one line's advice for EMFILE or ENFILE."""
    if code == errno.ENFILE:
        return ("the system ran out of file descriptors (ENFILE: the kernel's fs.file-max); close other "
                "programs' files or raise fs.file-max (sysctl fs.file-max), then run again")
    limit, want = "its limit", 65536
    if resource is not None:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        limit = f"its limit is {soft}" + (f", the hard limit {hard}" if hard != resource.RLIM_INFINITY else "")
        want = 65536 if hard == resource.RLIM_INFINITY else min(hard, 65536)
    return (f"this process ran out of file descriptors (EMFILE: {limit}); raise it (ulimit -n {want}) "
            "and run again")


def descriptors_error(error: BaseException, where: str) -> StorageFull | None:
    """StorageFull (exit 74) naming `where` and how to raise the limit when `error` is EMFILE or ENFILE."""
    code = fd_errno(error)
    return None if code is None else StorageFull(f"{where}: {how_to_raise(code)}")
