"""Who preempted a workload: Kueue names the preemptor by its Workload's UID only, so it is looked up.

Kueue's Preempted condition and its Event say "Preempted to accommodate a workload (UID: U, JobUID: J)
due to prioritization in the ClusterQueue"; a person wants the name. `preemptor_uid` reads U from that
text, `describe` finds the Workload of that UID among those listed (the preemptor queues in the same
ClusterQueue, mostly in the same namespace) and names it with the job that owns it and its priority.
Pure: the Workloads are listed by the caller.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from elxpk.cluster.objects.workloads import Workload

_UID = re.compile(r"\(UID: ([0-9A-Za-z-]{1,64})")


def preemptor_uid(text: str) -> str | None:
    """The preemptor's Workload UID in Kueue's words, or None when the text names none."""
    found = _UID.search(text)
    return found.group(1) if found else None


def describe(workloads: Sequence[dict | Workload], uid: str) -> str | None:
    """'Workload NS/NAME (JobSet OWNER, priority P)' for the Workload of `uid`, or None when none is listed."""
    for w in map(Workload.of, workloads):
        meta = w.meta
        if meta.uid != uid:
            continue
        owners = [f"{o.kind} {o.name}" for o in meta.owners if o.name]
        named, value = w.priority_class, w.priority
        priority = f"{named} ({value})" if named and value is not None else named or ("" if value is None else str(value))
        about = ", ".join([*owners[:1], *([f"priority {priority}"] if priority else [])])
        return f"Workload {meta.namespace or ''}/{meta.name or ''}" + (f" ({about})" if about else "")
    return None
