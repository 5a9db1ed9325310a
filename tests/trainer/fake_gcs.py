"""An in-process stand-in for GCS behind fsspec, for tests that cannot reach a bucket.

etils.epath sends `gs://` paths to fsspec's "gcs" filesystem (gcsfs in the image). This class is an
fsspec filesystem (the protocol epath speaks) that keeps objects in memory, registered under "gs" and
"gcs" through fsspec's public registry. Install it in a fresh interpreter only: the registry and epath's
filesystem cache are process-wide. It has fsspec's memory semantics, not GCS's (empty directories exist
here), and orbax's array writes do not go through fsspec, so a full save cannot run against it.
"""

from __future__ import annotations

import os

import fsspec
from fsspec.implementations.memory import MemoryFileSystem

from elxpk_storage import gcs_auth


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
    # gs:// reaches this stand-in, not Cloud Storage: say so as an emulator does, so the trainer's credentials
    # check (elxpk_storage/gcs_auth.py) lets it through. The address is never dialled (fsspec goes here).
    url_var, token_var = gcs_auth.TENSORSTORE_EMULATOR
    os.environ.update({gcs_auth.EMULATOR: "http://fake-gcs.invalid", url_var: "http://fake-gcs.invalid",
                       token_var: "fake"})
