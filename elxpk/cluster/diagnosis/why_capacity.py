"""Why a flex-start workload waits: the ProvisioningRequest that Kueue's ProvisioningRequest admission
check made for it (autoscaling.x-k8s.io/v1; Dynamic Workload Scheduler on GKE answers it).

Pure: the Workload and the requests it owns in, reasons out. Kueue names a request
`<workload>-<check>-<attempt>` and owns it by the Workload; the newest attempt is the one that counts.
Its conditions (cluster-autoscaler's provisioningrequest API) decide the state, in the order Kueue's own
controller reads them (pkg/controller/admissionchecks/provisioning/controller.go syncCheckStates):
Failed, CapacityRevoked, BookingExpired, Provisioned, else still waiting.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from elxpk.cluster.diagnosis.why_reason import Reason
from elxpk.cluster.objects.labels import parse_time
from elxpk.cluster.objects.pods import Node
from elxpk.cluster.objects.workloads import JobSet, ProvisioningRequest, Workload

PROVREQ_API = "autoscaling.x-k8s.io/v1"
_ANOTHER_MODE = "or ask for capacity another way: --spot, --reservation NAME or --on-demand"


def owned_requests(workload: dict | Workload,
                   requests: Sequence[dict | ProvisioningRequest]) -> list[ProvisioningRequest]:
    """The requests owned by `workload`, newest first."""
    uid = Workload.of(workload).meta.uid
    mine = [r for r in map(ProvisioningRequest.of, requests) if r.meta.owned_by(uid)]
    return sorted(mine, key=lambda r: parse_time(r.meta.created) or 0.0, reverse=True)


def _check_state(workload: Workload, request: ProvisioningRequest) -> str:
    """Kueue's own view: the Workload's admission check whose name the request's carries."""
    name = request.meta.name or ""
    for check in workload.checks:
        if f"-{check.name}-" in name:
            said = f" ({check.message})" if check.message else ""
            return f"Kueue: admission check {check.name} {check.state}{said}"
    return ""


def capacity_reasons(workload: dict | Workload, requests: Sequence[dict | ProvisioningRequest],
                     name: str) -> list[Reason]:
    """One reason for the newest request owned by `workload`; none when it owns none."""
    workload = Workload.of(workload)
    mine = owned_requests(workload, requests)
    if not mine:
        return []
    request = mine[0]
    pr = request.meta.name or ""
    cls = request.provisioning_class
    attempt = f" (attempt {len(mine)})" if len(mine) > 1 else ""
    detail = _check_state(workload, request)
    # Kueue deactivates a Workload whose check it rejected (no retries left): nothing will requeue it.
    stopped = "; Kueue rejected the check and deactivated the workload" if workload.active is False else ""
    resubmit = f"resubmit when capacity may be free (`elxpk workload create ... --replace`), {_ANOTHER_MODE}"
    if failed := request.true("Failed"):
        return [Reason("capacity-failed", f"the capacity request failed: ProvisioningRequest {pr}{attempt} "
                       f"Failed: {failed.message or failed.reason}{stopped}", resubmit, detail)]
    if revoked := request.true("CapacityRevoked"):
        return [Reason("capacity-revoked", f"the provisioned capacity was taken back: ProvisioningRequest {pr} "
                       f"CapacityRevoked: {revoked.message or revoked.reason}{stopped}", resubmit, detail)]
    if expired := request.true("BookingExpired"):
        return [Reason("capacity-booking-expired", f"the capacity was provisioned but its booking expired "
                       f"before the pods started: ProvisioningRequest {pr} BookingExpired: "
                       f"{expired.message or expired.reason}{stopped}",
                       f"find why the pods did not start in time (`elxpk workload events {name}`), then "
                       + resubmit, detail)]
    if provisioned := request.true("Provisioned"):
        return [Reason("capacity-provisioned", f"capacity provisioned: ProvisioningRequest {pr} Provisioned"
                       + (f": {provisioned.message}" if provisioned.message else ""),
                       "", detail)]
    said = next((c.message for c in request.conditions if c.type == "Provisioned" and c.message), "")  # GKE's ETA
    accepted = " (accepted)" if request.true("Accepted") else ""
    return [Reason("capacity-waiting", f"waiting for capacity: ProvisioningRequest {pr}{attempt}{accepted} of class "
                   f"{cls or '?'} is not provisioned yet" + (f": {said}" if said else "")
                   + "; Kueue admits the workload once it is",
                   f"wait (flex-start queues until the capacity is free, up to the class's own limit), "
                   f"{_ANOTHER_MODE}", detail)]


def label_gap(selector: Mapping[str, str], nodes: Sequence[dict | Node],
              shape_keys: tuple[str, ...]) -> tuple[str, str] | None:
    """When nodes of the pod's TPU shape exist but lack the other labels it selects (a capacity mode's:
    gke-spot, gke-queued and the ProvisioningRequest's nodes, reservation-name): (those labels, the fix);
    None when no node has the shape either (then the shape is what is missing)."""
    shaped = [n.labels for n in map(Node.of, nodes) if all(n.labels.get(k) == selector.get(k) for k in shape_keys)]
    missing = [f"{k}={v}" for k, v in selector.items()
               if k not in shape_keys and not any(labels.get(k) == v for labels in shaped)]
    if not shaped or not missing:
        return None
    return (", ".join(missing),
            "these labels come from the capacity mode (--spot: gke-spot; --flex-start: gke-queued and the "
            "nodes made for its ProvisioningRequest, which may still be coming; --reservation: reservation-name): "
            "wait for those nodes, add a node pool of that kind, or submit without the flag")


def with_capacity(reasons: list[Reason], jobset: dict | JobSet, workloads: Sequence[dict | Workload],
                  requests: Sequence[dict | ProvisioningRequest]) -> list[Reason]:
    """A flex-start workload: the state of its ProvisioningRequest first, in place of the generic
    admission-check line (and of the eviction line when Kueue deactivated it for a rejected check)."""
    meta = JobSet.of(jobset).meta
    mine = [w for w in map(Workload.of, workloads) if w.of_jobset(meta.uid)]
    capacity = capacity_reasons(mine[0], requests, meta.name or "") if mine else []
    if not capacity:
        return reasons
    # A rejected request ends it: Kueue's eviction ("requeued") and queued lines would say otherwise.
    ended = capacity[0].cause in ("capacity-failed", "capacity-revoked", "capacity-booking-expired")
    replaced = ("admission-check", "queue-inactive") + (("evicted", "queued") if ended else ())
    return capacity + [r for r in reasons if r.cause not in replaced]
