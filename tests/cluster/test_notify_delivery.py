"""Notification delivery against a real HTTP server on 127.0.0.1 (tests/support/webhook_server.py) and real
commands: bounded tries, Retry-After within its cap, one stderr line per failed delivery, and an enqueue that
never waits for the endpoint."""

from __future__ import annotations

import json
import sys
import threading

import pytest

from elxpk.notify.delivery import Notifier, Policy, payload, senders
from elxpk.notify.rules import Alert
from tests.support.webhook_server import webhook

FAST = Policy(attempts=3, timeout_s=1.0, backoff_s=0.01, retry_after_cap_s=5.0, drain_s=20.0)


def _alert(n: int = 0, kind: str = "slice-lost") -> Alert:
    return Alert(kind, "train", "default", 1_780_000_000.0 + n, f"train: slice {n} lost (exit 137/Error)",
                 {"slice": n})


class Recorder:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)


def _deliver(script: list[str], alerts: list[Alert], *, fmt: str = "json", retry_after: str = "1",
             policy: Policy = FAST):
    rec = Recorder()
    with webhook(script, retry_after) as hook:
        notifier = Notifier(senders(hook.url, fmt, None), rec.lines.append, policy, sleep=rec.sleep)
        for alert in alerts:
            notifier.send(alert)
        lost = notifier.close()
    return hook, rec, lost


def test_200_delivers_one_json_document_per_alert_in_order():
    hook, rec, lost = _deliver(["200"], [_alert(0), _alert(1, "recovered")])
    docs = [json.loads(body) for _, body in hook.bodies]
    assert lost == 0 and rec.lines == [] and rec.slept == []
    assert [(d["kind"], d["workload"], d["details"]) for d in docs] == [
        ("slice-lost", "train", {"slice": 0}), ("recovered", "train", {"slice": 1})]
    assert docs[0]["time"] == "2026-05-28T20:26:40Z" and docs[0]["summary"].startswith("train: slice 0 lost")


def test_slack_format_posts_a_text_payload():
    hook, _, lost = _deliver(["200"], [_alert(0)], fmt="slack")
    (body,) = [json.loads(b) for _, b in hook.bodies]
    assert lost == 0 and set(body) == {"text"} and "*slice-lost* train: slice 0 lost" in body["text"]


def test_500_is_tried_three_times_then_one_line_without_the_secret_path():
    hook, rec, lost = _deliver(["500"], [_alert(0)])
    assert hook.answers() == ["500"] * 3 and lost == 1 and len(rec.lines) == 1
    assert "slice-lost for train not delivered to http://127.0.0.1:" in rec.lines[0]
    assert "HTTP 500" in rec.lines[0] and "3 tries" in rec.lines[0] and "secret-path" not in rec.lines[0]
    assert rec.slept == [0.01, 0.02]  # back-off, doubled


def test_429_honours_retry_after_then_delivers():
    hook, rec, lost = _deliver(["429", "200"], [_alert(0)], retry_after="2")
    assert hook.answers() == ["429", "200"] and lost == 0 and rec.lines == [] and rec.slept == [2.0]


def test_429_retry_after_is_capped():
    hook, rec, lost = _deliver(["429"], [_alert(0)], retry_after="86400")
    assert hook.answers() == ["429"] * 3 and rec.slept == [5.0, 5.0] and lost == 1
    assert "HTTP 429" in rec.lines[0]


@pytest.mark.parametrize("answer", ["404", "302"])
def test_a_4xx_other_than_429_or_a_redirect_is_not_retried(answer):
    hook, rec, lost = _deliver([answer], [_alert(0)])
    assert hook.answers() == [answer] and lost == 1 and f"HTTP {answer}" in rec.lines[0] and "1 try" in rec.lines[0]


@pytest.mark.parametrize("answer", ["hang", "close"])
def test_a_timeout_or_a_closed_connection_is_retried_within_its_bound(answer):
    policy = FAST._replace(timeout_s=0.3)
    hook, rec, lost = _deliver([answer, "200"], [_alert(0)], policy=policy)
    assert hook.answers() == [answer, "200"] and lost == 0 and rec.lines == []
    hook, rec, lost = _deliver([answer], [_alert(1)], policy=policy)
    assert hook.answers() == [answer] * 3 and lost == 1 and len(rec.lines) == 1
    assert ("timed out" in rec.lines[0]) if answer == "hang" else ("Disconnected" in rec.lines[0] or
                                                                   "reset" in rec.lines[0].lower())


