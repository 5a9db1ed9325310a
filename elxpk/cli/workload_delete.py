"""`elxpk workload delete NAME|--all` (and gcluster's `job cancel`): foreground deletion of JobSets."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Annotated, Any

from elxpk.cli import options
from elxpk.cli.workload_common import confirm, connect, workload_name
from elxpk.cluster.verbs import verb_flags
from elxpk.shown import shown


@options.with_flags("delete", verb_flags.DELETE)
@options.with_cluster
def delete(
    name: Annotated[str | None, options.workload_argument("Workload to delete.")] = None,
    flags: Mapping[str, Any] = options.NO_FLAGS,
    cluster: options.ClusterSelection = options.NO_CLUSTER_FLAGS,
) -> None:
    """Delete a workload with foreground propagation (its Jobs and Pods go first)."""
    values = verb_flags.read(verb_flags.DeleteFlags, verb_flags.DELETE, flags, verb_flags.delete_rule(name))
    if name is not None:
        workload_name(name)
    kube, ns = connect(cluster)
    from elxpk.cluster.verbs.ops import delete_workload, workload_names

    if name is not None:
        delete_workload(kube, ns, name)
        print(f"jobset/{name} deleted (foreground: its pods stop first)")
        return
    names = workload_names(kube, ns)
    if not names:
        kube.require_namespace(ns)
        print(f"no workloads in namespace {ns}", file=sys.stderr)
        return
    confirm(values.yes)(f"delete {len(names)} workloads in namespace {ns} ({shown(', '.join(names))})?")
    for each in names:
        delete_workload(kube, ns, each)
        print(f"jobset/{shown(each)} deleted")
