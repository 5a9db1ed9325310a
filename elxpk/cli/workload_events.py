"""`elxpk workload events NAME [--watch] [--record PATH] [-o json]`: one line per incident of a workload."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Mapping
from typing import Annotated, Any

from elxpk.cli import options
from elxpk.cli.workload_common import connect, workload_name
from elxpk.cluster.verbs import verb_flags
from elxpk.notify import flags as notify_flags
from elxpk.output_formats import OUTPUT_ROWS
from elxpk.shown import shown

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
    notifier = None
    if settings.wanted:
        from elxpk.notify.watch import NotifyingWatch

        notifier = NotifyingWatch(settings, name, ns, lambda line: print(f"# {shown(line)}", file=sys.stderr, flush=True),
                                  list_workloads=lambda: kube.list_kueue_workloads(ns),
                                  list_events=lambda obj: kube.list_events(ns, f"involvedObject.name={obj}"))
        failed = notifier.test_command()  # a command that cannot take an alert is said first, not at the first fault
        if failed is not None:
            print(f"# {shown(failed)}", file=sys.stderr, flush=True)
    from elxpk.cluster.records.incident_log import record as append_record
    from elxpk.cluster.verbs.events_feed import follow

    pending = []
    seen = []

    def emit(incident) -> None:
        seen.append(incident)
        if fmt == "json":
            sys.stdout.write(json.dumps(incident.to_dict(), sort_keys=True) + "\n")
        else:
            sys.stdout.write(incident.line() + "\n")
        sys.stdout.flush()
        if record is not None:
            pending.append(incident)
            if watch:  # while following, each incident is kept as soon as it is seen
                append_record(record, pending)
                pending.clear()
        if notifier is not None:  # after the record: an alert only queues, it never delays the record
            notifier.incident(incident)

    def following() -> None:
        print(f"# following {name}: new incidents as they happen, until it finishes (Ctrl-C to stop)",
              file=sys.stderr, flush=True)
        if notifier is not None:
            notifier.started()

    def outage(line: str) -> None:
        print(f"# {shown(line)}", file=sys.stderr, flush=True)

    try:
        count = follow(kube, ns, name, emit, watch=watch, clock=time.monotonic, on_following=following,
                       on_outage=outage, on_objects=notifier.objects if notifier is not None else None,
                       refresh_s=notifier.refresh_s if notifier is not None else 60.0)
    finally:
        if notifier is not None:
            notifier.close()  # bounded: what the endpoint has not taken by then is named on stderr
    if record is not None and pending:
        append_record(record, pending)  # one append (one read-modify-write on gs://) for a snapshot
    if fmt == "text" and count == 0:
        print(f"no incidents for workload {name}", file=sys.stderr)
    if fmt == "text":  # a note beside the record's: stdout stays one line per incident
        for line in _summary(kube, ns, name, seen):
            print(f"# {shown(line)}", file=sys.stderr)
    if record is not None:
        print(f"# {count} incidents seen; new ones appended to {record}", file=sys.stderr)


def _summary(kube, namespace: str, name: str, incidents: list) -> list[str]:
    """The failures by cause, and the no-progress ones against the trainer's progress record."""
    from elxpk.cluster.diagnosis.failure_summary import summary_lines
    from elxpk.cluster.records.progress import progress_of
    from elxpk.cluster.verbs.observe import get_workload
    from elxpk.errors import NotFoundError

    if not any(i.kind == "exit" and i.exit_code for i in incidents):
        return []
    try:
        progress, _ = progress_of(get_workload(kube, namespace, name), time.time())
    except NotFoundError:  # deleted while it was watched: the causes without the progress
        progress = None
    return summary_lines(incidents, progress)
