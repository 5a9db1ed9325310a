"""Writing a file the user named (`--output-manifest-file`, `--png`, `--plot`): checked before anything runs,
then never half a file, never a replaced special file.

A regular file (or a new path) is written through a temporary file in the same directory and renamed, so
a failure leaves the old content. A symlink is followed: its target is replaced, the link stays a link.
A FIFO, character device or socket (`/dev/stdout`, `>(cat)`, a named pipe) is written through in place:
renaming a regular file over it would silently break whatever reads it.

A path elxpk names itself (`job inspect`'s NAME-inspect.txt, `report`'s report.png) is another matter: in a
shared working directory someone else may have put a symlink or a file there. Such a path (`own=`) is never
followed through a link and never written through a special file (refused in one line); with own="new" it
is created with O_EXCL|O_NOFOLLOW and an existing one is refused, with own="replace" (elxpk's own figure,
rewritten at each run) a regular file is replaced by a rename, which replaces the entry, never a link's target.
"""

from __future__ import annotations

import errno
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
                dpi: float | None = None, own: str | None = None) -> None:
    """A matplotlib figure rendered in memory, then written like any output (atomically, or through a
    pipe): a failed render leaves no half-written image."""

    buffer = io.BytesIO()
    suffix = os.path.splitext(os.fspath(path))[1].lstrip(".").lower()
    fig.savefig(buffer, format=fmt or suffix or "png", **({"dpi": dpi} if dpi else {}))  # type: ignore[attr-defined]
    write_bytes(os.fspath(path), buffer.getvalue(), flag=flag, own=own)


def write_text(path: str, text: str, *, flag: str, own: str | None = None) -> None:
    """Write `text` to `path` as described above; UsageError naming `flag` when it cannot be written."""
    write_bytes(path, text.encode("utf-8"), flag=flag, own=own)


def write_bytes(path: str, data: bytes, *, flag: str, own: str | None = None) -> None:
    """Write `data` to `path` as described above; UsageError naming `flag` when it cannot be written.
    `own`: None (the user named it), "new" or "replace" (elxpk named it: see above)."""
    if own is not None:
        _write_own(path, data, flag, replace=own == "replace")
        return
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
    except BaseException as exc:  # a file-size limit, a full disk, Ctrl-C: no part-written file is left
        _remove_quietly(tmp)
        if isinstance(exc, OSError):
            raise _write_failed(exc, f"{flag} {shown!r}", "cannot write it") from None
        raise


def own_path_problem(path: str, flag: str, *, replace: bool) -> str | None:
    """Why elxpk's own default `path` cannot be written (see above), or None; checked before any I/O too."""
    try:
        mode = os.lstat(path).st_mode  # the entry itself: a link is not followed
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"{path!r} (elxpk's default path): cannot write it ({exc.strerror}); give {flag} PATH"
    if replace and stat.S_ISREG(mode):
        return None
    what = "a symlink" if stat.S_ISLNK(mode) else "there already" if stat.S_ISREG(mode) else "not a regular file"
    return (f"{path!r} (elxpk's default path) is {what}; elxpk does not write through it or over it: "
            f"remove it, or give {flag} PATH")


def _write_own(path: str, data: bytes, flag: str, *, replace: bool) -> None:
    """Written whole into a temporary entry beside it, then put in place: linked to `path` for a new file
    (a link never replaces an entry: one planted meanwhile is refused), renamed over it to replace one. Any
    failure (a file-size limit's EFBIG, a full disk, Ctrl-C) removes the temporary entry, so the default path
    holds the whole output or nothing, and the command's own retry is never refused for a part-written file."""
    problem = own_path_problem(path, flag, replace=replace)
    if problem:
        raise UsageError(problem)
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        if replace:
            os.replace(tmp, path)  # the entry is replaced; had it become a link, the link is
        else:
            _link_new(tmp, path)
    except FileExistsError:  # planted between the check and the create
        _remove_quietly(tmp)
        raise UsageError(f"{path!r} (elxpk's default path) appeared while writing; remove it, or give {flag} "
                         "PATH") from None
    except BaseException as exc:
        _remove_quietly(tmp)
        if isinstance(exc, OSError):
            raise _write_failed(exc, f"{flag} {path!r}", "cannot write it") from None
        raise
    _remove_quietly(tmp)  # the link's other name


def _link_new(tmp: str, path: str) -> None:
    """`path` made to name the written `tmp`, never replacing an entry (FileExistsError)."""
    try:
        os.link(tmp, path, follow_symlinks=False)
    except OSError as exc:
        if isinstance(exc, FileExistsError) or exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP):
            raise
        if os.path.lexists(path):  # a filesystem without hard links: checked, then renamed
            raise FileExistsError(errno.EEXIST, "exists", path) from None
        os.replace(tmp, path)


def _remove_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _write_failed(exc: OSError, where: str, what: str) -> Exception:
    """A write that ran out of space is the storage's (StorageFull, exit 74); any other failure is the path's."""
    return storage_full_error(exc, where) or UsageError(f"{where}: {what} ({exc.strerror})")
