"""`workload status`'s chip-hours: the chips a workload holds, from its own JobSet, and what its time costs.

The accelerator is the worker pods' node selector (GKE's labels: the TPU accelerator and topology, or the
GPU accelerator, whose slice is one node per pod); the slices are the worker replicatedJob's replicas.
Spent = chips x the billed interval (elxpk/chip_hours.py billed_s): where the trainer's progress record
carries this workload's run (started_at, last_record_at: the very times of its run records), from the
trainer's first start to its end, so `status`, the succeeded/failed alerts and `elxpk report` give one
figure for a finished run; else (a user's own image, MaxText, an older trainer) from Kueue's admission
(queueing not billed) or, without one, the JobSet's creation, to its end, and the line says which. The
useful and lost ones come from the progress record (Progress.badput: its seconds by cause, kept by
trainer/elastic/badput_meter.py), the rest being `other`; without those totals status states what was
spent and names `elxpk report` for the split.
"""

from __future__ import annotations

import math
from dataclasses import replace

from elxpk.accelerators import Accelerator, Price, from_node_labels, price_of
from elxpk.chip_hours import (
    BILLED,
    FROM_TRAINER,
    UNITS,
    Holding,
    Session,
    billed_s,
    decimals_for,
    render,
    split,
)
from elxpk.cluster.objects.labels import ACCELERATOR, TOPOLOGY
from elxpk.cluster.objects.workloads import JobSet
from elxpk.cluster.records.progress import progress_of
from elxpk.cluster.records.status import WorkloadStatus, worker_replicated_job
from elxpk.units import format_duration
from elxpk_contract.progress_record import BADPUT_KEYS

GPU_ACCELERATOR = "cloud.google.com/gke-accelerator"
_CLOCK_SLACK_S = 60.0  # the trainer's clock and the API server's may differ by this much
_SINCE = "; since the workload was created (queueing included)"
_UNTIL_END = "; from the workload's creation (queueing included) to its end (the JobSet's Completed or Failed)"
_FROM_PROGRESS = ("split by the trainer's progress record; other = the rest of the workload's age: queueing, "
                  "scheduling, image pulls, start-up")
_SINCE_ADMITTED = "; since Kueue admitted the workload (queueing not billed)"
_ADMITTED_TO_END = "; from Kueue's admission (queueing not billed) to its end (the JobSet's Completed or Failed)"
_FROM_PROGRESS_TRAINER = "split by the trainer's progress record; other = the rest: start-up, imports, restarts"
# spent_summary's words for how long, by the interval billed (the end of chip_hours_of's `billed`).
_SPANS = {FROM_TRAINER: "from the trainer's start to its end", _SINCE: "since created",
          _UNTIL_END: "from creation to its end", _SINCE_ADMITTED: "since admitted",
          _ADMITTED_TO_END: "from admission to its end"}


def workload_accelerator(jobset: dict | JobSet) -> Accelerator | None:
    """The worker pods' accelerator, or None when their node selector names none the catalogs know."""
    worker = worker_replicated_job(jobset)
    if worker is None:
        return None
    selector = worker.job.node_selector
    return from_node_labels(selector.get(ACCELERATOR), selector.get(TOPOLOGY), selector.get(GPU_ACCELERATOR),
                            max(worker.job.pods, 1))


def _trainer_seconds(status: WorkloadStatus, now: float) -> dict[str, float] | None:
    """The progress record's totals (Progress.badput) when they are this workload's: every key a finite
    number >= 0, begun no earlier than the JobSet (a checkpoint directory that a new workload reuses holds
    an older run's totals). None otherwise: then status states only what was spent."""
    progress = status.progress or {}
    totals, since = progress.get("badput"), progress.get("since")
    started = _number(since)
    if status.age_s is None or not isinstance(totals, dict) or started is None:
        return None
    if started < now - status.age_s - _CLOCK_SLACK_S:
        return None
    values = {key: _number(totals.get(key)) for key in BADPUT_KEYS}
    found = {key: v for key, v in values.items() if v is not None}
    return found if len(found) == len(BADPUT_KEYS) else None


def _number(value: object) -> float | None:
    """`value` as a finite number >= 0, else None (the record is read from a bucket: anything may be there)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        return None
    return float(value)


def trainer_interval(status: WorkloadStatus, now: float) -> tuple[float, float] | None:
    """(first start, end) of the trainer's run by its progress record, when the record carries this
    workload's: started_at no earlier than the JobSet (a reused checkpoint directory holds an older run's).
    The end is the record's newest run record once the workload has finished and the trainer said it
    stopped, the JobSet's end when it finished without a word (a killed trainer), else `now`."""
    progress = status.progress or {}
    started, last = _number(progress.get("started_at")), _number(progress.get("last_record_at"))
    if status.age_s is None or started is None or started < now - status.age_s - _CLOCK_SLACK_S:
        return None
    if status.ended_at is None:
        return started, max(started, now)
    if progress.get("state") != "running" and last is not None:
        return started, last
    return started, max(started, status.ended_at)


