"""Sending alerts off the watch loop's path: a bounded queue and one worker thread.

The watch loop only enqueues (never blocks: a full queue drops the alert with one line on stderr), so a
slow, failing or hanging endpoint never delays the incident record (`--record`) or the printed lines. Each
delivery is bounded: at most `attempts` tries, each within `timeout_s` (connect and every read), with
back-off between them (`backoff_s`, doubled; a 429's or 503's Retry-After honoured up to
`retry_after_cap_s`): elxpk's one retry policy (elxpk/retry_policy.py), whose bounds these default to. A
delivery that fails for good is one line on stderr; the endpoint is named by scheme, host and port only,
since a webhook's path is its secret (Slack's is), and what the endpoint says (a reason phrase) is shown
with its controls visible (elxpk/shown.py). At exit `close` waits at most `drain_s` for what is queued,
then says how many alerts were not sent and ends a `--notify-command` still running with its whole process
group; the worker is a daemon, so it never holds the process, and a command's stderr is read by elxpk
(its last lines become the failure's line), so a command left behind never holds elxpk's stdio open (a
`elxpk ... | tee` would wait for it). A worker that dies says so once, and every later alert is counted
as not sent, never silently dropped.
"""

from __future__ import annotations

import base64
import json
import os
import queue
import signal
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from typing import IO, NamedTuple
from urllib.parse import unquote, urlsplit, urlunsplit

from elxpk.notify.rules import Alert
from elxpk.retry_policy import REQUESTS, RetryPolicy, asked_wait_s, transient_status
from elxpk.shown import shown

SLACK_ICONS = {"slice-lost": ":warning:", "recovered": ":white_check_mark:", "recovery-late": ":rotating_light:",
               "budget-80": ":warning:", "budget-spent": ":rotating_light:", "failed": ":x:",
               "succeeded": ":tada:", "checkpoint-stale": ":hourglass:", "stuck": ":hourglass:"}
RESPONSE_BYTES = 64 * 1024  # what is read of an answer: only its status matters
STDERR_TAIL = 2048  # what of a failed command's stderr its line quotes


class Policy(NamedTuple):
    attempts: int = 3  # one fewer than a request's: every try of a failing endpoint holds the alerts behind it
    timeout_s: float = 10.0
    backoff_s: float = REQUESTS.first_pause_s
    retry_after_cap_s: float = REQUESTS.retry_after_max_s
    queue_size: int = 256
    drain_s: float = 30.0

    @property
    def retry(self) -> RetryPolicy:
        return REQUESTS._replace(tries=self.attempts, first_pause_s=self.backoff_s,
                                 retry_after_max_s=self.retry_after_cap_s)


class DeliveryFailed(Exception):
    """One try failed: why, whether another try may succeed, and how long the endpoint asked us to wait."""

    def __init__(self, why: str, *, retry: bool = True, wait_s: float | None = None) -> None:
        super().__init__(why)
        self.retry, self.wait_s = retry, wait_s


def payload(alert: Alert, fmt: str) -> bytes:
    """The body sent for `alert`: the alert as JSON, or Slack's incoming-webhook `{"text": ...}`."""
    if fmt == "slack":
        icon = SLACK_ICONS.get(alert.kind, ":information_source:")
        text = f"{icon} *{alert.kind}* {alert.summary} (namespace {alert.namespace}, {alert.to_dict()['time']})"
        return json.dumps({"text": text}).encode()
    return json.dumps(alert.to_dict(), sort_keys=True).encode()


def endpoint(url: str) -> str:
    """The URL as a line may show it: scheme, host and port; the path (a webhook's secret) left out."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}"


def _credentials(url: str) -> tuple[str, dict[str, str]]:
    """(the URL without user:password@, the Authorization header they make): urllib would take
    `user:pw@host` for the host name (a DNS error); a webhook with credentials wants Basic auth."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url, {}
    host = parts.netloc.rpartition("@")[2]
    secret = f"{unquote(parts.username or '')}:{unquote(parts.password or '')}".encode()
    return (urlunsplit(parts._replace(netloc=host)),
            {"Authorization": "Basic " + base64.b64encode(secret).decode("ascii")})


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None  # the 3xx itself becomes the HTTPError `post` reports


