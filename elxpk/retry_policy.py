"""One retry policy for every HTTP call elxpk makes: the Kubernetes API (a read, and a create's read-back
before it is sent again), the GKE lookup (the Container API), Cloud Storage (the incident record, the
progress record, `--check-data`), notifications (a webhook and `--notify-command`) and the outage a watch
rides out.

The bounds, the same everywhere (docs/cluster.md states them):
- a try that failed for a cause another try may mend (no connection, no answer in time, 408, 429, 500-599;
  `transient_status`) is tried again, at most `tries` tries in all (`REQUESTS.tries`, 4; a notification
  takes 3, the number its documented line counts);
- the pause after the n-th failed try is `first_pause_s` doubled n - 1 times (0.5, 1, 2, ... s), never more
  than `max_pause_s` (30 s): the outage a watch rides out (bounded by its own time, not by tries) grows
  its pauses the same way;
- a 429 or 503 that says how long to wait (`Retry-After`, seconds) is waited that long instead, up to
  `retry_after_max_s` (30 s); a value that is no sane number of seconds (`nan`, `inf`, `1e999`, more than a
  day, an HTTP date) is taken as absent, and the back-off applies (`retry_after_s`);
- one call ends within `total_s` (120 s), its tries and pauses included (the Kubernetes API's may be changed
  with ELXPK_API_DEADLINE); a caller's own deadline holds too: a pause that would end past the deadline is
  not slept, the call fails now.

A helper of our own, not `urllib3.Retry` (which pip uses through requests, and which elxpk already has):
urllib3.Retry drives the retries inside one urllib3 `urlopen`, with `time.sleep`. Most of what elxpk
retries is not that: a notification goes out through urllib.request or a `--notify-command` subprocess
under the same tries; a create that went unanswered is read back before it is sent again (exactly once,
elxpk/cluster/verbs/submit.py); a watch rides an outage over many requests, bounded by time. And the callers need
what urllib3.Retry hides: the try count in their one-line errors ("after 4 attempts", "(3 tries)"), their
own deadline across the tries (`ELXPK_API_DEADLINE`, `wait --timeout`), and a sleep that tests inject.
urllib3.Retry is kept only to switch urllib3's own retries off under the Kubernetes client
(elxpk/cluster/access/connect.py), so that no request is retried twice over.

The clients' own retries stay theirs, bounded by them and documented where they apply: google-auth's probe
of the GCE metadata server and its token refreshes (elxpk_storage/gcs_auth.py), gcsfs and tensorstore under
a checkpoint (trainer/ckpt/transient_retry.py).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NamedTuple

from elxpk_contract.failure_classes import API_UNAVAILABLE

RETRY_AFTER_STATUS = frozenset({429, 503})  # the answers whose Retry-After is honoured (RFC 6585, RFC 9110)
RETRY_AFTER_SANE_S = 24 * 3600.0  # a longer (or non-finite) Retry-After is nonsense: the back-off applies


def transient_status(code: int) -> bool:
    """Whether another try may get a better answer than this status: one of the failure class
    API_UNAVAILABLE's (a timeout 408, too many requests 429, or a server's fault 500-599)."""
    return code in API_UNAVAILABLE.statuses


def retry_after_s(value: str | None) -> float | None:
    """Retry-After in seconds, or None (the back-off applies): an HTTP date, `nan`, `inf`, or more than a day
    (float() takes all three, and `nan` compared or slept on killed the notify worker)."""
    try:
        seconds = float(value) if value is not None else None
    except ValueError:
        return None
    if seconds is None or not math.isfinite(seconds) or seconds > RETRY_AFTER_SANE_S:
        return None
    return max(seconds, 0.0)


def asked_wait_s(status: int, headers: Mapping[str, str] | Any) -> float | None:
    """The wait an answer asks for: its Retry-After, read by `retry_after_s`, on a status that may ask for one
    (RETRY_AFTER_STATUS); else None. `headers`: any of the clients' header maps (`.get` by name)."""
    return retry_after_s(headers.get("Retry-After")) if status in RETRY_AFTER_STATUS else None


class RetryPolicy(NamedTuple):
    tries: int = 4
    first_pause_s: float = 0.5
    max_pause_s: float = 30.0
    retry_after_max_s: float = 30.0
    total_s: float = 120.0  # one call, its tries included: a server that hangs every try ends here

    def pause(self, failed: int, retry_after: float | None = None) -> float:
        """Seconds to wait after the `failed`-th failed try in a row: the Retry-After asked for (capped), else
        the back-off."""
        if retry_after is not None:
            return min(retry_after, self.retry_after_max_s)
        return min(self.first_pause_s * 2 ** min(failed - 1, 64), self.max_pause_s)

    def tries_of(self, sleep: Callable[[float], None], *, deadline: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> Tries:
        return Tries(self, sleep, deadline, clock)

    def timed_tries(self, sleep: Callable[[float], None], longest_try_s: float) -> Tries:
        """Tries that end within `total_s` from now; `Tries.timeout()` is each one's timeout: at most
        `longest_try_s`, and never past that end."""
        return Tries(self, sleep, time.monotonic() + self.total_s, time.monotonic, longest_try_s)


REQUESTS = RetryPolicy()  # every HTTP call's; callers change only the tries, and tests the pauses


class Tries:
    """The tries of one call: `for number in tries:` counts 1, 2, ... up to the policy's `tries`. After a
    failed try, `again()` sleeps the pause and says True; it says False, sleeping nothing, when that was the
    last try or when the pause would end at or past `deadline` (on `clock`)."""

    def __init__(self, policy: RetryPolicy, sleep: Callable[[float], None], deadline: float | None,
                 clock: Callable[[], float], longest_try_s: float = math.inf) -> None:
        self.policy, self.sleep, self.deadline, self.clock = policy, sleep, deadline, clock
        self.longest_try_s = longest_try_s
        self.number = 0  # the try under way (or the last one made)

    def __iter__(self) -> Iterator[int]:
        while self.number < self.policy.tries:
            self.number += 1
            yield self.number

    def timeout(self) -> float:
        """Seconds this try may take: its longest, and not past the deadline."""
        left = math.inf if self.deadline is None else self.deadline - self.clock()
        return max(min(self.longest_try_s, left), 0.001)

    def again(self, retry_after: float | None = None) -> bool:
        if self.number >= self.policy.tries:
            return False
        pause = self.policy.pause(self.number, retry_after)
        if self.deadline is not None and self.clock() + pause >= self.deadline:
            return False
        self.sleep(pause)
        return True
