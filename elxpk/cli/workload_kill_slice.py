"""`elxpk workload kill-slice NAME --slice K|random`: fault injection, once or as a soak test.

The flags are read here (elxpk/cluster/verbs/verb_flags.py KILL_SLICE); the kill, the watch and the rounds are
elxpk/cluster/verbs/kill_slice.py's."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Annotated, Any

import typer

from elxpk.cli import options
from elxpk.cli.workload_common import confirm, connect, console, workload_name
from elxpk.cluster.verbs import verb_flags
from elxpk.shown import shown


@options.with_flags("kill-slice", verb_flags.KILL_SLICE)
@options.with_cluster
def kill_slice(
    name: Annotated[str, options.workload_argument("Workload name.")],
    flags: Mapping[str, Any] = options.NO_FLAGS,
    cluster: options.ClusterSelection = options.NO_CLUSTER_FLAGS,
) -> None:
    """Fault injection: take slice K down (force delete, eviction or a signal), once or as a soak test."""
    workload_name(name)
    v = verb_flags.read(verb_flags.KillSliceFlags, verb_flags.KILL_SLICE, flags, verb_flags.kill_slice_rule)
    kube, ns = connect(cluster)
    from rich.markup import escape

    from elxpk.cluster.verbs.kill_slice import Io, KillRequest, run

    # --slice is required: `read` refused its absence, so `or ""` never stands in for it
    request = KillRequest(name, verb_flags.kill_slice_index(v.slice or ""), v.vm, v.mode, v.exit_code,
                          v.repeat, v.every, v.seed, v.watch, v.timeout, v.poll)
    err = console(stderr=True)
    # lines name pods and quote the cluster: one line each, controls visible, no Rich markup of their own
    from elxpk.piped_text import OncePerChange

    # a poll repeats its state every few seconds: each progress line is printed once per change
    io = Io(out=lambda line: print(shown(line), flush=True), tick=OncePerChange(lambda line: err.print(escape(shown(line)))),
            confirm=confirm(v.yes), clock=time.time, sleep=time.sleep)
    if not run(kube, ns, request, io):
        raise typer.Exit(1)
