"""A cache whose entries the trainer loads and runs (jax's compiled executables, the serialized start-up
executables of issue 49) is trusted like code: whoever can write it can run code in the trainer.

So every such cache directory is opened through `open_trusted_dir`, one rule for all of them:
- the path the trainer chose itself (a default beside the checkpoints) is never followed through a symbolic
  link: a link planted there would send the entries, and the code they are, wherever it points;
- a local directory is created private (0700) and, when it exists, must belong to this user and be
  writable by no one else; otherwise it is not used (one warning line, the run goes on uncached);
- an object store has no modes: its bucket's IAM decides who can write it (docs/trainer.md says how to
  keep a cache apart from a widely shared bucket).
And a cache that fails or hangs costs seconds, not the start: `BoundedLookups` gives each lookup
LOOKUP_BOUND_S, and on the first that fails or runs over it turns the cache off for the rest of the process.
"""

from __future__ import annotations

import os
import stat
import sys
import threading
from collections.abc import Callable
from typing import Any, TypeVar

LOOKUP_BOUND_S = 10.0  # one entry read or written: a local disk takes milliseconds, GCS a second for 100 MB
T = TypeVar("T")


def open_trusted_dir(path: str, *, chosen_by_user: bool) -> str | None:
    """Create or check the cache directory `path`; None when it may be used, else why not (one clause).

    `chosen_by_user`: the user gave the path (a link they made is theirs to follow); otherwise the trainer
    derived it, and a link there is refused."""
    if "://" in path:
        return _object_store_dir(path)
    if not chosen_by_user and os.path.islink(path):
        return f"is a symbolic link (-> {os.readlink(path)[:200]}), which a cache of code is never written through"
    parent = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(parent, exist_ok=True)
        try:
            os.mkdir(path, 0o700)  # private from the start: no window in which others could write it
            os.chmod(path, 0o700)  # whatever the umask took away
        except FileExistsError:
            pass
        info = os.stat(path) if chosen_by_user else os.lstat(path)
    except OSError as exc:
        return f"cannot be used ({type(exc).__name__}: {exc.strerror or exc})"
    if not stat.S_ISDIR(info.st_mode):
        return "is not a directory"
    if info.st_uid != os.geteuid():
        return (f"belongs to uid {info.st_uid}, not this user ({os.geteuid()}): whoever can write a cache of "
                "compiled code can run code in the trainer")
    if info.st_mode & 0o022:
        return (f"is writable by others (mode {stat.S_IMODE(info.st_mode):04o}): whoever can write a cache of "
                "compiled code can run code in the trainer; chmod 700 it, or give another directory")
    return None


def _object_store_dir(path: str) -> str | None:
    try:
        from etils import epath  # as jax reaches a gs:// cache

        epath.Path(path).mkdir(parents=True, exist_ok=True)
    except Exception as exc:  # noqa: BLE001 - a storage or permission error of any client: run uncached
        first = (str(exc).splitlines() or [""])[0][:200]
        return f"cannot be used ({type(exc).__name__}: {first})"
    return None


class BoundedLookups:
    """Wraps a cache (`get(key)`, `put(key, value)`): each call runs on a daemon thread for at most
    `bound_s`; one that raises or runs over turns the cache off for good (one warning line), and every
    later call is a miss. A hung read then holds one abandoned thread, never the start or the exit."""

    def __init__(self, cache: Any, where: str, bound_s: float = LOOKUP_BOUND_S) -> None:
        self.cache, self._where, self._bound_s = cache, where, bound_s
        self.off = False
        self._lock = threading.Lock()

    def get(self, key: str) -> Any:
        return self.bounded("reading an entry", lambda: self.cache.get(key))

    def put(self, key: str, value: Any) -> None:
        self.bounded("writing an entry", lambda: self.cache.put(key, value))

    def bounded(self, what: str, call: Callable[[], T]) -> T | None:
        """`call()`'s result, or None once it raised or ran over the bound (the cache is then off)."""
        if self.off:
            return None
        box: list = []

        def run() -> None:
            try:
                box.append((True, call()))
            except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread, which decides
                box.append((False, exc))

        worker = threading.Thread(target=run, name="elxpk-cache-lookup", daemon=True)
        worker.start()
        worker.join(self._bound_s)
        if box and box[0][0]:
            return box[0][1]
        why = (f"{type(box[0][1]).__name__}: {(str(box[0][1]).splitlines() or [''])[0][:200]}" if box
               else f"no answer within {self._bound_s:g} s")
        self._turn_off(f"{what} failed ({why})")
        return None

    def _turn_off(self, why: str) -> None:
        with self._lock:
            if self.off:
                return
            self.off = True
        print(f"warning: compilation cache {self._where}: {why}; the cache is off for the rest of this process, "
              "every later compile starts from scratch", file=sys.stderr, flush=True)
