"""Shell completion of values (Typer's `--install-completion` / `--show-completion`, bash, zsh and fish).

- TPU types and GPU device types from the catalog (elxpk/catalog.py);
- the choices of every flag row (elxpk/flag_rows.py `choices`) and of `-o/--output`;
- workload names from the cluster the command line being completed selects (its --kubeconfig, --context,
  --namespace, --project ...): one LIST of JobSets, on a daemon thread given LOOKUP_S. A cluster that is
  unreachable, slow or refuses prints nothing, and the shell gets its answer within that bound.

Completion runs in a short-lived `elxpk` process whose stdout is the shell's list of candidates; anything
on stderr would be drawn over the user's prompt, so the cluster lookup silences it. Only typer is imported
here: `elxpk --version` and `workload create --dry-run` build the options that name these functions.

Every candidate is offered only when it is made of characters no shell gives a meaning to (`offered`), and
a workload name only when it is one the API could hold (a DNS-1035 label: JobSet's own rule). A hostile or
spoofed API server (insecure-skip-tls-verify, a compromised cluster) can serve `evil$(touch X)`, `*` or a
name with a newline: Typer's bash script reads the candidates through an unquoted `$(...)`, so such a name
would be glob-expanded, split, or inserted unquoted and run by Enter. What survives the filter needs no
quoting in bash, zsh or fish, so each is written as it is: quoted, it is the same word.
"""

from __future__ import annotations

import math
import os
import re
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

from elxpk import k8s_names

LOOKUP_S = 2.0  # the longest a Tab waits for workload names
LOOKUP_ENV = "ELXPK_COMPLETE_TIMEOUT"  # seconds, for a cluster known to be slow (and for tests on a loaded machine)
LOOKUP_MAX_S = 600.0  # past this a Tab is not waiting but hung: the value is taken as a mistake
# Letters, digits and . _ : / = + - (not first): nothing here is a glob, a quote, an expansion or a separator
# in bash, zsh or fish.
SHELL_SAFE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/=+-]*")


def lookup_s() -> float:
    """ELXPK_COMPLETE_TIMEOUT, or LOOKUP_S when it is not a number of seconds from 0 to LOOKUP_MAX_S: `inf`,
    `nan` or `1e309` made the wait raise (or never end), and completion silently offered nothing."""
    try:
        seconds = float(os.environ.get(LOOKUP_ENV, LOOKUP_S))
    except ValueError:
        return LOOKUP_S
    return max(seconds, 0.0) if math.isfinite(seconds) and seconds <= LOOKUP_MAX_S else LOOKUP_S


def offered(candidates: Sequence[str]) -> list[str]:
    """The candidates a shell can be given as they are (see above); the others are left out."""
    return [c for c in candidates if SHELL_SAFE.fullmatch(c)]


def tpu_types(incomplete: str) -> list[str]:
    from elxpk import catalog

    return offered([name for name in catalog.all_names() if name.startswith(incomplete.lower())])


def device_types(incomplete: str) -> list[str]:
    from elxpk import catalog

    return offered([name for name in catalog.gpu_names() if name.startswith(incomplete.lower())])


def choices(values: Sequence[str]) -> Callable[[str], list[str]]:
    def complete(incomplete: str) -> list[str]:
        return offered([value for value in values if value.startswith(incomplete)])
    return complete


# Rows whose values come from a catalog rather than `choices`, by the row's name.
BY_ROW: dict[str, Callable[[str], list[str]]] = {"tpu_type": tpu_types, "device_type": device_types}


def for_row(row: Any) -> Callable[[str], list[str]] | None:
    """The completer of a flag row (elxpk/flag_rows.py Flag): its catalog, else its choices, else none."""
    if row.name in BY_ROW:
        return BY_ROW[row.name]
    return choices(row.choices) if row.choices else None


def workload_names(resolve: Callable[[], Any], incomplete: str) -> list[str]:
    """The JobSets of the namespace of the cluster `resolve()` selects (a ClusterTarget: the command line's
    cluster flags, elxpk/cli/options.py), within LOOKUP_S; [] on any failure."""
    found: list[str] = []

    def look() -> None:
        try:
            from elxpk.cluster.access.connect import connect
            from elxpk.cluster.objects.meta import Meta

            target = resolve()
            kube = connect(target, resolved=True)
            found.extend(sorted(str(Meta.of(j).name) for j in kube.list_jobsets(target.namespace)))
        except BaseException:  # noqa: BLE001 - completion is silent: no cluster, no names
            found.clear()

    _silence_stderr()
    worker = threading.Thread(target=look, name="elxpk-complete-names", daemon=True)
    worker.start()
    worker.join(lookup_s())
    names = [] if worker.is_alive() else list(found)  # a late answer is dropped: the shell has moved on
    # only names the API could hold: a hostile server's `$(...)`, `*` or newline never reaches the shell
    return offered([name for name in names if name.startswith(incomplete) and _api_could_hold(name)])


def _api_could_hold(name: str) -> bool:
    return len(name) <= k8s_names.DNS1035_LABEL_MAX and k8s_names.DNS1035_LABEL.fullmatch(name) is not None


def _silence_stderr() -> None:
    """Point stderr at /dev/null for the rest of this completion process (warnings, retries' notes)."""
    try:
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - kept open until the process ends
    except OSError:
        pass
