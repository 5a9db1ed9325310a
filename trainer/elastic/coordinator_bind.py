"""The address a coordinator binds: its own host's, not every interface.

jax binds `[::]` by default, which a machine without IPv6 refuses; and with hostNetwork every pod of a node
shares its ports, so where several nodes share one machine (tools/testcluster) each coordinator must take
only its own address. The name may resolve only a moment after the pod starts (the headless Service's
DNS), so a few bounded tries, as jax's own wait_for_coordinator makes.
"""

from __future__ import annotations

import socket
import time


def resolved_bind_address(host: str, port: int, what: str, *, attempts: int = 12, wait_s: float = 5.0) -> str:
    """`host`'s address and `port`; ValueError names `what` (the host as the env gave it) when it never
    resolves."""
    for attempt in range(attempts):
        try:
            return f"{socket.gethostbyname(host)}:{port}"
        except OSError:
            if attempt + 1 < attempts:
                time.sleep(wait_s)
    raise ValueError(f"{what} did not resolve in {attempts * wait_s:.0f} s")
