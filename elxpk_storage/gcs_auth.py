"""Whether requests to `gs://` can authenticate, decided in bounded time before any client may wait for ever.

Without credentials the clients behind a gs:// path do not fail: gcsfs falls back to anonymous requests
and retries them, and tensorstore (orbax's arrays) keeps retrying its credential lookup on the GCE metadata
server, so a trainer or a CLI command hangs. Every gs:// entry point asks here first and refuses with one
line (UsageError, exit 2: a configuration the user fixes; nothing was read or written).

The lookup is google-auth's own `google.auth.default()`, the Application Default Credentials that gcsfs and
the launcher's JSON API client use and that tensorstore mirrors (GOOGLE_APPLICATION_CREDENTIALS, the
well-known file gcloud writes, then the metadata server). Its metadata-server probe is bounded (a few
attempts of GCE_METADATA_TIMEOUT, default 3 s, GCE_METADATA_DETECT_RETRIES, default 3) and honours
GCE_METADATA_HOST/GCE_METADATA_IP and NO_GCE_CHECK; it also takes the machine's own word (DMI product name)
that it is a Google VM. So on GKE, Workload Identity (the metadata server) passes; with nothing, the answer
comes in seconds. These metadata-server retries (and those of its token fetches) stay google-auth's own:
the launcher's one retry policy (elxpk/retry_policy.py) would only lengthen that answer.

Emulators: STORAGE_EMULATOR_HOST sends gcsfs and the launcher's client to an emulator, unauthenticated;
tensorstore takes its own TENSORSTORE_GCS_HTTP_URL and GOOGLE_AUTH_TOKEN_FOR_TESTING (its documented testing
variables). google-auth is imported only when a gs:// path is used, so rendering a manifest never loads it.
"""

from __future__ import annotations

import functools
import os
from typing import Any

from elxpk_contract.errors import UsageError

EMULATOR = "STORAGE_EMULATOR_HOST"  # gcsfs, google-cloud-storage, elxpk/cluster/api/gcs.py
# gcsfs's switch between its default file system, which first asks the storage control API (gRPC) whether
# a bucket is hierarchical, and its plain JSON-API one (read once, when gcsfs is imported).
GCSFS_BUCKET_TYPE_PROBE = "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT"
TENSORSTORE_EMULATOR = ("TENSORSTORE_GCS_HTTP_URL", "GOOGLE_AUTH_TOKEN_FOR_TESTING")
SCOPE = "https://www.googleapis.com/auth/devstorage.read_write"
# The last resort of google-auth's lookup and tensorstore's (gcloud's configuration directory).
WELL_KNOWN_FILE = "application_default_credentials.json"


def is_gcs(path: str) -> bool:
    return path.startswith("gs://")


def well_known_file() -> str:
    config = os.environ.get("CLOUDSDK_CONFIG") or os.path.join(os.path.expanduser("~"), ".config", "gcloud")
    return os.path.join(config, WELL_KNOWN_FILE)


LOGIN = "gcloud auth application-default login"  # what writes the well-known file, spelt as it is typed


def how_to_authenticate() -> str:
    """The fix for missing Google credentials, the one text every command and the trainer give (exit 2)."""
    return (f"run `{LOGIN}` (it writes {well_known_file()}), or set GOOGLE_APPLICATION_CREDENTIALS=<service "
            "account key file>; on GKE, Workload Identity (the metadata server) gives them")


def emulated(what: str, *, tensorstore: bool = False) -> bool:
    """Whether the gs:// clients go to an emulator (no credentials needed). UsageError when only some of them
    would: with STORAGE_EMULATOR_HOST alone, orbax's arrays would go to Cloud Storage (or wait on credentials)
    while the rest of the checkpoint goes to the emulator."""
    if not os.environ.get(EMULATOR):
        return False
    missing = [name for name in TENSORSTORE_EMULATOR if tensorstore and not os.environ.get(name)]
    if missing:
        raise UsageError(f"{what}: {EMULATOR} is set but {' and '.join(missing)} not: orbax writes a checkpoint's arrays "
                         "through tensorstore, which takes the emulator from TENSORSTORE_GCS_HTTP_URL and a token "
                         "from GOOGLE_AUTH_TOKEN_FOR_TESTING; set them too, or unset " + EMULATOR)
    _no_bucket_type_probe()
    return True


