"""One reason `status --why` gives (elxpk/cluster/diagnosis/why.py, why_jobs.py and why_capacity.py make them)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Reason:
    cause: str  # quota, queue-inactive, admission-check, evicted, suspended, no-node-pool, insufficient-tpu,
    #             taint, host-ports, too-few-nodes, exclusive-placement, unschedulable, image-pull, crash-loop, pending, job-failed,
    #             job-rejected, pod-create, backoff (why_jobs.py), capacity-waiting, capacity-provisioned,
    #             capacity-failed, capacity-booking-expired, capacity-revoked (why_capacity.py), trainer-stopped (the
    #             progress record's `stopped`: elxpk/cluster/verbs/observe.py)
    text: str  # what is wrong, in one line
    fix: str = ""  # the command or flag that fixes it, where one exists
    detail: str = ""  # the component's own words (Kueue's, the scheduler's, the kubelet's), verbatim
