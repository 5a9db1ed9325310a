"""elxpk's one retry policy (elxpk/retry_policy.py): its Retry-After reader takes any header text, its pauses
stay within their bounds, and every HTTP caller starts from the same bounds (none declares its own)."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from elxpk.retry_policy import REQUESTS, RETRY_AFTER_SANE_S, RetryPolicy, Tries, retry_after_s


@given(st.one_of(st.none(), st.text(max_size=40), st.floats(allow_nan=True).map(repr),
                 st.integers(-10**30, 10**30).map(str)))
def test_any_retry_after_is_absent_or_a_sane_number_of_seconds(text):
    seconds = retry_after_s(text)
    assert seconds is None or (math.isfinite(seconds) and 0.0 <= seconds <= RETRY_AFTER_SANE_S)
    for hostile in ("nan", "inf", "-inf", "1e999", "Wed, 21 Oct 2026 07:28:00 GMT", ""):
        assert retry_after_s(hostile) is None


@given(st.integers(1, 10_000), st.one_of(st.none(), st.floats(0.0, RETRY_AFTER_SANE_S)))
def test_every_pause_is_within_its_bound(failed, asked):
    pause = REQUESTS.pause(failed, asked)
    assert 0.0 <= pause <= max(REQUESTS.max_pause_s, REQUESTS.retry_after_max_s)
    if asked is None:
        assert pause == (min(0.5 * 2 ** (failed - 1), 30.0) if failed < 64 else 30.0)


def test_tries_stop_at_their_number_and_before_a_deadline():
    slept: list[float] = []
    tries = RetryPolicy(tries=3).tries_of(slept.append)
    made, again = [], []
    for number in tries:  # every try fails
        made.append(number)
        again.append(tries.again())
    assert made == [1, 2, 3] and again == [True, True, False] and slept == [0.5, 1.0]
    now = [100.0]
    tries = REQUESTS.tries_of(slept.append, deadline=101.0, clock=lambda: now[0])
    assert next(iter(tries)) == 1 and tries.again() and not tries.again(retry_after=1.0)
    timed = Tries(REQUESTS, slept.append, 130.0, lambda: now[0], longest_try_s=60.0)
    assert timed.timeout() == 30.0 and REQUESTS.timed_tries(slept.append, 60.0).timeout() == 60.0


def test_every_http_caller_starts_from_the_same_bounds():
    from elxpk.cluster.api.gcs import Gcs
    from elxpk.cluster.api.kube_transport import KubeTransport
    from elxpk.notify.delivery import Policy

    class Client:
        rest_client = None

    assert KubeTransport(Client(), host="h").retry_policy() == REQUESTS
    assert Gcs(session=object(), endpoint="http://e").policy == REQUESTS
    assert Policy().retry == REQUESTS._replace(tries=3)  # a notification's documented "(3 tries)"
