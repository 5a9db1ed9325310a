"""`elxpk workload logs NAME` (and gcluster's `job logs`): the head's log, or slice K's VM I's."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Annotated, Any

from elxpk.cli import options
from elxpk.cli.workload_common import connect, workload_name
from elxpk.cluster.verbs import verb_flags
from elxpk.shown import shown


@options.with_flags("logs", verb_flags.LOGS)
@options.with_cluster
def logs(
    name: Annotated[str, options.workload_argument("Workload name.")],
    flags: Mapping[str, Any] = options.NO_FLAGS,
    cluster: options.ClusterSelection = options.NO_CLUSTER_FLAGS,
) -> None:
    """Logs of the head, or of slice K, VM I."""
    workload_name(name)
    values = verb_flags.read(verb_flags.LogsFlags, verb_flags.LOGS, flags, verb_flags.logs_rule)
    kube, ns = connect(cluster)
    from elxpk.cluster.verbs.ops import log_source, read_logs

    source = log_source(kube, ns, name, head=values.head, slice_index=values.slice, vm=values.vm,
                        container=values.container)
    # the header is elxpk's (controls shown); the log lines are the container's, raw as `kubectl logs` gives them
    print(shown(f"# {name} {source.what}: pod {source.pod}, container {source.container}"
                + (" (previous, terminated)" if values.previous else "")), file=sys.stderr)
    for line in read_logs(kube, ns, source, follow=values.follow, tail=values.tail,
                          previous=values.previous):
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