def post(url: str, body: bytes, timeout_s: float) -> None:
    """POST `body` to `url`; DeliveryFailed unless a 2xx comes back. Redirects are not followed (a POST
    turned into a GET would lose the alert and look delivered)."""
    target, auth = _credentials(url)
    request = urllib.request.Request(target, data=body, method="POST", headers={
        "Content-Type": "application/json", "User-Agent": "elxpk-notify", **auth})
    try:
        with urllib.request.build_opener(_NoRedirect()).open(request, timeout=timeout_s) as answer:
            answer.read(RESPONSE_BYTES)
    except urllib.error.HTTPError as exc:
        code = exc.code
        wait = asked_wait_s(code, exc.headers)
        exc.close()
        phrase = shown(exc.reason)[:200]  # the endpoint's own words: controls visible, bounded
        raise DeliveryFailed(f"HTTP {code} {phrase}", retry=transient_status(code), wait_s=wait) from None
    except (urllib.error.URLError, OSError, ValueError) as exc:  # refused, reset, timed out, bad answer
        reason = getattr(exc, "reason", exc)
        raise DeliveryFailed(shown(f"{type(reason).__name__}: {reason}" if str(reason) else type(reason).__name__)
                             [:300]) from None


# The process groups of the commands running now: `end_commands` ends them when elxpk stops waiting.
_RUNNING: set[int] = set()
_RUNNING_LOCK = threading.Lock()


def end_commands() -> int:
    """SIGKILL the process group of every `--notify-command` still running; how many there were."""
    with _RUNNING_LOCK:
        groups = list(_RUNNING)
    for group in groups:
        try:
            os.killpg(group, signal.SIGKILL)
        except OSError:
            pass  # already gone
    return len(groups)


