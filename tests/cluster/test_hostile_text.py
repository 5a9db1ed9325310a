"""Cluster text that holds terminal controls, served by the fake API server and read by `elxpk` processes
(issue 44): every human-readable output shows each control visibly (elxpk/shown.py) and sends none, and
`job inspect` never writes through a link planted at its default path.

The objects are a real failed workload's (tests/cluster/incidents_corpus/failed.json) with every `message`
(JobSet conditions, Events, a container's termination message, Kueue's) replaced by PAYLOAD, and its
`terminalState` left out: a JobSet Failed by its condition alone, which `events --watch` followed forever
while `status` said Failed."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from elxpk.shown import has_controls, shown
from tests.cluster.captured import INCIDENTS, load_captured
from tests.support.webhook_server import webhook

ELXPK = Path(sys.executable).parent / "elxpk"
REPO = Path(__file__).resolve().parents[2]
# clear the screen, write the clipboard (OSC 52), plant a hyperlink (OSC 8), a C1 CSI, Rich markup, a bidi
# override, and a newline that would start a line of its own
PAYLOAD = ("\x1b[2J\x1b]52;c;ZXZpbA==\x07\x1b]8;;http://evil.example/\x1b\\click\x1b]8;;\x1b\\ \x9b31m "
           "[link=http://evil.example]x[/link] \u202edesrever\nFAKE: all good")
RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202e]")  # what must never be written (a newline may)


def _poison(value: object) -> object:
    if isinstance(value, dict):
        return {k: PAYLOAD if k == "message" and isinstance(v, str) else _poison(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_poison(v) for v in value]
    return value


@pytest.fixture()
def hostile(fake) -> str:
    load_captured(fake, "failed", INCIDENTS)
    for bucket in fake.store.objects.values():
        for key, obj in list(bucket.items()):
            bucket[key] = _poison(obj)
            (bucket[key].get("status") or {}).pop("terminalState", None)
    return "incidents"


def _elxpk(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ELXPK_")}
    env.update(PYTHONPATH=str(REPO), COLUMNS="200")
    # a watch of a finished workload ends at once; one that follows it forever fails here
    return subprocess.run([str(ELXPK), *argv], capture_output=True, text=True, env=env, cwd=cwd, timeout=60)


def test_no_control_from_the_cluster_reaches_any_human_readable_output(hostile, k, tmp_path):
    """`events --watch` also alerts a webhook that answers 429 with `Retry-After: nan` (it killed the
    delivery thread), then 404 with a reason phrase full of controls: one line, shown."""
    with webhook(["429", "404"], retry_after="nan", reason="\x1b[2J\x1b]52;c;ZXZpbA==\x07 gone \x9b31m") as hook:
        _all_outputs(hostile, k, tmp_path, hook.url)
    assert hook.answers() == ["429", "404"]


def _all_outputs(hostile: str, k: list[str], tmp_path: Path, hook_url: str) -> None:
    runs = {
        "status": ("workload", "status", hostile), "status --why": ("workload", "status", hostile, "--why"),
        "status --watch": ("workload", "status", hostile, "--watch"), "list": ("workload", "list"),
        "events": ("workload", "events", hostile), "events --watch": ("workload", "events", hostile, "--watch", "--notify", hook_url),
        "wait": ("workload", "wait", hostile, "--timeout", "20s"),
        "job inspect": ("job", "inspect", hostile),
    }
    shown_somewhere, notified = 0, ""
    for what, argv in runs.items():
        done = _elxpk(*argv, *k, cwd=tmp_path)
        assert "Traceback" not in done.stderr, (what, done.stderr)
        assert done.returncode == (1 if what in ("status --watch", "wait") else 0), (what, done.stderr)
        notified = done.stderr if what == "events --watch" else notified
        for stream, text in (("stdout", done.stdout), ("stderr", done.stderr)):
            assert not RAW.search(text), (what, stream, text)
            assert not any(line.lstrip("# ").startswith("FAKE") for line in text.splitlines()), (what, stream)
            shown_somewhere += "\\x1b]52;c;ZXZpbA==\\x07" in text
    written = (tmp_path / f"{hostile}-inspect.txt").read_text()
    assert not RAW.search(written) and "\\x1b[2J" in written  # yaml escapes its own; the incident lines are shown
    assert shown_somewhere >= 6  # the message is there, visibly, not dropped (the reason phrase too)
    assert "not delivered to http://127.0.0.1:" in notified and "HTTP 404 \\x1b[2J" in notified, notified


def test_job_inspect_never_writes_through_a_link_at_its_default_path(hostile, k, tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep me\n")
    (tmp_path / f"{hostile}-inspect.txt").symlink_to(victim)
    done = _elxpk("job", "inspect", hostile, *k, cwd=tmp_path)
    assert done.returncode == 2 and victim.read_text() == "keep me\n", done.stderr
    assert done.stderr.startswith(f"error: '{hostile}-inspect.txt' (elxpk's default path) is a symlink")
    assert "--out PATH" in done.stderr and len(done.stderr.splitlines()) == 1


@given(st.text())
def test_shown_leaves_no_control_and_keeps_everything_else(text):
    one, many = shown(text), shown(text, lines=True)
    assert not RAW.search(one) and "\n" not in one and not has_controls(many)
    assert many.split("\n") == [shown(part) for part in text.split("\n")]  # the lines, each shown
    assert shown(one) == one  # shown text is shown as it is: no double escape
    if not RAW.search(text) and "\n" not in text and not re.search("[\u061c\u200e\u200f\u2028\u2029\u202a-\u202d\u2066-\u2069]", text):
        assert one == text


@given(st.text() | st.just("[link=http://evil.example]x[/link] \x1b]8;;http://e\x1b\\"), st.text(max_size=20))
def test_the_verbs_console_draws_no_control_and_no_markup_of_cluster_text(message, reason):
    """Any text in a condition's message or reason, drawn as `status` draws it (a table cell, the console of
    elxpk/cli/workload_common.py on a terminal, with colours): no control but Rich's own SGR colours, no OSC 8
    link, one line per cell."""
    import io

    from rich.markup import escape
    from rich.table import Table

    from elxpk.cluster.records.incidents import Incident
    from elxpk.cluster.verbs.status_render import _cell
    from elxpk.shown import console

    out = io.StringIO()
    drawn = console(file=out, force_terminal=True, width=400, highlight=False, soft_wrap=True)
    table = Table()
    table.add_column("reason")
    table.add_column("message")
    table.add_row(_cell(reason), _cell(message))
    drawn.print(table)
    # markup escaped as every call site does; the controls left to the console's own pass (newlines kept)
    drawn.print(f"[bold]State[/bold] {escape(message)}")
    text = re.sub("\x1b\\[[0-9;]*m", "", out.getvalue())  # Rich's colours: the only escapes allowed
    assert not RAW.search(text) and "\x1b]8" not in out.getvalue(), text
    line = Incident("id", "2026-01-01T00:00:00Z", "exit", "user", reason, message, 1, reason, "n", "c", 1).line()
    assert not RAW.search(line) and "\n" not in line


def test_job_inspect_past_a_file_size_limit_leaves_no_part_file_and_its_retry_works(hostile, k, tmp_path):
    """Issue 51, finding 9: under RLIMIT_FSIZE the write fails part way (EFBIG); the default path used to keep
    a 64 KB part, and the retry its message asks for was refused because the file existed."""
    import resource

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (1024, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))

    env = {key: v for key, v in os.environ.items() if not key.startswith("ELXPK_")}
    env.update(PYTHONPATH=str(REPO), COLUMNS="200", PYTHONDONTWRITEBYTECODE="1")
    limited = subprocess.run([str(ELXPK), "job", "inspect", hostile, *k], capture_output=True, text=True, env=env,
                             cwd=tmp_path, timeout=60, preexec_fn=small_files)
    assert limited.returncode == 74, limited.stderr  # the storage's limit, retryable: not the input's fault
    assert len(limited.stderr.splitlines()) == 1 and "Traceback" not in limited.stderr
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(hostile)] == []  # nor its temporary entry
    again = _elxpk("job", "inspect", hostile, *k, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert (tmp_path / f"{hostile}-inspect.txt").stat().st_size > 1024
