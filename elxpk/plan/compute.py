"""From validated inputs to one `Plan`: recommended period, goodput per mode, costs, the SLA table.

Pure computation (math only); the CLI renders it as a Rich table, JSON or a plot.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from elxpk.chip_hours import ChipHours
from elxpk.plan import model
from elxpk.plan.chip_cost import lost_per_week, week_cost
from elxpk.plan.elastic import MAXTEXT_DEFAULT_RETRIES, ElasticSettings, elastic_settings
from elxpk.plan.fmt import duration
from elxpk.plan.inputs import PlanInputs
from elxpk.plan.storage import Storage, storage

WEEK_H = 168.0


@dataclass(frozen=True)
class ModeResult:
    mode: str
    title: str
    downtime_s: float  # one recovery, failure to full-speed training, without further failures
    goodput: float  # at the period of the enclosing row
    hours_lost_per_week: float
    slice_hours_lost_per_week: float
    optimum_steps: int  # this mode's own exact optimum, whole steps
    optimum_goodput: float
    chip_hours_lost_per_week: float | None = None  # with --accelerator
    usd_lost_per_week: float | None = None  # with a price


@dataclass(frozen=True)
class PeriodRow:
    period_steps: int
    compute_s: float  # tau: compute between saves
    goodput: dict[str, float]
    hours_lost_per_week: dict[str, float]
    storage: Storage | None
    marks: tuple[str, ...]  # "recommended", "current", "young-daly"
    chip_hours_lost_per_week: dict[str, float] | None = None  # by mode, with --accelerator
    usd_lost_per_week: dict[str, float] | None = None  # by mode, with a price


@dataclass(frozen=True)
class Plan:
    inputs: PlanInputs
    system_mtbf_s: float
    failures_per_week: float
    young_daly_tau_s: float
    young_daly_steps: int
    exact_tau_s: float
    exact_steps: int
    modes: tuple[ModeResult, ...]  # at the recommended period
    current: tuple[ModeResult, ...]  # at --checkpoint-period, if given
    storage: Storage | None  # at the recommended period
    rows: tuple[PeriodRow, ...]
    elastic: ElasticSettings
    warnings: tuple[str, ...] = field(default_factory=tuple)
    simulation: dict | None = None
    # live-replica: against the pause-and-resume optimum, what the longer period saves in storage traffic
    storage_saved: dict | None = None
    # a week at the recommended period in the planned mode: chip-hours spent = useful + lost by cause
    chip_hours: ChipHours | None = None

    def to_dict(self) -> dict:
        inputs = self.inputs
        out = {
            "inputs": {
                **asdict(inputs.costs),
                "checkpoint_size_bytes": inputs.checkpoint_size_bytes,
                "price_per_gib_month": inputs.price_per_gib_month,
                "max_to_keep": inputs.max_to_keep,
                "ttl_s": inputs.ttl_s,
                "job_duration_s": inputs.job_duration_s,
                "checkpoint_period": inputs.checkpoint_period,
                "sources": inputs.sources,
                "accelerator": inputs.accelerator._asdict() if inputs.accelerator else None,
                "chip_hour_price": inputs.price.to_dict() if inputs.price else None,
            },
            "calibration": inputs.calibration.to_dict() if inputs.calibration else None,
            "system_mtbf_s": self.system_mtbf_s,
            "failures_per_week": self.failures_per_week,
            "recommended": {
                "checkpoint_period": self.exact_steps,
                "exact_tau_s": self.exact_tau_s,
                "young_daly_checkpoint_period": self.young_daly_steps,
                "young_daly_tau_s": self.young_daly_tau_s,
            },
            "modes": [asdict(m) for m in self.modes],
            "current": [asdict(m) for m in self.current] if self.current else None,
            "storage": asdict(self.storage) if self.storage else None,
            "elasticity": asdict(self.elastic),
            "sla": [
                {**asdict(r), "storage": asdict(r.storage) if r.storage else None, "marks": list(r.marks)}
                for r in self.rows
            ],
            "storage_saved": self.storage_saved,
            "chip_hours_per_week": self.chip_hours.to_dict() if self.chip_hours else None,
            "omitted_periods": list(inputs.omitted_periods),
            "warnings": list(self.warnings),
        }
        if self.simulation is not None:
            out["simulation"] = self.simulation
        return out


def _mode_results(inputs: PlanInputs, period: int) -> tuple[ModeResult, ...]:
    costs = inputs.costs
    out = []
    for mode in model.available_modes(costs):
        g = model.goodput(costs, mode, period * costs.step_time_s)
        best = model.best_period_steps(costs, mode)
        chip_hours, usd = lost_per_week(costs, g, inputs.accelerator, inputs.price)
        out.append(
            ModeResult(
                mode=mode,
                title=model.MODE_TITLES[mode],
                downtime_s=model.recovery(costs, mode).length_s,
                goodput=g,
                hours_lost_per_week=WEEK_H * (1.0 - g),
                slice_hours_lost_per_week=WEEK_H * (1.0 - g) * costs.num_slices,
                optimum_steps=best,
                optimum_goodput=model.goodput(costs, mode, best * costs.step_time_s),
                chip_hours_lost_per_week=chip_hours,
                usd_lost_per_week=usd,
            )
        )
    return tuple(out)


def _storage(inputs: PlanInputs, period: int) -> Storage | None:
    if inputs.checkpoint_size_bytes is None:
        return None
    costs = inputs.costs
    return storage(
        size_bytes=inputs.checkpoint_size_bytes,
        save_interval_s=period * costs.step_time_s + costs.save_s,
        max_to_keep=inputs.max_to_keep,
        ttl_s=inputs.ttl_s,
        price_per_gib_month=inputs.price_per_gib_month,
    )


def _storage_saved(inputs: PlanInputs, live_steps: int) -> dict:
    """Saves per day and GiB written per day at the pause-and-resume optimum against the live-replica one."""
    costs = inputs.costs
    rewind_steps = model.best_period_steps(costs, model.PAUSE_RESUME)
    per_day = {steps: 86400.0 / (steps * costs.step_time_s + costs.save_s) for steps in (rewind_steps, live_steps)}
    saved: dict = {
        "pause_resume_checkpoint_period": rewind_steps,
        "live_checkpoint_period": live_steps,
        "saves_per_day": {"pause_resume": per_day[rewind_steps], "live": per_day[live_steps]},
        "blocking_save_s_per_day_saved": (per_day[rewind_steps] - per_day[live_steps]) * costs.save_s,
    }
    if inputs.checkpoint_size_bytes is not None:
        gib = inputs.checkpoint_size_bytes / 2**30
        saved["written_gib_per_day_saved"] = (per_day[rewind_steps] - per_day[live_steps]) * gib
    return saved


def make_plan(inputs: PlanInputs) -> Plan:
    costs = inputs.costs
    # With a job MTBF the live-replica mode is planned for: the period then guards whole-job failures only.
    planned = model.planning_mode(costs)
    young_tau = model.young_daly_tau(costs, planned)
    young_steps = max(1, round(young_tau / costs.step_time_s))
    exact_tau = model.optimal_tau(costs, planned)
    exact_steps = model.best_period_steps(costs, planned)

    marks: dict[int, list[str]] = {p: [] for p in inputs.periods}
    marks.setdefault(exact_steps, []).append("recommended")
    if young_steps * costs.step_time_s > costs.save_s:
        marks.setdefault(young_steps, []).append("young-daly")
    if inputs.checkpoint_period is not None:
        marks.setdefault(inputs.checkpoint_period, []).append("current")
    rows = []
    for period in sorted(marks):
        tau = period * costs.step_time_s
        goodputs = {m: model.goodput(costs, m, tau) for m in model.available_modes(costs)}
        lost = {m: lost_per_week(costs, g, inputs.accelerator, inputs.price) for m, g in goodputs.items()}
        rows.append(
            PeriodRow(
                period_steps=period,
                compute_s=tau,
                goodput=goodputs,
                hours_lost_per_week={m: WEEK_H * (1.0 - g) for m, g in goodputs.items()},
                storage=_storage(inputs, period),
                marks=tuple(marks[period]),
                chip_hours_lost_per_week=None if inputs.accelerator is None else
                {m: v[0] for m, v in lost.items() if v[0] is not None},
                usd_lost_per_week=None if inputs.price is None else
                {m: v[1] for m, v in lost.items() if v[1] is not None},
            )
        )

    warnings = []
    for row in rows:
        if row.storage and row.storage.ttl_can_delete_newest and {"recommended", "current"} & set(row.marks):
            warnings.append(
                f"--ttl is shorter than one save interval at checkpoint_period {row.period_steps}: the bucket "
                "lifecycle rule can delete the only committed checkpoint; raise --ttl"
            )
    current = _mode_results(inputs, inputs.checkpoint_period) if inputs.checkpoint_period else ()
    elastic = elastic_settings(costs, exact_steps, inputs.job_duration_s)
    if elastic.default_retries_last_s < inputs.job_duration_s:
        warnings.append(
            f"with elastic_max_retries {MAXTEXT_DEFAULT_RETRIES} (the MaxText default) the attempt budget runs out "
            f"after about {duration(elastic.default_retries_last_s)} of this job, within --job-duration "
            f"{duration(inputs.job_duration_s)}: set elastic_max_retries {elastic.elastic_max_retries}"
        )
    return Plan(
        inputs=inputs,
        system_mtbf_s=costs.system_mtbf_s,
        failures_per_week=model.failures_per_week(costs),
        young_daly_tau_s=young_tau,
        young_daly_steps=young_steps,
        exact_tau_s=exact_tau,
        exact_steps=exact_steps,
        modes=_mode_results(inputs, exact_steps),
        current=current,
        storage=_storage(inputs, exact_steps),
        storage_saved=_storage_saved(inputs, exact_steps) if planned == model.LIVE else None,
        rows=tuple(rows),
        elastic=elastic,
        warnings=tuple(warnings),
        chip_hours=None if inputs.accelerator is None else
        week_cost(costs, planned, exact_steps * costs.step_time_s, inputs.accelerator, inputs.price),
    )
