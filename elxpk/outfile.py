"""Writing a file the user named (`--output-manifest-file`, `--png`, `--plot`): checked before anything runs,
then never half a file, never a replaced special file.

A regular file (or a new path) is written through a temporary file in the same directory and renamed, so
a failure leaves the old content. A symlink is followed: its target is replaced, the link stays a link.
A FIFO, character device or socket (`/dev/stdout`, `>(cat)`, a named pipe) is written through in place:
renaming a regular file over it would silently break whatever reads it.
"""

from __future__ import annotations

import io
import os
import stat

from elxpk.errors import UsageError
from elxpk_contract.storage_full import storage_full_error


def output_problem(path: str | os.PathLike[str], flag: str, *, suffixes: tuple[str, ...] = (),
                   example: str = "out.yaml") -> str | None:
    """Why `path` cannot be written as `flag`'s output, or None. Exactly the path given is written: a
    directory, a missing parent or (with `suffixes`) another suffix is refused, never guessed at (no
    DIR.png beside a folder, no suffix added)."""
    text = os.fspath(path)
    if not text.strip():
        return f"{flag}: empty; name the file to write, e.g. {example}"
    if os.path.isdir(text) or text.endswith(os.sep):
        return f"{flag} {text}: is a directory; name the file to write, e.g. {os.path.join(text, example)}"
    if suffixes and os.path.splitext(text)[1].lower() not in suffixes:
        return f"{flag} {text}: must end in {' or '.join(suffixes)}, e.g. {example}"
    parent = os.path.dirname(os.path.abspath(text))
    if not os.path.isdir(parent):
        return f"{flag} {text}: directory {parent} does not exist; create it first"
    return None


def check_output(path: str | os.PathLike[str], flag: str, **kwargs: object) -> None:
    problem = output_problem(path, flag, **kwargs)  # type: ignore[arg-type]
    if problem:
        raise UsageError(problem)


def save_figure(fig: object, path: str | os.PathLike[str], *, flag: str, fmt: str | None = None,
                dpi: float | None = None) -> None:
    """A matplotlib figure rendered in memory, then written like any output (atomically, or through a
    pipe): a failed render leaves no half-written image."""

    buffer = io.BytesIO()
    suffix = os.path.splitext(os.fspath(path))[1].lstrip(".").lower()
    fig.savefig(buffer, format=fmt or suffix or "png", **({"dpi": dpi} if dpi else {}))  # type: ignore[attr-defined]
    write_bytes(os.fspath(path), buffer.getvalue(), flag=flag)


def write_text(path: str, text: str, *, flag: str) -> None:
    """Write `text` to `path` as described above; UsageError naming `flag` when it cannot be written."""
    write_bytes(path, text.encode("utf-8"), flag=flag)


def write_bytes(path: str, data: bytes, *, flag: str) -> None:
    """Write `data` to `path` as described above; UsageError naming `flag` when it cannot be written."""
    try:
        mode = os.stat(path).st_mode  # follows symlinks: what a write would reach
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise UsageError(f"{flag} {path!r}: cannot write it ({exc.strerror})") from None
    if mode is not None and stat.S_ISDIR(mode):
        raise UsageError(f"{flag} {path!r}: is a directory; give a file path, e.g. manifest.yaml")
    if mode is not None and not stat.S_ISREG(mode):
        _write_in_place(path, data, flag)
        return
    _write_replacing(os.path.realpath(path), data, flag, shown=path)


def _write_in_place(path: str, data: bytes, flag: str) -> None:
    try:
        with open(path, "wb") as handle:
            handle.write(data)
    except OSError as exc:
        raise _write_failed(exc, f"{flag} {path!r}", "cannot write to it") from None


def _write_replacing(real: str, data: bytes, flag: str, shown: str) -> None:
    tmp = f"{real}.tmp-{os.getpid()}"
    try:
        with open(tmp, "wb") as handle:
            handle.write(data)
        if os.path.exists(real):
            os.chmod(tmp, stat.S_IMODE(os.stat(real).st_mode))  # keep the permissions the file had
        os.replace(tmp, real)
    except OSError as exc:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise _write_failed(exc, f"{flag} {shown!r}", "cannot write it") from None


def _write_failed(exc: OSError, where: str, what: str) -> Exception:
    """A write that ran out of space is the storage's (StorageFull, exit 74); any other failure is the path's."""
    return storage_full_error(exc, where) or UsageError(f"{where}: {what} ({exc.strerror})")
