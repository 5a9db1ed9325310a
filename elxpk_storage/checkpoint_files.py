"""File operations on the checkpoint directory, for a local path and for an object store (`gs://`).

Everything here goes through `etils.epath`, which orbax uses too: a local path through `os`, `gs://`
through fsspec (gcsfs, the `trainer` extra) or TensorFlow's gfile where that is installed. Two things
differ on an object store and are handled here:
- A "directory" is only a name prefix, and a rename is a copy of every object followed by a delete.
- Orbax does not commit a step there by renaming `<step>.orbax-checkpoint-tmp` to `<step>`: it writes
  `<step>/` in place and marks it committed with `<step>/commit_success.txt` (orbax's
  CommitFileTemporaryPath). Orbax lists only marked steps, so an unmarked step directory is a leftover.
"""

from __future__ import annotations

import os
import stat
import time

from etils import epath

from elxpk_contract.errors import UsageError
from elxpk_contract.step_names import canonical_step, step_number
from elxpk_contract.transient import UnconfirmedAbsence, transient_cause
from elxpk_storage import gcs_auth
from elxpk_storage.client_bounds import bound_object_store_clients

TMP_SUFFIX = ".orbax-checkpoint-tmp"
COMMIT_MARKER = "commit_success.txt"  # orbax's atomicity_types.COMMIT_SUCCESS_FILE on gs://
SKIP_REASON_FILE = "elxpk_skip_reason.txt"
DIGEST_FILE = "elxpk_digest.json"  # elxpk_storage.digest's record of a committed step
QUARANTINE_DIR = "elxpk-quarantine"  # inside the checkpoint directory: steps passed over at restore
# What makes a numbered directory a step this trainer (or orbax under it) wrote: one of these files, or
# one of the two items it saves (an interrupted save on gs:// may have written only the items so far).
_STEP_MARKERS = (DIGEST_FILE, "_CHECKPOINT_METADATA", COMMIT_MARKER)
_ITEM_DIRS = ("state", "meta")


def checkpoint_root(checkpoint_dir: str, source: str = "--checkpoint-dir", *,
                    tensorstore: bool = False) -> epath.Path:
    """The checkpoint directory as orbax needs it: a URL as given, a local path made absolute.

    A gs:// one first needs credentials (or an emulator), else UsageError naming `source`: without them its
    clients retry for ever instead of failing. `tensorstore`: orbax will write arrays there."""
    path = epath.Path(checkpoint_dir)
    if not is_object_store(path):
        return epath.Path(os.path.abspath(checkpoint_dir))
    prepare_object_store()  # before the bucket check builds the first gcsfs (it imports neither client)
    if gcs_auth.is_gcs(checkpoint_dir):
        gcs_auth.require_credentials(f"{source} {checkpoint_dir:.200}", tensorstore=tensorstore)
        gcs_auth.require_bucket(f"{source} {checkpoint_dir:.200}", checkpoint_dir)
    return path


def prepare_object_store() -> None:
    """What every process sets before its first gs:// path through epath (which keeps the gcsfs it builds
    then): no listing cache, and the clients' retries bounded (issue 51)."""
    no_listing_cache()
    bound_object_store_clients()


def no_listing_cache() -> None:
    """Make gcsfs list the bucket every time instead of answering from its directory cache.

    gcsfs caches every listing forever and drops an entry only when a write goes through the same
    gcsfs instance. Tensorstore writes the arrays itself and other processes write too, so a cached
    listing would miss committed steps and files, and the digest would be written over a stale file list.
    Set before epath builds (and caches) its filesystem; the operator's own fsspec config wins."""
    import fsspec.config

    for protocol in ("gs", "gcs"):
        fsspec.config.conf.setdefault(protocol, {}).setdefault("use_listings_cache", False)


def is_object_store(path: epath.PathLike) -> bool:
    return "://" in os.fspath(path)


def present(path: epath.Path) -> bool:
    """Whether `path` exists, raising when the storage cannot say. fsspec's `exists` answers False for any
    error, so during an outage a committed step's marker would read as absent and the step as a leftover
    to delete; here only "not found" is False (a local path: `os.stat`, whose PermissionError raises too).
    On an object store "not found" counts only when a fresh listing of its folder agrees: one 404 for an
    object that is there would otherwise make a committed step a leftover (UnconfirmedAbsence, transient)."""
    try:
        path.stat()
    except (FileNotFoundError, NotADirectoryError) as exc:
        if is_object_store(path) and any(child.name == path.name for child in _listed(path.parent)):
            raise UnconfirmedAbsence(str(path)) from exc
        return False
    return True


