"""Which slice each recovery lost, and why, where the trainer's own records do not say (issue 52).

The trainer names the lost slices when a survivor detects the loss (`failure_detected`'s `slices_lost`). It
cannot when the writer of the records (process 0) is itself the victim, or hears SIGTERM with everyone else
(a kill of slice 0, a Kueue preemption): its `preempted` names no slice, and a killed session writes nothing.
The cluster's incident record (`workload events --record`) has the victim: the pod the API deleted, evicted
or preempted, or Kueue's eviction of the whole workload. Its incidents are ranked by
elxpk/cluster/records/lost_slice.py's `incident_rank`, the order it gives the pods' evidence (the API's own
word first, Kueue's before what the containers did after), and never name a slice that stopped with its
group (its 75, its pod deleted with a grace period by the JobSet restart): those are survivors.

Each incident belongs to the recovery whose detection is nearest to it within [incident - DETECTION_LAG_S,
incident + FAULT_LEAD_S]: a killed session's failure is dated at its last record (before the kill), a
SIGTERM's at the trainer's stop (after the pod's deletion; Kueue dates its eviction before both).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from elxpk.cluster.records.lost_slice import KUEUE_RANK, fault_class, incident_rank
from elxpk.runs.incident_timeline import DETECTION_LAG_S, unix_time
from elxpk.runs.recoveries import RecoveryTimeline
from elxpk_contract.exit_codes import PREEMPTED

# How long before the trainer's record of a fault the cluster may date it: Kueue dates a preemption before
# the victims' last step, a pod's deletion comes before its trainer's SIGTERM drain ends.
FAULT_LEAD_S = 60.0
KUEUE_PREEMPTED, KUEUE_EVICTED = "preempted by Kueue", "evicted by Kueue"


@dataclass(frozen=True)
class Victim:
    slices: tuple[int, ...]  # () for the whole workload
    cause: str  # lost its VM, evicted, preempted, stopped by SIGTERM, failed, preempted by Kueue, ...
    time: float | None  # unix seconds, as the cluster dates it
    exit_class: str = "unknown"  # the trainer's class of the fault (slice_lost, preempted): a report's `cause`

    def text(self) -> str:
        where = "the workload" if not self.slices else "slice " + ",".join(map(str, self.slices))
        return f"{where} {self.cause}"


def _rank(incident: dict) -> int | None:
    code = incident.get("exit_code")
    return incident_rank(str(incident.get("kind") or ""), str(incident.get("fault") or ""),
                         code if isinstance(code, int) else None, str(incident.get("reason") or ""))


def _cause(incident: dict, rank: int) -> str:
    if rank == KUEUE_RANK:
        return KUEUE_PREEMPTED if "Preempted" in str(incident.get("reason") or "") else KUEUE_EVICTED
    return str(incident.get("fault") or incident.get("reason") or "failed")


def _exit_class(incident: dict, rank: int) -> str:
    """The trainer's class of the incident's fault: Kueue's eviction stops every process with SIGTERM."""
    if rank == KUEUE_RANK:
        return PREEMPTED.name
    code = incident.get("exit_code")
    return fault_class(str(incident.get("fault") or ""), code if isinstance(code, int) else None)


def incident_victim(incidents: Sequence[dict]) -> Victim | None:
    """The victim the incidents of one fault name (None: only casualties, or nothing, shows)."""
    ranked = [(rank, i) for i in incidents if (rank := _rank(i)) is not None]
    if not ranked:
        return None
    strongest = min(rank for rank, _ in ranked)
    mine = sorted((i for rank, i in ranked if rank == strongest), key=lambda i: unix_time(i.get("time")) or 0.0)
    first = mine[0]
    said = _cause(first, strongest), unix_time(first.get("time"))
    if strongest == KUEUE_RANK:
        return Victim((), *said, _exit_class(first, strongest))
    slices = tuple(sorted({i["slice"] for i in mine if isinstance(i.get("slice"), int)}))
    return Victim(slices, *said, _exit_class(first, strongest)) if slices else None


def incidents_by_recovery(found: Sequence[RecoveryTimeline], incidents: Sequence[dict]) -> list[list[dict]]:
    """Each recovery's incidents: each dated incident goes to the recovery detected nearest to it, within
    DETECTION_LAG_S before it to FAULT_LEAD_S after it; the rest to none."""
    mine: list[list[dict]] = [[] for _ in found]
    for incident in incidents:
        at = unix_time(incident.get("time"))
        if at is None:
            continue
        near = [(abs(rec.detected_at - at), n) for n, rec in enumerate(found)
                if at - DETECTION_LAG_S <= rec.detected_at <= at + FAULT_LEAD_S]
        if near:
            mine[min(near)[1]].append(incident)
    return mine


def with_victims(found: Sequence[RecoveryTimeline], incidents: Sequence[dict],
                 every_slice: tuple[int, ...] = ()) -> list[RecoveryTimeline]:
    """The recoveries, each with the victim its incidents name where the trainer's records named none (no
    lost slice), or only the slice of the writer that heard SIGTERM itself (a `preempted`: with Kueue's
    preemption every slice heard it), and the class of the incidents' fault where the trainer's is unknown
    (a killed writer recorded none): `cause` is a class in every row, the incidents' words are the victim's.
    A fault of the whole workload (Kueue's) lost `every_slice` (the run's slices), and is `preempted`
    whichever process heard its SIGTERM first."""
    out = []
    for rec, own in zip(found, incidents_by_recovery(found, incidents), strict=True):
        victim = incident_victim(own)
        # Kueue's eviction of the whole workload signals every process: the trainer's record names only the
        # process that heard it first (process 0's own `preempted`, or a peer's `peer_preempted`, 75 to
        # process 0), so Kueue's word decides the slices and the class.
        whole = victim is not None and not victim.slices
        if victim is None or (rec.lost and rec.kind != "preempted" and not whole):
            out.append(rec)
            continue
        lost = tuple(sorted({*rec.lost, *(victim.slices or every_slice)}))
        out.append(replace(rec, lost=lost, victim=victim.text(), victim_from="incidents",
                           cause=victim.exit_class if whole or rec.cause in ("", "unknown") else rec.cause))
    return out