def _no_bucket_type_probe() -> None:
    """Give gcsfs its plain JSON-API file system while an emulator serves gs://.

    An emulator speaks only the JSON API. gcsfs's default file system asks the storage control API (gRPC,
    with Google credentials) for each bucket's type; against an emulator that can never answer, a failed
    answer is not cached, and gcsfs falls back to the plain file system's requests. So every operation asked
    again: a credential lookup, about 2 ms of CPU and a warning line each (1,126 lines in the log of one
    24-step trainer pod on tools/testcluster). The operator's own setting wins; gcsfs reads it once, at
    import, which every gs:// entry point does after asking here."""
    os.environ.setdefault(GCSFS_BUCKET_TYPE_PROBE, "false")


@functools.cache
def _default_credentials(scopes: tuple[str, ...]) -> tuple[Any, str]:
    """(credentials, '') or (None, why not): google-auth's lookup, once per process."""
    try:
        import google.auth  # lazy: only a gs:// path loads google-auth; rendering a manifest must not
        from google.auth.exceptions import GoogleAuthError  # lazy: as above
    except ImportError:
        return None, "needs google-auth (pip install 'elxpk[trainer]', which brings gcsfs and google-auth)"
    try:
        credentials, _ = google.auth.default(scopes=list(scopes))
    except GoogleAuthError as exc:
        first = (str(exc).splitlines() or [type(exc).__name__])[0]
        if "default credentials were not found" in first.lower():
            return None, f"no Google credentials found; {how_to_authenticate()}"
        return None, f"cannot load Google credentials ({first[:300]}); {how_to_authenticate()}"
    return credentials, ""


def default_credentials(what: str) -> Any:
    """Application Default Credentials for Cloud Storage; UsageError naming `what` (e.g. '--record gs://b/o')
    when there are none."""
    credentials, problem = _default_credentials((SCOPE,))
    if credentials is None:
        raise UsageError(f"{what}: {problem}")
    return credentials


def require_credentials(what: str, *, tensorstore: bool = False) -> None:
    """UsageError (one line naming `what`) unless the gs:// clients can authenticate or go to an emulator.
    `tensorstore`: the path is a checkpoint directory orbax writes arrays to (tensorstore's own variables)."""
    if not emulated(what, tensorstore=tensorstore):
        default_credentials(what)


def require_bucket(what: str, url: str) -> None:
    """UsageError (one line naming `what`) when Cloud Storage answers that the bucket of `url` does not
    exist: every write there would fail at its first save or record, as exit 1 that the restart budget paid
    for, where only the flag can fix it. Asked after require_credentials, once per bucket and process.

    Only a definite "no such bucket" (404 on the bucket) refuses: a 403 (object grants without
    storage.buckets.get are common), an outage or a client without the call leave the answer to the first
    read or write, whose own errors are classified as before."""
    bucket = url[len("gs://"):].split("/", 1)[0]
    if _bucket_missing(bucket):
        raise UsageError(f"{what}: the bucket {bucket!r} does not exist; create it (gcloud storage buckets "
                         f"create gs://{bucket}) or give a path in an existing bucket")


@functools.cache
def _bucket_missing(bucket: str) -> bool:
    import fsspec  # lazy: a gs:// path only (gcsfs)

    call = getattr(fsspec.filesystem("gs"), "call", None)  # gcsfs's JSON API call; a stand-in may lack it
    if call is None:
        return False
    try:
        call("GET", "b/{}", bucket, json_out=True)
    except FileNotFoundError:  # gcsfs's 404
        return True
    except Exception:  # noqa: BLE001 - 403, an outage: the bucket may exist; the first read or write decides
        return False
    return False
