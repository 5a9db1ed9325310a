"""`workload events`' notification flags, declared once as rows (elxpk/flag_rows.py's row type).

elxpk/cli/workload_events.py gets its Typer parameters from these rows (`with_flags`), `read_settings`
checks every value before any I/O (one line per problem, each naming its flag: exit 2), and docs/cluster.md's
table is generated from them (`embed`). Standard library and elxpk.flag_rows only: read on every start.
"""

from __future__ import annotations

import shlex
import shutil
from collections.abc import Mapping
from typing import Any, NamedTuple
from urllib.parse import urlsplit

from elxpk import flag_rows
from elxpk.flag_records import Record, read_record
from elxpk.flag_rows import DURATION, LIST, TEXT, Flag

# What a watch can notify about, in the order docs/cluster.md lists them (`--notify-on`).
SLICE_LOST, RECOVERED, RECOVERY_LATE = "slice-lost", "recovered", "recovery-late"
BUDGET_80, BUDGET_SPENT = "budget-80", "budget-spent"
FAILED, SUCCEEDED = "failed", "succeeded"
CHECKPOINT_STALE, STUCK = "checkpoint-stale", "stuck"
TEST = "test"  # the one delivery a --notify-command gets when the watch starts (not an alert: never selected)
KINDS = (SLICE_LOST, RECOVERED, RECOVERY_LATE, BUDGET_80, BUDGET_SPENT, FAILED, SUCCEEDED, CHECKPOINT_STALE,
         STUCK)
FORMATS = ("json", "slack")
PANEL = "Notifications"
_EVENTS = ("events",)

FLAGS: tuple[Flag, ...] = (
    Flag("notify", TEXT, "POST each alert to this webhook (http:// or https://), one JSON document each; "
         "needs --watch.", metavar="URL", panel=PANEL, commands=_EVENTS),
    Flag("notify_format", TEXT, "What --notify posts: json (the alert) or slack ({\"text\": ...}, for a "
         "Slack or Mattermost incoming webhook).", default="json", choices=FORMATS, metavar="[json|slack]",
         panel=PANEL, commands=_EVENTS),
    Flag("notify_command", TEXT, "Run this command for each alert, the alert as one line of JSON on its stdin (split as "
         "a shell would, run without one); needs --watch.", metavar="CMD", panel=PANEL, commands=_EVENTS),
    Flag("notify_on", LIST, "Only these alerts (repeatable or comma-separated): " + ", ".join(KINDS) + ".",
         metavar="KIND", panel=PANEL, commands=_EVENTS, default_text="every kind", doc_default="every kind",
         doc="only these alerts (repeatable, or comma-separated): " + ", ".join(f"`{k}`" for k in KINDS)),
    Flag("stuck_after", DURATION, "Alert `stuck`, with the why line, when Queued, Admitted but not running, "
         "or Restarting for longer than this.", default="10m", panel=PANEL, commands=_EVENTS),
    Flag("recovery_within", DURATION, "Alert `recovery-late` when a lost slice is not back within this.",
         panel=PANEL, commands=_EVENTS, default_text="the workload's --elastic-timeout-seconds, else 15m",
         doc="alert `recovery-late` when a lost slice is not back within this",
         doc_default="the workload's `--elastic-timeout-seconds`, else `15m`"),
)

BY_NAME: dict[str, Flag] = {f.name: f for f in FLAGS}
BEGIN = "<!-- notify-flag-table:begin (generated from elxpk/notify/flags.py) -->"
END = "<!-- notify-flag-table:end -->"


class NotifySettings(NamedTuple):
    url: str | None
    format: str
    command: tuple[str, ...] | None
    on: frozenset[str]
    stuck_after_s: float
    recovery_within_s: float | None  # None: the workload's elastic timeout, else 15 minutes

    @property
    def wanted(self) -> bool:
        return self.url is not None or self.command is not None


class NotifyFlags(Record):
    """The rows `read_settings` reads (ROWS): --notify-on, a list of kinds, is read on its own."""

    notify: str | None
    notify_format: str
    notify_command: str | None
    stuck_after: float
    recovery_within: float | None


ROWS = tuple(f for f in FLAGS if f.kind != LIST)


def read_settings(given: Mapping[str, Any], *, watch: bool) -> tuple[NotifySettings, list[str]]:
    """The notification flags read and checked together: (settings, one line per problem)."""
    values, problems = read_record(NotifyFlags, ROWS, dict(given))
    url = values.notify
    if url is not None:
        problems += url_problems(url)
    command = None
    if values.notify_command is not None:
        command, problem = _command(values.notify_command)
        problems += [problem] if problem else []
    on, unknown = _kinds(given.get("notify_on") or ())
    problems += [f"--notify-on {k!r}: use one of {', '.join(KINDS)}" for k in unknown]
    wanted = url is not None or command is not None
    if wanted and not watch:
        problems.append(f"{'--notify' if url is not None else '--notify-command'}: needs --watch (notifications "
                        "are sent while following)")
    for name in ("notify_format", "notify_on"):
        if given.get(name) and url is None and (name == "notify_format" or command is None):
            problems.append(f"{BY_NAME[name].flag}: needs --notify URL" +
                            (" or --notify-command CMD" if name == "notify_on" else ""))
    return NotifySettings(url, values.notify_format, command, on, values.stuck_after,
                          values.recovery_within), problems


def url_problems(url: str) -> list[str]:
    """--notify URL: an http(s) URL with a host, and nothing a request line cannot carry. A user:password@
    in it is sent as Basic auth (elxpk/notify/delivery.py); no line here ever quotes the password."""
    shown = f"--notify {_without_password(url)!r}"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number in range
    except ValueError:
        return [f"{shown}: not a URL (a host or port it cannot read); give http(s)://HOST[:PORT]/PATH"]
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return [f"{shown}: give an http:// or https:// URL with a host, e.g. "
                "https://hooks.slack.com/services/..."]
    if any(c.isspace() or ord(c) < 32 or 0x7f <= ord(c) <= 0x9f for c in url):
        return [f"{shown}: has spaces or control characters; percent-encode them"]
    return []


def _without_password(url: str) -> str:
    """`url` as an error line may quote it: whatever stands before an `@` of its authority is `***`
    (urlsplit's own error text can quote the netloc, so it is not used)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return "***" if "@" in url else url
    end = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    authority, path = rest[:end], rest[end:]
    if "@" in authority:
        authority = "***@" + authority.rpartition("@")[2]
    return f"{scheme}://{authority}{path}"


def _command(text: str) -> tuple[tuple[str, ...] | None, str | None]:
    try:
        argv = tuple(shlex.split(text))
    except ValueError as exc:
        return None, f"--notify-command {text!r}: {exc}; quote it as a shell would"
    if not argv:
        return None, f"--notify-command {text!r}: empty; give a command, e.g. 'logger -t elxpk'"
    if shutil.which(argv[0]) is None:
        return None, f"--notify-command {text!r}: {argv[0]} is not an executable found on PATH"
    return argv, None


def _kinds(raw: Any) -> tuple[frozenset[str], list[str]]:
    words = [w.strip() for item in raw for w in str(item).split(",") if w.strip()]
    unknown = [w for w in words if w not in KINDS]
    return (frozenset(words) - set(unknown)) or frozenset(KINDS), unknown


def embed(page: str) -> str:
    """`page` with the text between BEGIN and END replaced by the current table."""
    return flag_rows.embed(page, FLAGS, BEGIN, END)
