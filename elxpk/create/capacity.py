"""Capacity modes of `workload create`: --spot, --flex-start, --reservation NAME, --on-demand.

What each renders on the pods that hold TPUs or GPUs (the Pathways workers, every slice pod of a
multi-controller JobSet, the GPU pods; never the Pathways head, which runs on the CPU pool), following xpk
1.16 (src/xpk/core/capacity.py `get_capacity_node_selectors_from_capacity_type`) for the node selectors
and gcluster v1.95 (pkg/orchestrator/gke/manifest_generator.go `resolveTolerations`) for the tolerations:

- spot: nodeSelector `cloud.google.com/gke-spot: "true"`, and a toleration of the NoSchedule taint GKE
  documents for Spot node pools (the same key), so a tainted pool still takes the pods.
- flex-start (Dynamic Workload Scheduler): nodeSelector `cloud.google.com/gke-queued: "true"` and a
  toleration of that taint (queued-provisioning pools carry it). The capacity itself is asked for by
  Kueue: the LocalQueue's ClusterQueue must carry a ProvisioningRequest admission check (xpk's `dws-prov`,
  controller `kueue.x-k8s.io/provisioning-request`); Kueue then creates a ProvisioningRequest and admits
  the workload once it is Provisioned. `--max-run-duration` becomes the JobSet annotation
  `provreq.kueue.x-k8s.io/maxRunDurationSeconds`, which Kueue copies onto the Workload and into the
  request's parameters.
- reservation: nodeSelector `cloud.google.com/reservation-name: NAME` and a toleration of that key, as
  gcluster renders it (a reservation path gives its short name, gcluster's extractShortReservationName).
- on-demand: nothing, as xpk renders it; the flag only says "not spot, not a reservation, not queued".

Standard library and elxpk.k8s_names only: read on every `workload create --dry-run`.
"""

from __future__ import annotations

from typing import NamedTuple

from elxpk.k8s_names import is_dns1035_label

# The capacity flags' keys in the flag table, in the order a refusal names them.
CAPACITY_KEYS = ("spot", "flex_start", "reservation", "on_demand")
SPOT_LABEL = "cloud.google.com/gke-spot"
QUEUED_LABEL = "cloud.google.com/gke-queued"
RESERVATION_LABEL = "cloud.google.com/reservation-name"
MAX_RUN_ANNOTATION = "provreq.kueue.x-k8s.io/maxRunDurationSeconds"
# GKE caps a flex-start (queued provisioning) node's life at 7 days.
MAX_RUN_DURATION_S = 7 * 24 * 3600


class Capacity(NamedTuple):
    """One capacity mode, as `workload create` renders it."""

    mode: str  # "spot", "flex-start", "reservation" or "on-demand"
    reservation: str | None = None  # the short name, with "reservation"
    max_run_duration_s: int | None = None  # with "flex-start"; None leaves GKE's default (7 days)

    @property
    def node_selector(self) -> tuple[tuple[str, str], ...]:
        if self.mode == "spot":
            return ((SPOT_LABEL, "true"),)
        if self.mode == "flex-start":
            return ((QUEUED_LABEL, "true"),)
        if self.mode == "reservation":
            return ((RESERVATION_LABEL, self.reservation or ""),)
        return ()

    @property
    def tolerations(self) -> tuple[tuple[str, str], ...]:
        """(key, value) of each NoSchedule taint to tolerate with operator Equal."""
        return self.node_selector

    @property
    def jobset_annotations(self) -> tuple[tuple[str, str], ...]:
        if self.mode == "flex-start" and self.max_run_duration_s is not None:
            return ((MAX_RUN_ANNOTATION, str(self.max_run_duration_s)),)
        return ()


def reservation_name(value: str) -> tuple[str | None, str | None]:
    """The short name of a reservation given as NAME or as a path holding `reservations/NAME`
    (projects/P/reservations/NAME[/reservationBlocks/B[/reservationSubBlocks/S]]): (name, None), or
    (None, what follows `--reservation 'value': ` in the refusal)."""
    parts = value.strip("/").split("/")
    name = parts[0] if len(parts) == 1 else next(
        (parts[i + 1] for i, part in enumerate(parts[:-1]) if part == "reservations"), None)
    if name is not None and is_dns1035_label(name):  # a Compute Engine resource name (RFC 1035)
        return name, None
    return None, ("give the reservation's name (a-z, 0-9, '-', at most 63, starting with a letter) or its "
                  "path projects/PROJECT/reservations/NAME, e.g. --reservation my-tpu-reservation")


def read_capacity(given: dict[str, object], spelled: dict[str, str], max_run_s: float | None,
                  max_run_flag: str) -> tuple[Capacity | None, list[str]]:
    """The capacity mode from the flags' values (`given`: key -> value, False/None when not given;
    `spelled`: key -> the flag as typed), and one line per problem: two modes at once, a bad reservation,
    --max-run-duration without --flex-start."""
    chosen = [key for key in CAPACITY_KEYS if given.get(key) not in (None, False, "")]
    problems: list[str] = []
    if len(chosen) > 1:
        problems.append(f"{' and '.join(spelled[k] for k in chosen)}: give one capacity mode (spot VMs, "
                        "flex-start through Kueue's ProvisioningRequest, a reservation, or on-demand)")
    if max_run_s is not None and "flex_start" not in chosen:
        problems.append(f"{max_run_flag}: only with --flex-start (the ProvisioningRequest's maxRunDurationSeconds);"
                        " add --flex-start or drop it")
    reservation = None
    if "reservation" in chosen:
        reservation, problem = reservation_name(str(given["reservation"]))
        if problem:
            problems.append(f"{spelled['reservation']} {given['reservation']!r}: {problem}")
    if problems or not chosen:
        return None, problems
    mode = chosen[0].replace("_", "-")
    return Capacity(mode, reservation, None if max_run_s is None else int(max_run_s)), []
