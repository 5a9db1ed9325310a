"""An in-process stand-in for GCS behind fsspec, for tests that cannot reach a bucket.

etils.epath sends `gs://` paths to fsspec's "gcs" filesystem (gcsfs in the image). This class is an
fsspec filesystem (the protocol epath speaks) that keeps objects in memory, registered under "gs" and
"gcs" through fsspec's public registry. Install it in a fresh interpreter only: the registry and epath's
filesystem cache are process-wide. It has fsspec's memory semantics, not GCS's (empty directories exist
here), and orbax's array writes do not go through fsspec, so a full save cannot run against it.
"""

from __future__ import annotations

import fsspec
from fsspec.implementations.memory import MemoryFileSystem


class FakeGcsFileSystem(MemoryFileSystem):
    protocol = ("gs", "gcs")
    store: dict = {}  # its own, not MemoryFileSystem's
    pseudo_dirs = [""]

    @classmethod
    def _strip_protocol(cls, path):
        path = str(path)
        for prefix in ("gs://", "gcs://"):
            if path.startswith(prefix):
                path = path[len(prefix):]
        return MemoryFileSystem._strip_protocol(path)


def install() -> None:
    for name in FakeGcsFileSystem.protocol:
        fsspec.register_implementation(name, FakeGcsFileSystem, clobber=True)
