"""What every workload verb shares: NAME's check, the connection, the console and the confirmation.

The follow-up verbs of a workload are one module each (cli/workload_status.py, _list, _delete, _logs, _wait,
_kill_slice, _events). Their flags are rows of elxpk/cluster/verbs/verb_flags.py (Typer options through
elxpk/cli/options.py `with_flags`, values read there, every problem at once, exit 2 before any I/O); the work
is elxpk/cluster's, imported lazily, so `elxpk --help` and `workload create --dry-run` never load a cluster
client. They sit in elxpk/cli itself, not a package of their own: they stand on its options and
`workload create`/`job inspect` call them, so two rooms would import each other (tests/test_layout.py).
"""

from __future__ import annotations

import sys
from typing import Any

import typer

from elxpk.cli import options
from elxpk.errors import UsageError
from elxpk.piped_text import piped_console
from elxpk.shown import console as shown_console

# Piped output (a file, grep, less) is not cut to a terminal's width: Rich would take 80 columns and cut a
# table's long cells (the scheduler's message, the fix) with an ellipsis that no one can read back.
PIPED_WIDTH = 4096


def connect(cluster: options.ClusterSelection) -> tuple[Any, str]:
    """Validate the selection (UsageError before any network), then connect: (client, namespace)."""
    from elxpk.cluster.access.connect import connect as connect_to
    from elxpk.cluster.access.defaults import validate_namespace

    target = cluster.resolve()
    validate_namespace(target.namespace)
    return connect_to(target, resolved=True), target.namespace


def workload_name(name: str) -> str:
    """NAME as given, when it can name a JobSet (a DNS-1035 label); else UsageError (exit 2) before any I/O.

    An empty NAME would reach the API as the collection's path (a list, or a delete of every JobSet)."""
    from elxpk.admission.identifiers import dns1035_label

    if not name.strip():
        raise UsageError(f"NAME {name!r}: empty; name the workload, e.g. my-run-1 (`elxpk workload list` "
                         "shows them)")
    problems = dns1035_label(name)
    if problems:
        raise UsageError(f"NAME {name!r}: not a workload name ({'; '.join(problems)}); e.g. my-run-1")
    return name


def console(stderr: bool = False) -> Any:
    """The verbs' Rich console: every string it draws goes through elxpk/shown.py (cluster text is untrusted);
    piped, its lines end at their last visible character (elxpk/piped_text.py)."""
    found: Any = piped_console(sys.stderr if stderr else sys.stdout, make=shown_console, highlight=False,
                               soft_wrap=True)
    if not found.is_terminal:
        found.width = PIPED_WIDTH
    return found


def confirm(yes: bool) -> Any:
    """The confirmation of a destructive verb: with --yes none; else a terminal's y/N (No: exit 1)."""
    def ask(question: str) -> None:
        if yes:
            return
        if not sys.stdin.isatty():
            raise UsageError(f"{question} needs confirmation: pass --yes (stdin is not a terminal)")
        if not typer.confirm(question, default=False):
            raise typer.Exit(1)
    return ask