def _listed(folder: epath.Path) -> list[epath.Path]:
    try:
        return children(folder)
    except FileNotFoundError:  # no object under that prefix at all
        return []


def _carries_step_metadata(path: epath.Path) -> bool:
    return any(present(path / m) for m in _STEP_MARKERS) or any((path / d).is_dir() for d in _ITEM_DIRS)


def is_step_dir(path: epath.Path) -> bool:
    """Whether `path` is a step directory of a checkpoint: a canonical step number (what orbax names a step
    and the run records can hold) carrying this trainer's or orbax's metadata. Nothing else in a checkpoint
    directory is ever moved or deleted."""

    if canonical_step(path.name) is None or is_link(path):
        return False
    return _carries_step_metadata(path)


def _is_step_entry(path: epath.Path, step: int) -> bool:
    """An entry of step `step` (`<step>`, `<step>.orbax-checkpoint-tmp...`) that may be moved aside: one with
    orbax's or the trainer's files, a symbolic link (moving a link moves the link, never what it names), or
    an empty one (a save killed before its first write: orbax would list it as its latest step)."""
    name, prefix = path.name, str(step)
    if not (name == prefix or (name.startswith(prefix) and name[len(prefix)] not in "0123456789")):
        return False
    if is_link(path):
        return True
    if not path.is_dir():
        return False
    return _carries_step_metadata(path) or is_empty(path)


def children(path: epath.Path) -> list[epath.Path]:
    """The entries of the directory `path`; every listing of a checkpoint directory or step goes through here.

    On an object store, without the entry gcsfs makes of a folder's own placeholder object (`name/`, zero
    bytes: what the console's "create folder" and other tools write): it lists the folder inside itself, so
    epath names it `path/<path.name>`, which does not exist. Taken for a file, it made an empty step hold one
    and a whole step hold an empty file (torn, then moved aside)."""
    found = list(path.iterdir())
    if not is_object_store(path):
        return found
    return [child for child in found if child.name != path.name or child.exists()]


def is_empty(path: epath.Path) -> bool:
    """A directory with no entry at all (on an object store, a bare prefix or a folder placeholder alone)."""
    return not children(path)


def cwd_or_parent(root: epath.Path) -> str:
    """'the working directory' or 'a parent of the working directory (...)' when `root` is either, else ''.
    Nothing elxpk moves may lie under the shell's feet."""
    if is_object_store(root):
        return ""
    real, cwd = os.path.realpath(os.fspath(root)), os.path.realpath(os.getcwd())
    if cwd == real:
        return "the working directory"
    return f"a parent of the working directory ({cwd})" if cwd.startswith(real.rstrip(os.sep) + os.sep) else ""


