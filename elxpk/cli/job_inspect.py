"""`elxpk job inspect NAME`: gcluster's `job inspect` (which dumps kubectl output to a file), with elxpk's
own diagnosis instead: `workload status --why`, `workload events`, and the objects (JobSet, Jobs, Pods,
Kueue Workloads), in one file to attach to a bug report. The path is checked before any I/O.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from typing import Annotated, Any

from elxpk.cli import options
from elxpk.cli.workload_common import connect, workload_name
from elxpk.cluster.verbs.verb_flags import JOB_INSPECT, JobInspectFlags, read
from elxpk.shown import shown


@options.with_gcluster_cluster
@options.with_flags("job inspect", JOB_INSPECT)
def inspect(
    name: Annotated[str | None, options.workload_argument()] = None,
    flags: Mapping[str, Any] = options.NO_FLAGS,
    cluster: options.ClusterSelection = options.NO_CLUSTER_FLAGS,
) -> None:
    """Write the workload's diagnosis (status --why, events, the objects) to a file; print its path."""
    from elxpk.errors import UsageError
    from elxpk.outfile import output_problem, own_path_problem

    values = read(JobInspectFlags, JOB_INSPECT, flags)
    if (name is None) == (values.name_option is None):
        raise UsageError("NAME: give the workload once, as NAME or --name NAME (e.g. elxpk job inspect my-run-1)")
    name = workload_name(name or values.name_option or "")
    path = values.out or f"{name}-inspect.txt"
    own = None if values.out else "new"  # elxpk's own name: created, never a link followed or a file replaced
    problem = output_problem(path, "--out", example="run-inspect.txt") or (
        own and own_path_problem(path, "--out", replace=False))
    if problem:
        raise UsageError(problem)
    kube, ns = connect(cluster)
    from elxpk.cluster.verbs.events_feed import follow
    from elxpk.cluster.verbs.observe import fetch_objects, fetch_status
    from elxpk.cluster.verbs.status_render import dump
    from elxpk.outfile import write_text

    status = fetch_status(kube, ns, name, now=time.time(), with_progress=True, stuck_after_s=0.0, why=True)
    lines: list[str] = []
    follow(kube, ns, name, lambda incident: lines.append(incident.line()), watch=False, clock=time.monotonic)
    jobset, jobs, pods, workloads = fetch_objects(kube, ns, name)
    sections = [
        f"# elxpk job inspect {name} (namespace {ns})",
        "## status --why", dump(status.to_dict(), "yaml"),
        "## events", "\n".join(lines) if lines else "(no incidents)",
        "## objects", dump({"jobset": jobset, "jobs": jobs, "pods": pods, "workloads": workloads}, "yaml"),
    ]
    # the events and objects are the cluster's: the file is read in a terminal too (yaml escapes its own)
    text = shown("\n".join(s.rstrip("\n") for s in sections) + "\n", lines=True)
    write_text(path, text, flag="--out", own=own)
    print(f"wrote {path}", file=sys.stderr)
    print(path)
