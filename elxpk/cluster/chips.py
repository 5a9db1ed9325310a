"""`workload status`'s chip-hours: the chips a workload holds, from its own JobSet, and what its age costs.

The accelerator is the worker pods' node selector (GKE's labels: the TPU accelerator and topology, or the
GPU accelerator, whose slice is one node per pod); the slices are the worker replicatedJob's replicas.
Status sees no step times, so it states chip-hours spent (chips x the workload's age, elxpk/chip_hours.py's
billing assumption) and money; the split of the lost ones by cause is the trainer's events' to tell
(`elxpk report RUN_DIR --accelerator TYPE`).
"""

from __future__ import annotations

from dataclasses import replace

from elxpk.accelerators import Accelerator, Price, from_node_labels, price_of
from elxpk.chip_hours import BILLED, UNITS, Holding, decimals_for
from elxpk.cluster.status import WorkloadStatus, worker_replicated_job
from elxpk.cluster.why import ACCELERATOR, TOPOLOGY

GPU_ACCELERATOR = "cloud.google.com/gke-accelerator"


def workload_accelerator(jobset: dict) -> Accelerator | None:
    """The worker pods' accelerator, or None when their node selector names none the catalogs know."""
    worker = worker_replicated_job(jobset)
    if worker is None:
        return None
    job = (worker.get("template") or {}).get("spec") or {}
    pod = (job.get("template") or {}).get("spec") or {}
    selector = pod.get("nodeSelector") or {}
    nodes = min(int(job.get("parallelism", 1)), int(job.get("completions", job.get("parallelism", 1))))
    return from_node_labels(selector.get(ACCELERATOR), selector.get(TOPOLOGY), selector.get(GPU_ACCELERATOR),
                            max(nodes, 1))


def spent_so_far(status: WorkloadStatus, price: Price | None) -> dict | None:
    """The chip-hours (and money) the workload's age has cost: every slice's chips since it was created. None
    when the chips or the age are not known."""
    accelerator, slices = status.accelerator, status.slices_total
    if accelerator is None or status.age_s is None or slices < 1:
        return None
    per, unit = accelerator.chips_per_slice, accelerator.unit
    holding = Holding(per * slices, unit, f"{slices} slices x {per} {unit}s of {accelerator.name}")
    units = round(holding.chips * status.age_s / 3600.0 * UNITS)  # whole 2^-20 chip-hours, as report's
    out: dict = {"unit": holding.hours_word, "chips": holding.chips, "held": holding.what,
                 "wall_s": status.age_s, "billed": BILLED + "; since the workload was created (queueing included)",
                 "spent": units / UNITS, "useful": None, "lost": None, "lost_by_cause": None,
                 "split": f"elxpk report RUN_DIR --accelerator {accelerator.name}: status sees no step times",
                 "money": None}
    if price is not None:
        out["money"] = {**price.to_dict(), "currency": "USD",
                        "spent": round(units * price.usd_per_chip_hour) / UNITS}
    return out


def with_chip_hours(status: WorkloadStatus, given_price: float | None) -> WorkloadStatus:
    """`status` with its chip-hours so far, priced by --chip-hour-price or the family's list price."""
    return replace(status, chip_hours=spent_so_far(status, price_of(status.accelerator, given_price)))


def spent_text(cost: dict) -> str:
    """One line for the status table."""
    d = decimals_for(cost["spent"])
    hours = f"{cost['wall_s'] / 3600:.1f} h"
    text = f"{cost['spent']:,.{d}f} {cost['unit']} spent ({cost['held']}, {hours} since created)"
    money = cost["money"]
    if money is not None:
        text += f"; ${money['spent']:,.{decimals_for(money['spent'])}f} at ${money['usd_per_chip_hour']:g}/hour"
    return text + f"; lost by cause: {cost['split']}"