def refuse_unsafe_checkpoints(checkpoint_dir: str, source: str = "--checkpoint-dir") -> None:
    """UsageError (nothing written) when the trainer must not manage `checkpoint_dir`: on gs://, no credentials
    for its clients (orbax's tensorstore included); the working directory
    or a parent of it (its numbered folders would be taken for steps), or a directory holding numbered
    folders that are not checkpoints (orbax would list them as steps: restore would move them aside and
    its cleanup of old steps would delete them)."""

    root = checkpoint_root(checkpoint_dir, source, tensorstore=True)
    refuse_file_in_path(source, root)
    where = cwd_or_parent(root)
    if where:
        raise UsageError(f"{source} {checkpoint_dir!r:.200}: is {where}; give the checkpoints a directory of "
                         "their own, e.g. RUN_DIR/checkpoints (the default)")
    try:
        entries = children(root) if root.is_dir() else []
    except OSError as exc:
        if transient_cause(exc) is not None:
            raise  # the storage's failure, retried by the restart (exit 75), never the input's
        raise UsageError(f"{source} {checkpoint_dir!r:.200}: cannot be listed ({exc})") from None
    # orbax's own listing takes any str.isdigit() name for a step (`²`, `٣` included), so this test is wider
    # than a step number on purpose. A link is not foreign: restore reports it and moves the link aside.
    # An empty one holds nothing to lose: restore moves it aside as an uncommitted save (see `uncommitted`).
    foreign = sorted(c.name for c in entries if c.name.isdigit() and not is_link(c) and c.is_dir()
                     and not is_step_dir(c) and not (canonical_step(c.name) is not None and is_empty(c)))
    if foreign:
        shown = ", ".join(f"{n[:30]}/" for n in foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        # `0025`, `２５` or 20 digits may hold a copy of a real step: the name, not the content, is what is wrong
        why = ("no orbax or elxpk metadata" if all(canonical_step(n) is not None for n in foreign) else
               "a step folder is named with ASCII digits, no leading zero, as orbax names it; or no orbax or elxpk "
               "metadata")
        raise UsageError(f"{source} {checkpoint_dir!r:.200}: holds {shown}, numbered like checkpoint steps but not "
                         f"written by the trainer ({why}); move them out, or give another checkpoint directory")


def refuse_file_in_path(source: str, path: epath.PathLike) -> None:
    """UsageError when the local directory `path`, or the nearest of its parents that exists, is not a
    directory: every write there would fail (ENOTDIR, EEXIST), and only the flag can fix it."""
    if is_object_store(path):
        return
    given = epath.Path(os.path.abspath(os.fspath(path)))
    current = given
    while not _exists(current) and current.parent != current:
        current = current.parent
    if _exists(current) and not current.is_dir():
        what = "is" if current == given else f"lies under {current}, which is"
        raise UsageError(f"{source} {os.fspath(path)!r:.200}: {what} a file, not a directory; give a directory")


def is_link(path: epath.PathLike) -> bool:
    """A symbolic link (a local path: an object store has none). Nothing here reads or walks through one."""
    return not is_object_store(path) and os.path.islink(os.fspath(path))


class LinkInStep(OSError):
    """A checkpoint entry is, or holds, a symbolic link or a special file: never walked, read or restored."""

    def __init__(self, rel: str, path: epath.Path) -> None:
        local = os.fspath(path)
        what = f"a symbolic link {rel} (-> {os.readlink(local)[:200]})" if os.path.islink(local) else \
            f"a special file {rel} (not a regular file)"
        super().__init__(f"holds {what}: not restored")


def walk(top: epath.Path) -> tuple[dict[str, epath.Path], list[str]]:
    """(every regular file below `top` keyed by its posix path relative to `top`, the relative paths of every
    symbolic link or special file met). Never follows a link: a link to `/` is one entry, not a walk of `/`.

    Built on iterdir rather than epath's walk: over fsspec, walk yields roots without their `gs://`."""
    found: dict[str, epath.Path] = {}
    odd: list[str] = []
    pending = [(top, "")]
    local = not is_object_store(top)
    while pending:
        folder, prefix = pending.pop()
        for child in children(folder):
            rel = f"{prefix}{child.name}"
            if local:
                mode = os.lstat(os.fspath(child)).st_mode
                if stat.S_ISDIR(mode):
                    pending.append((child, rel + "/"))
                elif stat.S_ISREG(mode):
                    found[rel] = child
                else:
                    odd.append(rel)
            elif child.is_dir():
                pending.append((child, rel + "/"))
            else:
                found[rel] = child
    return found, sorted(odd)


def files_under(top: epath.Path) -> dict[str, epath.Path]:
    """Every file below `top` (as `walk`); LinkInStep when `top` is, or holds, a link or a special file."""
    if is_link(top):
        raise LinkInStep(top.name, top)
    found, odd = walk(top)
    if odd:
        raise LinkInStep(odd[0], top / odd[0])
    return found


def read_bounded(path: epath.Path, limit: int) -> bytes:
    """At most `limit` + 1 bytes of the file at `path` (the caller refuses more). A local path must be a
    regular file reached without a link: a FIFO would block the open, /dev/zero never end, and a link
    would read outside the checkpoint directory (OSError then, as for a missing file)."""
    if is_object_store(path):
        with path.open("rb") as handle:
            return handle.read(limit + 1)
    fd = os.open(os.fspath(path), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path.name} is not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read(limit + 1)
    finally:
        os.close(fd)


def uncommitted(directory: epath.Path) -> list[tuple[epath.Path, int | None]]:
    """(path, step or None) of every save that never committed, oldest name first: orbax's tmp directories,
    on an object store the steps without orbax's commit marker, and an empty step folder anywhere (a save
    killed before its first write, which orbax's own listing would take for the latest step)."""
    if not directory.is_dir():  # an object store has no directory before its first object: nothing saved yet
        return []
    leftovers = []
    for path in sorted(children(directory), key=lambda p: p.name):
        if path.name.endswith(TMP_SUFFIX):
            step = path.name[: -len(TMP_SUFFIX)]
            leftovers.append((path, step_number(step)))
        elif (is_object_store(directory) and is_step_dir(path)
              and not present(path / COMMIT_MARKER)):
            leftovers.append((path, int(path.name)))
        elif (step := canonical_step(path.name)) is not None and not is_link(path) and path.is_dir() \
                and is_empty(path):
            leftovers.append((path, step))
    return leftovers


def remove_tree(path: epath.Path, *, ignore_errors: bool = False) -> None:
    """Delete a directory and everything in it; a path already gone is never an error."""
    try:
        path.rmtree()
    except FileNotFoundError:
        pass
    except OSError:
        if not ignore_errors:
            raise


def quarantine_dir(directory: epath.Path) -> epath.Path:
    """`<directory>/elxpk-quarantine`, once it is known to be a real directory there or absent: UsageError
    (exit 2, nothing moved) when the name is taken by a file or a symbolic link, which would take the steps
    out of the checkpoint directory or fail halfway through."""
    folder = directory / QUARANTINE_DIR
    if is_link(folder):
        raise UsageError(f"{folder}: is a symbolic link (-> {os.readlink(os.fspath(folder))[:200]}), not a "
                         "directory inside the checkpoint directory; remove the link (torn steps are moved there)")
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"{folder}: is a file, not a directory; move it away (torn steps are moved there)")
    return folder