def held_s(status: WorkloadStatus, now: float) -> tuple[float, str] | None:
    """(seconds billed, how: a suffix of BILLED). From the trainer's first start to its end where its progress
    record says (trainer_interval: the same times `elxpk report` reads); else from Kueue's admission (its one
    admission) or, without, the workload's creation (queueing included: an upper bound), to its end (the
    JobSet's Completed or Failed condition) or `now`. A finished workload bills no more, so `status`, the
    `succeeded` and `failed` alerts and any later look agree. None when its age is not known."""
    if status.age_s is None:
        return None
    trainer = trainer_interval(status, now)
    if trainer is not None:
        return billed_s([Session(*trainer)]), FROM_TRAINER
    start, running, finished = now - status.age_s, _SINCE, _UNTIL_END
    if status.admitted_at is not None and status.admitted_at >= start:
        start, running, finished = status.admitted_at, _SINCE_ADMITTED, _ADMITTED_TO_END
    if status.ended_at is None:
        return billed_s([Session(start, max(start, now))]), running
    return billed_s([Session(start, max(start, min(now, status.ended_at)))]), finished


def chip_hours_of(status: WorkloadStatus, price: Price | None, now: float) -> tuple[dict, list[str]] | None:
    """(JSON, text lines) of the chip-hours (and money) the workload has cost: every slice's chips for the
    billed interval (held_s), split by cause with the trainer's progress record when it carries this
    workload's totals. None when the chips or the age are not known."""
    accelerator, slices, held = status.accelerator, status.slices_total, held_s(status, now)
    if accelerator is None or held is None or slices < 1:
        return None
    wall, how = held
    per, unit = accelerator.chips_per_slice, accelerator.unit
    holding = Holding(per * slices, unit, f"{slices} slices x {per} {unit}s of {accelerator.name}")
    billed = BILLED + how
    seconds = _trainer_seconds(status, now)
    if seconds is not None:
        ch = split(holding, wall, seconds["productive"],
                   {"recovery": seconds["restore"], "rewind": seconds["rewound"], "checkpoint": seconds["checkpoint"],
                    "waiting": seconds["waiting"], "compile": seconds["compile"]}, price, billed)
        said = _FROM_PROGRESS_TRAINER if how == FROM_TRAINER else _FROM_PROGRESS
        data = {**ch.to_dict(), "split": said}
        return data, [*render(ch), f"  ({said})"]
    units = round(holding.chips * wall / 3600.0 * UNITS)  # whole 2^-20 chip-hours, as report's
    data = {"unit": holding.hours_word, "chips": holding.chips, "held": holding.what, "wall_s": wall,
            "billed": billed, "spent": units / UNITS, "useful": None, "lost": None,
            "lost_by_cause": None, "money": None,
            "split": f"not in the trainer's progress record: elxpk report RUN_DIR --accelerator {accelerator.name}"}
    if price is not None:
        data["money"] = {**price.to_dict(), "currency": "USD", "spent": round(units * price.usd_per_chip_hour) / UNITS}
    return data, [_spent_text(data)]


def with_chip_hours(status: WorkloadStatus, given_price: float | None, now: float) -> WorkloadStatus:
    """`status` with its chip-hours so far, priced by --chip-hour-price or the family's list price."""
    found = chip_hours_of(status, price_of(status.accelerator, given_price), now)
    if found is None:
        return status
    return replace(status, chip_hours=found[0], chip_hours_lines=tuple(found[1]))


def spent_summary(cost: dict) -> str:
    """One line of what `cost` (chip_hours_of's JSON) spent: chip-hours, what held them and how long, money;
    `status` and the `succeeded`/`failed` alerts state it alike."""
    d = decimals_for(cost["spent"])
    # as every other line of a hold or an outage says it (42m00s, 3h10m): "0.0 h" said nothing of a short run
    held_for = format_duration(cost["wall_s"])
    span = next(words for how, words in _SPANS.items() if cost["billed"].endswith(how))
    text = f"{cost['spent']:,.{d}f} {cost['unit']} spent ({cost['held']}, {held_for} {span})"
    money = cost["money"]
    if money is not None:
        text += f"; ${money['spent']:,.{decimals_for(money['spent'])}f} at ${money['usd_per_chip_hour']:g}/hour"
    return text


def finished_chip_hours(jobset: dict, status: WorkloadStatus, now: float) -> tuple[str, dict | None]:
    """A finished workload's chip-hours at the list price (the same figure whenever it is asked, and the one
    `status` and `elxpk report` give: the trainer's progress record is read for its interval when `status`
    has none): (the line, the JSON), ("", None) when its chips are not known."""
    accelerator = workload_accelerator(jobset)
    if status.progress is None:
        status = replace(status, progress=progress_of(jobset, now)[0])
    found = chip_hours_of(replace(status, accelerator=accelerator), price_of(accelerator, None), now)
    return ("", None) if found is None else (spent_summary(found[0]), found[0])


def _spent_text(cost: dict) -> str:
    return spent_summary(cost) + f"; lost by cause: {cost['split']}"
