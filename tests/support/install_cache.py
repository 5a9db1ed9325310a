"""What the tests install, built once into ~/.cache/elxpk/<kind>/<key>/ (ELXPK_CACHE_DIR moves it) and found
at once after that. The key is a hash of what decides the contents, so a change of pins is a new folder.

A build goes into a partial folder renamed into place when complete, under a lock: another session or lane
building the same key waits and then uses it, and a build killed half-way leaves no folder that looks done.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
from collections.abc import Callable
from pathlib import Path


def cache_root(kind: str) -> Path:
    return Path(os.environ.get("ELXPK_CACHE_DIR", Path.home() / ".cache" / "elxpk")) / kind


def content_key(*parts: str | bytes) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode() if isinstance(part, str) else part)
        digest.update(b"\0")
    return digest.hexdigest()[:12]


def cached_build(kind: str, key: str, build: Callable[[Path], None], *, done: str = "") -> Path:
    """The folder ~/.cache/elxpk/<kind>/<key>, made by `build(partial_folder)` when missing. `done`: the path,
    inside it, whose presence says it is complete (default: the folder itself). `build` raises to give up;
    its partial folder is removed."""
    root = cache_root(kind)
    root.mkdir(parents=True, exist_ok=True)
    final = root / key
    if (final / done).exists():
        return final
    with open(root / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (final / done).exists():
            return final
        partial = root / f"{key}.partial-{os.getpid()}"
        shutil.rmtree(partial, ignore_errors=True)
        try:
            build(partial)
        except BaseException:
            shutil.rmtree(partial, ignore_errors=True)
            raise
        shutil.rmtree(final, ignore_errors=True)  # an incomplete one, from before this module checked `done`
        partial.rename(final)
    return final