def test_send_never_waits_for_a_hanging_endpoint_and_a_full_queue_drops_with_one_line():
    """The watch loop's side: while the endpoint holds the first request, every send returns at once; the
    queue's bound drops the excess, each with a line; close is bounded by drain_s."""
    rec = Recorder()
    policy = Policy(attempts=1, timeout_s=30.0, queue_size=2, drain_s=0.2)
    with webhook(["hang"]) as hook:
        notifier = Notifier(senders(hook.url, "json", None), rec.lines.append, policy, sleep=rec.sleep)
        notifier.send(_alert(0))
        while not hook.bodies:  # the worker holds alert 0 at the endpoint
            threading.Event().wait(0.01)
        for n in range(1, 6):
            notifier.send(_alert(n))
        assert not hook.release.is_set() and len(hook.bodies) == 1  # every send returned while it hung
        lost = notifier.close()
        lines = list(rec.lines)  # the worker may still report alert 0 once the server lets it go
    assert notifier.dropped == 3 and lost == 6
    assert sum("dropped" in line for line in lines) == 3 and lines[-1].endswith("3 alert(s) not sent")


def test_notify_command_gets_the_alert_on_stdin(tmp_path):
    out = tmp_path / "alerts.jsonl"
    script = f"import sys, os; open({str(out)!r}, 'a').write(os.environ['ELXPK_ALERT_KIND'] + ' ' + sys.stdin.read())"
    rec = Recorder()
    notifier = Notifier(senders(None, "json", (sys.executable, "-c", script)), rec.lines.append, FAST,
                        sleep=rec.sleep)
    notifier.send(_alert(0))
    notifier.send(_alert(1, "failed"))
    assert notifier.close() == 0 and rec.lines == []
    lines = out.read_text().splitlines()
    assert [line.split(" ", 1)[0] for line in lines] == ["slice-lost", "failed"]
    assert json.loads(lines[1].split(" ", 1)[1]) == json.loads(payload(_alert(1, "failed"), "json"))


def test_notify_command_gets_one_json_document_per_line(tmp_path):
    """#43: the README's `--notify-command 'tee -a alerts.jsonl'` keeps a JSON Lines file."""
    out = tmp_path / "alerts.jsonl"
    rec = Recorder()
    notifier = Notifier(senders(None, "json", ("sh", "-c", f"cat >> '{out}'")), rec.lines.append, FAST,
                        sleep=rec.sleep)
    notifier.send(_alert(0))
    notifier.send(_alert(1, "failed"))
    assert notifier.close() == 0 and rec.lines == []
    assert [json.loads(line)["kind"] for line in out.read_text().splitlines()] == ["slice-lost", "failed"]


# The failing command gets a timeout that a loaded CI machine's Python start-up cannot reach (a 0.5 s one once
# turned its "exit 3" into "no exit within 0.5s"); only the hanging one needs a short one.
@pytest.mark.parametrize(("code", "timeout_s", "why"),
                         [("import sys; sys.exit(3)", 60.0, "exit 3"),
                          ("import time; time.sleep(60)", 0.5, "no exit within 0.5s (killed)")])
def test_a_failing_or_hanging_command_is_one_line(code, timeout_s, why):
    rec = Recorder()
    notifier = Notifier(senders(None, "json", (sys.executable, "-c", code)), rec.lines.append,
                        FAST._replace(timeout_s=timeout_s, attempts=2), sleep=rec.sleep)
    notifier.send(_alert(0))
    assert notifier.close() == 1
    assert rec.lines == [f"notify: slice-lost for train not delivered to command {sys.executable}: {why} (2 tries)"]


@pytest.mark.parametrize("retry_after", ["nan", "inf", "-inf", "1e999", "1e12"])
def test_a_retry_after_that_is_no_sane_number_is_absent_and_the_back_off_applies(retry_after):
    """`nan` used to kill the worker with a traceback (every later alert dropped without a word)."""
    hook, rec, lost = _deliver(["429", "200"], [_alert(0), _alert(1)], retry_after=retry_after)
    assert hook.answers() == ["429", "200", "200"] and lost == 0 and rec.lines == [] and rec.slept == [0.01]


