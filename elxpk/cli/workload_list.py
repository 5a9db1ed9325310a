"""`elxpk workload list` (and gcluster's `job list`): the namespace's workloads, filtered by name and state."""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from typing import Any

from elxpk.cli import options
from elxpk.cli.workload_common import connect, console
from elxpk.cluster.verbs import verb_flags
from elxpk.errors import UsageError
from elxpk.output_formats import OUTPUT_ROWS

ROWS = (*verb_flags.LIST, OUTPUT_ROWS["status"])  # what `list` reads: its rows, then -o (verb_flags.ListFlags)


@options.with_flags("list", verb_flags.LIST)
@options.with_cluster
def list_(
    flags: Mapping[str, Any] = options.NO_FLAGS,
    output: options.StatusOutput = "table",
    cluster: options.ClusterSelection = options.NO_CLUSTER_FLAGS,
) -> None:
    """Workloads of the namespace (xpk-created ones too): name, state, healthy slices, restarts, age."""
    from elxpk.cluster.records.status import STATES

    # -o read with the other flags (its row, elxpk/output_formats.py): every problem at once
    values = verb_flags.read(verb_flags.ListFlags, ROWS, {**flags, "output": output})
    wanted_state, problems = verb_flags.list_state(values.status, STATES)
    matcher, bad_filter = verb_flags.list_matcher(values)
    if problems or bad_filter:
        raise UsageError(*problems, *bad_filter)
    output = values.output
    kube, ns = connect(cluster)
    from elxpk.cluster.verbs.observe import fetch_all
    from elxpk.cluster.verbs.status_render import dump, list_record, list_table

    rows = [s for s in fetch_all(kube, ns, now=time.time())
            if (matcher is None or matcher.search(s.name)) and (wanted_state is None or s.state == wanted_state)]
    if output == "table":
        if rows:
            console().print(list_table(rows))
        else:
            print(f"no workloads in namespace {ns}" + (" match" if matcher or wanted_state else ""), file=sys.stderr)
    else:
        print(dump([list_record(s) for s in rows], output))
