"""`elxpk workload events NAME [--watch] [--record PATH] [-o json]`: one line per incident of a workload."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Annotated, Any

from elxpk.cli import options
from elxpk.cli.workload_common import connect, workload_name
from elxpk.cluster.verbs import verb_flags
from elxpk.notify import flags as notify_flags
from elxpk.output_formats import OUTPUT_ROWS

FLAGS = verb_flags.EVENTS + notify_flags.FLAGS


@options.with_cluster
@options.with_flags("events", FLAGS)
def events(
    name: Annotated[str, options.workload_argument()],
    output: options.RunOutput = "text",
    flags: Mapping[str, Any] = options.NO_FLAGS,
    cluster: options.ClusterSelection = options.NO_CLUSTER_FLAGS,
) -> None:
    """Incidents: container exits (code, reason, classified infra/user), disruptions and evictions, Kueue
    evictions, JobSet restarts, the first failed Job, Warning Events. Time, slice, pod and node each. With
    --watch, --notify URL / --notify-command CMD send alerts: slice lost, recovered (and how long it took),
    recovery late, restart budget at 80% and spent, failed, succeeded, checkpoint stale, stuck."""
    workload_name(name)
    settings, problems = notify_flags.read_settings(flags, watch=bool(flags.get("watch")))
    # -o read with the other flags (its row, elxpk/output_formats.py): every problem at once
    own = verb_flags.read(verb_flags.EventsFlags, (*verb_flags.EVENTS, OUTPUT_ROWS["run"]), {**flags, "output": output},
                          problems=tuple(problems))
    fmt = own.output
    watch, record = own.watch, own.record
    if record is not None:
        from elxpk.cluster.records.incident_log import check_record_path

        check_record_path(record)
    kube, ns = connect(cluster)
    from elxpk.cluster.verbs.events_command import show_events

    show_events(kube, ns, name, settings, fmt=fmt, watch=watch, record=record, out=_out, note=_note)


def _out(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _note(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
