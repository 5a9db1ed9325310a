"""A restore read that failed for a transient cause is retried a bounded number of times, then the process
exits 75, every checkpoint step left in place.

What is transient is elxpk_contract.transient's one classifier (out of memory, storage unavailable or slow,
access denied, host resources); anything else propagates unchanged to the caller, which decides whether it is
content (the step is set aside) or an error of its own. Between tries the caller frees what it can (the
arrays a failed try left on the devices, a cycle holding them), as marin#8480 does before a restore.

Bounds: RESTORE_TRIES tries of one step, BACKOFF_S seconds apart (5 s of waiting in all, on top of the
storage clients' own retries, bounded to fit by elxpk_storage.client_bounds: gcsfs retries a 5xx 6 times, tensorstore 4
times, and a read stalled 20 s ends), all inside the restore's
own deadline (trainer.ckpt.deadline, 30 min, then 76). OLMo-core retries network reads 3 times too. After
the last try the process exits SLICE_LOST (75, retryable, `Count`): the JobSet restarts the group, and the
new attempt tries the same newest step again, so a longer outage costs restarts, never a checkpoint.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TypeVar

from elxpk_contract.exit_codes import SLICE_LOST, TrainerStopped
from elxpk_contract.transient import describe, transient_cause

RESTORE_TRIES = 3
BACKOFF_S = (1.0, 4.0)  # before the second and the third try
T = TypeVar("T")


def retry_transient(what: str, attempt: Callable[[], T], *, free: Callable[[], None],
                    sleep: Callable[[float], None]) -> T:
    """`attempt()`'s result; a transient failure is retried after `free()` and a backoff, and after the last
    try becomes TrainerStopped(SLICE_LOST) naming `what` (e.g. "reading step 30"). Anything else raises as is."""
    for tried in range(1, RESTORE_TRIES + 1):
        try:
            return attempt()
        except TrainerStopped:
            raise
        except Exception as exc:  # noqa: BLE001 - classified here; what is not transient is re-raised
            if transient_cause(exc) is None:
                raise
            free()
            if tried == RESTORE_TRIES:
                raise TrainerStopped(SLICE_LOST, f"restore: {what} failed {tried} times ({describe(exc)}); every "
                                                 f"checkpoint step is left in place; exit {SLICE_LOST.code} (retryable: "
                                                 "the restart tries the same step again)") from None
            wait = BACKOFF_S[tried - 1]
            print(f"warning: restore: {what} failed ({describe(exc)}); try {tried + 1} of {RESTORE_TRIES} in "
                  f"{wait:g} s, no step set aside", file=sys.stderr, flush=True)
            sleep(wait)
    raise AssertionError("unreachable")  # the loop returns or raises