def test_a_hostile_reason_phrase_is_shown_with_its_controls_visible():
    rec = Recorder()
    with webhook(["503"], reason="\x1b]52;c;ZXZpbA==\x07\x1b[2J gone") as hook:
        notifier = Notifier(senders(hook.url, "json", None), rec.lines.append, FAST._replace(attempts=1))
        notifier.send(_alert(0))
        assert notifier.close() == 1
    (line,) = rec.lines
    assert "HTTP 503 \\x1b]52;c;ZXZpbA==\\x07\\x1b[2J gone" in line and "\x1b" not in line and "\x07" not in line


def test_credentials_in_the_url_are_sent_as_basic_auth_and_never_quoted():
    import base64

    from elxpk.notify.flags import url_problems

    with webhook(["200"]) as hook:
        url = hook.url.replace("http://", "http://alert%40ops:hunter2@")
        assert url_problems(url) == []
        notifier = Notifier(senders(url, "json", None), Recorder().lines.append, FAST)
        notifier.send(_alert(0))
        assert notifier.close() == 0
    assert hook.authorizations == ["Basic " + base64.b64encode(b"alert@ops:hunter2").decode()]
    for bad in ("http://u:hunter2@host:port/x", "ftp://u:hunter2@host/x", "http://u:hunter2@host/a b"):
        (problem,) = url_problems(bad)
        assert "hunter2" not in problem and "***@host" in problem, problem


def test_a_dead_worker_is_reported_and_every_later_alert_counted():
    """A bug in a sender (not a DeliveryFailed) must not stop the alerts silently."""
    from elxpk.notify.delivery import Sender

    def broken(alert, timeout):
        raise RuntimeError("a bug")

    rec = Recorder()
    notifier = Notifier([Sender("broken", broken)], rec.lines.append, FAST)
    notifier.send(_alert(0))
    notifier.worker.join(10)
    notifier.send(_alert(1, "failed"))
    assert notifier.close() == 2
    assert rec.lines[0].startswith("notify: the delivery worker died (RuntimeError: a bug)")
    assert rec.lines[1] == "notify: failed for train not sent: the delivery worker died (RuntimeError: a bug)"


def test_a_command_still_running_at_exit_is_ended_and_never_holds_elxpks_stderr(tmp_path):
    """The process using the Notifier exits after its drain bound: the command's process group is ended,
    and a reader of the process's stderr (`elxpk ... | tee log`, a CI step) sees its end at once."""
    import subprocess
    import time

    pid_file = tmp_path / "pid"
    command = ("sh", "-c", f"echo $$ > {pid_file}; sleep 60 & sleep 60")
    program = ("import sys; from elxpk.notify.delivery import Notifier, Policy, senders\n"
               "from elxpk.notify.rules import Alert\n"
               f"n = Notifier(senders(None, 'json', {command!r}), lambda line: print(line, file=sys.stderr),"
               " Policy(attempts=1, timeout_s=60.0, drain_s=1.0))\n"
               "n.send(Alert('failed', 'train', 'default', 1.0, 'train failed', {}))\n"
               "import time; time.sleep(0.5); print(n.close())\n")
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=30)
    assert time.monotonic() - start < 15 and done.stdout.strip() == "1", done.stderr
    assert "1 --notify-command process group(s) ended" in done.stderr
    group = int(pid_file.read_text())
    time.sleep(0.2)
    assert _living(group) == [], "the command's process group outlived the process"


def _living(group: int) -> list[int]:
    """The processes of `group` that run (a zombie left to a container's init that reaps nothing is dead)."""
    import os

    found = []
    for entry in os.listdir("/proc"):
        try:
            fields = open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == group and fields[0] != "Z":
            found.append(int(entry))
    return found


def test_a_503_retry_after_is_honoured_as_a_429_s_is():
    """The one retry policy (elxpk/retry_policy.py): a 503 that says when to come back is waited on too."""
    hook, rec, lost = _deliver(["503", "200"], [_alert(0)], retry_after="3")
    assert hook.answers() == ["503", "200"] and lost == 0 and rec.lines == [] and rec.slept == [3.0]