def run_command(argv: Sequence[str], body: bytes, timeout_s: float, alert: Alert) -> None:
    """Run `argv` with `body` on stdin; DeliveryFailed unless it exits 0 within `timeout_s`. Its stdout is
    discarded; its stderr goes to a file of elxpk's (the tail quoted when it fails), never to elxpk's own
    stderr, which a command left running would hold open. On timeout its whole process group is killed."""
    env = {**os.environ, "ELXPK_ALERT_KIND": alert.kind, "ELXPK_WORKLOAD": alert.workload}
    with tempfile.TemporaryFile() as errors:
        try:
            child = subprocess.Popen(list(argv), stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=errors,
                                     env=env, start_new_session=True)
        except OSError as exc:
            raise DeliveryFailed(f"cannot run {argv[0]}: {exc.strerror or exc}", retry=False) from None
        with _RUNNING_LOCK:
            _RUNNING.add(child.pid)
        try:
            child.communicate(body, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
            raise DeliveryFailed(f"no exit within {timeout_s:g}s (killed){_tail(errors)}") from None
        except BrokenPipeError:  # it exited without reading stdin: its exit code decides
            child.wait()
        finally:
            with _RUNNING_LOCK:
                _RUNNING.discard(child.pid)
        if child.returncode != 0:
            raise DeliveryFailed(f"exit {child.returncode}{_tail(errors)}")


def _tail(errors: IO[bytes]) -> str:
    """The last line of what a command wrote on stderr, as a failure line quotes it ("" if nothing)."""
    size = errors.seek(0, os.SEEK_END)
    errors.seek(max(size - STDERR_TAIL, 0))
    lines = errors.read().decode("utf-8", "replace").strip().splitlines()
    return f": {shown(lines[-1])}" if lines else ""


class Sender(NamedTuple):
    name: str  # as a failure line shows it
    send: Callable[[Alert, float], None]  # (alert, timeout_s); raises DeliveryFailed


def senders(url: str | None, fmt: str, command: Sequence[str] | None) -> list[Sender]:
    found = []
    if url is not None:
        found.append(Sender(endpoint(url), lambda alert, timeout: post(url, payload(alert, fmt), timeout)))
    if command is not None:
        found.append(Sender(f"command {command[0]}",
                            # one JSON document per line: `tee -a alerts.jsonl` keeps a JSON Lines file
                            lambda alert, timeout: run_command(command, payload(alert, "json") + b"\n", timeout,
                                                               alert)))
    return found


class Notifier:
    """Delivers alerts in the order raised, one at a time, on a worker thread; `note` gets each failure's
    one line (from that thread)."""

    def __init__(self, targets: list[Sender], note: Callable[[str], None], policy: Policy = Policy(),
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.targets, self.note, self.policy, self.sleep = targets, note, policy, sleep
        self.queue: queue.Queue[Alert | None] = queue.Queue(policy.queue_size)
        self.delivered = self.failed = self.dropped = 0
        self.dead: str | None = None  # why the worker died, once it has
        self.worker = threading.Thread(target=self._work, name="elxpk-notify", daemon=True)
        self.worker.start()

    def send(self, alert: Alert) -> None:
        """Queue `alert`; never blocks."""
        if self.dead is not None:
            self.dropped += 1
            self.note(f"notify: {alert.kind} for {alert.workload} not sent: the delivery worker died ({self.dead})")
            return
        try:
            self.queue.put_nowait(alert)
        except queue.Full:
            self.dropped += 1
            self.note(f"notify: {alert.kind} for {alert.workload} dropped: {self.policy.queue_size} alerts "
                      "already waiting (the endpoint is too slow)")

    def close(self) -> int:
        """Wait up to `drain_s` for the queue to empty; the number of alerts not delivered (dropped, failed,
        or still waiting when the time ran out)."""
        deadline = time.monotonic() + self.policy.drain_s
        if not self.worker.is_alive():  # it died: what it left queued is not sent (its death had a line)
            with self.queue.mutex:
                return self.dropped + self.failed + sum(1 for alert in self.queue.queue if alert is not None)
        try:
            self.queue.put(None, timeout=self.policy.drain_s)
        except queue.Full:
            pass
        self.worker.join(max(deadline - time.monotonic(), 0.0))
        if not self.worker.is_alive():
            return self.dropped + self.failed
        with self.queue.mutex:  # the one being delivered, and those behind it
            waiting = 1 + sum(1 for alert in self.queue.queue if alert is not None)
        ended = end_commands()  # a command still running would outlive elxpk (and its stderr, a pipe's reader)
        self.note(f"notify: stopped waiting after {self.policy.drain_s:g}s; {waiting} alert(s) not sent"
                  + (f"; {ended} --notify-command process group(s) ended" if ended else ""))
        return waiting + self.dropped + self.failed

    def _work(self) -> None:
        alert: Alert | None = None
        try:
            while True:
                alert = self.queue.get()
                if alert is None:
                    return
                for target in self.targets:
                    self._deliver(target, alert)
        except Exception as exc:  # noqa: BLE001 - a bug here must be a line, not a silent stop of every alert
            self.dead = shown(f"{type(exc).__name__}: {exc}")[:300]
            self.failed += 1
            self.note(f"notify: the delivery worker died ({self.dead}); "
                      f"{alert.kind if alert else 'the'} alert and every later one are not sent")

    def _deliver(self, target: Sender, alert: Alert) -> None:
        why = ""
        tries = self.policy.retry.tries_of(self.sleep)
        for _ in tries:
            try:
                target.send(alert, self.policy.timeout_s)
            except DeliveryFailed as exc:
                why = str(exc)
                if exc.retry and tries.again(exc.wait_s):
                    continue
                break
            self.delivered += 1
            return
        self.failed += 1
        tries_made = f"{tries.number} tr{'y' if tries.number == 1 else 'ies'}"
        self.note(f"notify: {alert.kind} for {alert.workload} not delivered to {target.name}: {why} ({tries_made})")