def quarantine(directory: epath.Path, step: int, reason: str, *, now_ms: int | None = None,
               name: str | None = None) -> epath.Path | None:
    """Move step `step` to `<directory>/elxpk-quarantine/<step>-<ms>/` with its skip reason; return the target,
    or None when the entry is gone (another process moved it first: nothing to do, nothing lost).
    `name`: the entry to move when it is not `<step>` (orbax's `<step>.orbax-checkpoint-tmp` of a save that
    never committed; `elxpk checkpoint inspect --quarantine` moves those too).

    Moved rather than marked: orbax lists every committed step directory, so a marker alone would leave
    the step in orbax's list, and a later save of the same step number would be refused. The quarantine
    stays inside the checkpoint directory (orbax lists only numbered names), so nothing outside it is
    written; only an entry of that step (`_is_step_entry`) is ever moved. A step that is a symbolic link is
    moved as the link (a rename never follows it), and its reason file goes beside it, never through it."""
    source = directory / (name or str(step))
    try:
        movable = _is_step_entry(source, step)
    except FileNotFoundError:
        movable = False
    if not movable:
        if not _exists(source):
            return None
        raise ValueError(f"{source} is not a checkpoint step directory; not moving it")
    folder = quarantine_dir(directory)
    stamp = int(time.time() * 1000) if now_ms is None else now_ms
    target = folder / f"{step}-{stamp}"
    if not is_object_store(directory):
        folder.mkdir(parents=True, exist_ok=True)
        suffix = 1
        while _exists(target):  # another quarantine in the same millisecond: never rename onto it
            suffix += 1
            target = folder / f"{step}-{stamp}-{suffix}"
        try:
            os.rename(os.fspath(source), os.fspath(target))
        except FileNotFoundError:
            return None  # moved by another process between the check and the rename
        except OSError:  # another filesystem, e.g. the checkpoint directory is a mount point
            if is_link(source):
                raise
            _copy_then_delete(source, target)
        if is_link(target):
            _write_no_follow(folder / f"{target.name}.{SKIP_REASON_FILE}", reason + "\n")
        else:
            _write_no_follow(target / SKIP_REASON_FILE, reason + "\n")
        return target
    _copy_then_delete(source, target)
    (target / SKIP_REASON_FILE).write_text(reason + "\n", encoding="utf-8")
    return target


def _exists(path: epath.Path) -> bool:
    """The entry exists (a dangling link too)."""
    return os.path.lexists(os.fspath(path)) if not is_object_store(path) else path.exists()


def _write_no_follow(path: epath.Path, text: str) -> None:
    """Write a small local file, replacing a link of that name rather than writing through it."""
    local = os.fspath(path)
    if os.path.islink(local):
        os.unlink(local)
    fd = os.open(local, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)


def _copy_then_delete(source: epath.Path, target: epath.Path) -> None:
    """A move where no rename exists, as on an object store, where a "move" is always a copy plus a delete.

    Every file is copied before anything is deleted. A crash in between leaves the source partly deleted:
    it then fails its digest at the next restore and is moved again, so it is never restored, and the
    complete copy is already in the quarantine."""
    local = not is_object_store(target)
    try:
        for rel, path in sorted(files_under(source).items()):
            if local:
                (target / rel).parent.mkdir(parents=True, exist_ok=True)
            path.copy(target / rel, overwrite=True)
    except Exception:
        # A copy cut short (the storage failed mid-way): the source is whole, so drop the part-made copy
        # rather than leave a half step in the quarantine; the caller retries the move.
        remove_tree(target, ignore_errors=True)
        raise
    remove_tree(source)


def write_whole(path: epath.Path, text: str, *, tmp_name: str) -> None:
    """Replace the file at `path` so a reader sees the old content or the new, never a part: on an object
    store one upload is atomic; on a disk, write `tmp_name` beside it, then rename it over `path`."""
    if is_object_store(path):
        path.write_text(text, encoding="utf-8")
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / tmp_name
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
