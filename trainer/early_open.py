"""Open the devices in the background while the trainer imports the rest of itself (issue 49).

On a TPU host, opening the chip is the longest phase of a restart's start-up (libtpu's init: about 9.5 s on
a v5e, while `python -m trainer` then spends about 1.5 s importing orbax, optax and the trainer's own
modules, one after the other). Both are independent until the backend is first asked for its devices, and
libtpu's init runs outside the GIL, so the trainer starts the open in a thread as soon as jax's settings are
made (the device count, the compilation cache), and the backend's first caller waits for it there.

Only where this process owns its devices alone: a multi-controller process must join jax.distributed before
its backend starts, and a Pathways proxy opens no chip. The thread is not a daemon: interpreter shutdown
waits for it, since a thread left inside libtpu's init while the interpreter finalizes can abort the
process, and an early exit (bad settings, exit 2) must stay clean. A failed open is not reported here: the
backend's next caller raises the same error, where the trainer classifies it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import MutableMapping

_THREAD_NAME = "elxpk-open-devices"
# libtpu maps a host buffer for transfers when it opens the chip, 4 GiB by default. On a host without
# transparent huge pages that mapping is most of the open: 6.0 of the 7.6 s of a v5e's `jax.devices()`
# (libtpu's own log: "Starting premapped memory manager initialization" to "tpu::System initialized";
# bench/bench_chip_open.py). The trainer's transfers are one array at a time (a restore's read, a save's
# copy), each far under this size; bench/device_restart.sh measures a restore and a save under it against
# the 4 GiB default in the same run. A value the environment already holds is kept (libtpu's own variable).
PREMAPPED_BUFFER_BYTES = 512 * 2**20
PREMAPPED_BUFFER_VARIABLE = "TPU_PREMAPPED_BUFFER_SIZE"


def default_premapped_buffer(environ: MutableMapping[str, str] | None = None) -> None:
    """Give libtpu the trainer's premapped buffer unless the environment names one; before any backend opens."""
    env = os.environ if environ is None else environ
    env.setdefault(PREMAPPED_BUFFER_VARIABLE, str(PREMAPPED_BUFFER_BYTES))


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
