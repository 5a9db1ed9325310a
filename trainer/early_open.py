"""Open the devices in the background while the trainer imports the rest of itself (issue 49).

On a TPU host, opening the chip is the longest phase of a restart's start-up (libtpu's init: 7.1-8.2 s of
`jax.devices()` on a v5e, bench/bench_chip_open.py), and `python -m trainer` then spent about 1.5 s more
importing orbax, optax and its own modules, one after the other. Both are independent until the backend is
first asked for its devices, and libtpu's init runs outside the GIL, so the trainer starts the open in a
thread as soon as jax's settings are made (the device count, the compilation cache), and the backend's first
caller waits for it there.

Only where this process owns its devices alone: a multi-controller process must join jax.distributed before
its backend starts, and a Pathways proxy opens no chip. The thread is not a daemon: interpreter shutdown
waits for it, since a thread left inside libtpu's init while the interpreter finalizes can abort the
process, and an early exit (bad settings, exit 2) must stay clean. A failed open is not reported here: the
backend's next caller raises the same error, where the trainer classifies it.

Most of the open is libtpu mapping its premapped host buffer (4 GiB by default; 6.0 of 7.6 s on a host
without transparent huge pages, by libtpu's own log). TPU_PREMAPPED_BUFFER_SIZE, libtpu's own variable, makes
it smaller, and the open shorter, at the price of slower saves; the trainer leaves it to the environment
(docs/trainer.md gives both figures, measured in one run by bench/device_restart.sh).
"""

from __future__ import annotations

import threading

_THREAD_NAME = "elxpk-open-devices"


def _open() -> None:
    import jax

    try:
        jax.devices()
    except Exception:  # noqa: BLE001, S110 - the main thread's first call raises it again, and says what
        pass


def open_devices_in_background() -> threading.Thread:
    """Start opening the default backend's devices now; returns the thread (joined by interpreter shutdown)."""
    thread = threading.Thread(target=_open, name=_THREAD_NAME, daemon=False)
    thread.start()
    return thread
