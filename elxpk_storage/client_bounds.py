"""The object-store clients' own retries and waits, bounded to fit inside the trainer's tries.

A restore's read is tried 3 times by the trainer (trainer/ckpt/transient_retry.py), then the process exits
75 and the group restart tries again. Left at their defaults, the clients under it retry for much longer
on their own: tensorstore (orbax's arrays) up to 32 times with waits growing to 32 s, and a read that hangs
waits on curl for ever; gcsfs (listings, digests, orbax's metadata, the compile cache) retries 6 times with
no read timeout of its own (aiohttp's 5 minutes). A persistent outage then held a restore for the whole
30-minute restore deadline (issue 51). Bounded here:
- tensorstore: 4 retries, 1 s doubling to 8 s (about 15 s of waiting per read), and a transfer slower than
  1 byte/s for 20 s is ended (curl's low-speed limit: a hung read);
- gcsfs: a read that receives nothing for 20 s, or a connection not made in 20 s, is ended (its 6
  retries then wait about 18 s in all).
So one read in an outage costs about two minutes at most, the trainer's 3 tries a few, and the process
exits 75 well inside the restore deadline. An operator's own fsspec configuration and TENSORSTORE_CURL_*
variables win over these.
"""

from __future__ import annotations

import os
from typing import Any

READ_STALL_S = 20  # nothing received for this long: the read is hung
TENSORSTORE_RETRIES = {"max_retries": 4, "initial_delay": "1s", "max_delay": "8s"}
_CURL_ENV = {"TENSORSTORE_CURL_LOW_SPEED_TIME_SECONDS": str(READ_STALL_S),
             "TENSORSTORE_CURL_LOW_SPEED_LIMIT_BYTES": "1"}


def bound_object_store_clients() -> None:
    """Set the bounds for this process: before tensorstore opens its first connection and epath builds its
    gcsfs filesystem (both keep what they found then). Idempotent; costs no import of either client."""
    for name, value in _CURL_ENV.items():
        os.environ.setdefault(name, value)
    import aiohttp
    import fsspec.config

    timeout = aiohttp.ClientTimeout(total=None, sock_connect=READ_STALL_S, sock_read=READ_STALL_S)
    for protocol in ("gs", "gcs"):
        fsspec.config.conf.setdefault(protocol, {}).setdefault("requests_timeout", timeout)


def bounded_retries(parent: Any) -> Any:
    """A tensorstore context under `parent` (orbax's: its cache and concurrency kept) whose Cloud Storage
    requests are retried TENSORSTORE_RETRIES times at most instead of tensorstore's 32."""
    import tensorstore as ts

    return ts.Context({"gcs_request_retries": TENSORSTORE_RETRIES}, parent)
