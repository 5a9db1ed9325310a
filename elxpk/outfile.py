"""Writing a file the user named (`--output-manifest-file`): never half a file, never a replaced special file.

A regular file (or a new path) is written through a temporary file in the same directory and renamed, so
a failure leaves the old content. A symlink is followed: its target is replaced, the link stays a link.
A FIFO, character device or socket (`/dev/stdout`, `>(cat)`, a named pipe) is written through in place:
renaming a regular file over it would silently break whatever reads it.
"""

from __future__ import annotations

import os
import stat

from elxpk.errors import UsageError


def write_text(path: str, text: str, *, flag: str) -> None:
    """Write `text` to `path` as described above; UsageError naming `flag` when it cannot be written."""
    try:
        mode = os.stat(path).st_mode  # follows symlinks: what a write would reach
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise UsageError(f"{flag} {path!r}: cannot write it ({exc.strerror})") from None
    if mode is not None and stat.S_ISDIR(mode):
        raise UsageError(f"{flag} {path!r}: is a directory; give a file path, e.g. manifest.yaml")
    if mode is not None and not stat.S_ISREG(mode):
        _write_in_place(path, text, flag)
        return
    _write_replacing(os.path.realpath(path), text, flag, shown=path)


def _write_in_place(path: str, text: str, flag: str) -> None:
    try:
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as exc:
        raise UsageError(f"{flag} {path!r}: cannot write to it ({exc.strerror})") from None


def _write_replacing(real: str, text: str, flag: str, shown: str) -> None:
    tmp = f"{real}.tmp-{os.getpid()}"
    try:
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(text)
        if os.path.exists(real):
            os.chmod(tmp, stat.S_IMODE(os.stat(real).st_mode))  # keep the permissions the file had
        os.replace(tmp, real)
    except OSError as exc:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise UsageError(f"{flag} {shown!r}: cannot write it ({exc.strerror})") from None
