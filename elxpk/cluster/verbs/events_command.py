"""What `elxpk workload events NAME` does once its flags are read (elxpk/cli/workload_events.py reads them and
hands the printing over): each incident on stdout as it is seen (a line, or a JSON object), kept in --record,
sent to --notify / --notify-command; the notes (following, outages, the failures by cause) on stderr.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from elxpk.cluster.api.kube import Kube
from elxpk.cluster.diagnosis.failure_summary import summary_lines
from elxpk.cluster.records.incident_log import record as append_record
from elxpk.cluster.records.incidents import Incident
from elxpk.cluster.records.progress import progress_of
from elxpk.cluster.verbs.events_feed import follow
from elxpk.cluster.verbs.observe import get_workload
from elxpk.errors import NotFoundError
from elxpk.notify.flags import NotifySettings
from elxpk.shown import shown


def show_events(kube: Kube, namespace: str, name: str, settings: NotifySettings, *, fmt: str, watch: bool,
                record: str | None, out: Callable[[str], None], note: Callable[[str], None]) -> None:
    """The incidents of workload `name`: `out` takes each stdout line as it is seen, `note` each stderr line.
    `record`: --record's path, already checked; `settings`: the --notify flags, read."""
    notifier = None
    if settings.wanted:
        from elxpk.notify.watch import NotifyingWatch  # lazy: the alerting watch, only with --notify flags

        notifier = NotifyingWatch(settings, name, namespace, lambda line: note(f"# {shown(line)}"),
                                  list_workloads=lambda: kube.list_kueue_workloads(namespace),
                                  list_events=lambda obj: kube.list_events(namespace, f"involvedObject.name={obj}"))
        failed = notifier.test_command()  # a command that cannot take an alert is said first, not at the first fault
        if failed is not None:
            note(f"# {shown(failed)}")
    pending: list[Incident] = []
    seen: list[Incident] = []

    def emit(incident: Incident) -> None:
        seen.append(incident)
        out(json.dumps(incident.to_dict(), sort_keys=True) if fmt == "json" else incident.line())
        if record is not None:
            pending.append(incident)
            if watch:  # while following, each incident is kept as soon as it is seen
                append_record(record, pending)
                pending.clear()
        if notifier is not None:  # after the record: an alert only queues, it never delays the record
            notifier.incident(incident)

    def following() -> None:
        note(f"# following {name}: new incidents as they happen, until it finishes (Ctrl-C to stop)")
        if notifier is not None:
            notifier.started()

    try:
        count = follow(kube, namespace, name, emit, watch=watch, clock=time.monotonic, on_following=following,
                       on_outage=lambda line: note(f"# {shown(line)}"),
                       on_objects=notifier.objects if notifier is not None else None,
                       refresh_s=notifier.refresh_s if notifier is not None else 60.0)
    finally:
        if notifier is not None:
            notifier.close()  # bounded: what the endpoint has not taken by then is named on stderr
    if record is not None and pending:
        append_record(record, pending)  # one append (one read-modify-write on gs://) for a snapshot
    if fmt == "text" and count == 0:
        note(f"no incidents for workload {name}")
    if fmt == "text":  # a note beside the record's: stdout stays one line per incident
        for line in _summary(kube, namespace, name, seen):
            note(f"# {shown(line)}")
    if record is not None:
        note(f"# {count} incidents seen; new ones appended to {record}")


def _summary(kube: Kube, namespace: str, name: str, incidents: list[Incident]) -> list[str]:
    """The failures by cause, and the no-progress ones against the trainer's progress record."""
    if not any(i.kind == "exit" and i.exit_code for i in incidents):
        return []
    try:
        progress, _ = progress_of(get_workload(kube, namespace, name), time.time())
    except NotFoundError:  # deleted while it was watched: the causes without the progress
        progress = None
    return summary_lines(incidents, progress)
