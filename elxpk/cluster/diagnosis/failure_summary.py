"""`workload events`' closing lines: the failures grouped by cause, and whether they came with no progress.

Pure (incidents and the progress record in, lines out). A failure is a container exit with a non-zero
code, a pod's disruption or eviction; its cause is what the API said of the pod (preempted, evicted, lost
its VM, deleted: elxpk/cluster/records/lost_slice.py), else the code's name in the trainer's exit-code table
(slice_lost, stalled, user_error, ...), or `exit N` for a code outside it (137 after SIGKILL or the OOM
killer). A 75 near another slice's fault is a slice that stopped with its group: counted apart, not as a
loss (one kill once, not "preempted 7, slice_lost 7"). With the trainer's progress
record (CHECKPOINT_DIR/elxpk-progress.json, `workload status` reads the same), the exits after its last
completed step are failures with no progress: two or more of one cause read "no progress since step S".
That is what `--elastic-stop-on-repeat` counts inside one trainer process; this sees it across the
group restarts that a cluster adds on top.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from elxpk.cluster.records import lost_slice
from elxpk.cluster.records.incidents import Incident
from elxpk.cluster.records.status import parse_time
from elxpk_contract.exit_codes import BY_CODE


def cause_name(code: int) -> str:
    known = BY_CODE.get(code)
    return known.name if known is not None else f"exit {code}"


def _ranked(counts: Counter) -> list[tuple[str, int]]:
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


# A group stops within seconds of its lost slice, and a JobSet restart deletes its pods within seconds more:
# a 75 (or a graceful delete's exit) that near another slice's fault is that fault's casualty, not a loss.
CASUALTY_WINDOW_S = 30.0
LOSS_KINDS = ("exit", "disruption", "evicted")
# What the API said of the pod names the fault better than the code its trainer exited with (a force delete
# still sends SIGTERM, so its trainer exits 77 "preempted")
_POD_SAID = (lost_slice.PREEMPTED, lost_slice.EVICTED, lost_slice.LOST_VM, lost_slice.DELETED)


def fault_name(incident: Incident) -> str:
    """The cause a fault is counted under: the pod's fault where the API said one, else the exit's code."""
    if incident.fault in _POD_SAID or incident.kind != "exit":
        return incident.fault or incident.reason
    return cause_name(incident.exit_code or 0)


def faults(incidents: Sequence[Incident]) -> tuple[list[Incident], list[Incident]]:
    """(the faults, the casualties): every exit with a code, disruption and eviction. A slice that stopped
    with its group (its 75, or its pod deleted with a grace period, as a JobSet restart deletes them) within
    CASUALTY_WINDOW_S of another slice's fault is that fault's casualty; where only such stops came
    together, the first of them is the fault. One slice is one of either within the window, whatever the
    number of its pods: a multi-host slice killed is one fault (each of its VMs' pods reports it), and its
    own pods that then stop with the group are that fault, not casualties."""
    found = sorted((i for i in incidents if i.kind in LOSS_KINDS and (i.kind != "exit" or i.exit_code)),
                   key=lambda i: parse_time(i.time) or 0.0)
    lost: list[Incident] = []
    casualties: list[Incident] = []
    group: list[Incident] = []
    for incident in [*found, None]:
        if incident is not None and group and (parse_time(incident.time) or 0.0) - (
                parse_time(group[0].time) or 0.0) <= CASUALTY_WINDOW_S:
            group.append(incident)
            continue
        if group:
            own = [n for n, i in enumerate(group) if not i.stopped_with_group] or [0]
            mine = _one_per_slice([group[n] for n in own])
            taken = {i.slice for i in mine if i.slice is not None}
            lost += mine
            casualties += _one_per_slice([i for n, i in enumerate(group) if n not in own and i.slice not in taken])
        group = [] if incident is None else [incident]
    return lost, casualties


def _one_per_slice(incidents: list[Incident]) -> list[Incident]:
    """The first of each slice's (in time order); those of no known slice each count."""
    seen: set[int] = set()
    out = []
    for i in incidents:
        if i.slice is None or i.slice not in seen:
            out.append(i)
            if i.slice is not None:
                seen.add(i.slice)
    return out


def summary_lines(incidents: Sequence[Incident], progress: dict | None) -> list[str]:
    lost, casualties = faults(incidents)
    if not lost:
        return []
    counts = Counter(fault_name(i) for i in lost)
    n = len(casualties)
    lines = ["failures by cause: " + ", ".join(f"{cause} {n}" for cause, n in _ranked(counts))
             + (f"; {n} slice{'s' if n > 1 else ''} stopped with {'their' if n > 1 else 'its'} group (exit 75)"
                if n else "")]
    if progress is None:
        return lines
    last_step = progress.get("step_time")
    stalled = Counter(fault_name(i) for i in lost if last_step is None or (parse_time(i.time) or 0.0) > last_step)
    for cause, n in _ranked(stalled):
        if n >= 2:
            lines.append(f"no progress since step {progress.get('steps_done', 0)}: {n} {cause} failures since "
                         "the trainer's last completed step")
    return lines
