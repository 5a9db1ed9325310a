"""The Rich rendering of a Plan: headline, recommended period, modes, storage, SLA table."""

from __future__ import annotations

import sys

from rich import box
from rich.console import Console
from rich.table import Table

from elxpk.chip_hours import render as render_chip_hours
from elxpk.piped_text import piped_console
from elxpk.plan import model
from elxpk.plan.compute import ModeResult, Plan
from elxpk.plan.fmt import duration as format_duration

_SOURCE_NAMES = {
    "num_slices": "slices",
    "step_time_s": "step",
    "save_s": "save",
    "restore_s": "restore",
    "replacement_s": "replacement",
    "compile_s": "compile",
    "checkpoint_size_bytes": "checkpoint size",
    "checkpoint_period": "checkpoint_period",
    "max_to_keep": "max_to_keep",
}


def _pct(x: float) -> str:
    return f"{100 * x:.2f}%"


def _gib(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


def _table(title: str | None = None) -> Table:
    """Every table is readable at 80 columns: light borders, one space between cells, headers that fold
    (key cells get a min_width so Rich narrows the headers, never the numbers)."""
    return Table(title=title and "\n" + title, title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False, collapse_padding=True,
                 show_edge=False)


def _num_column(table: Table, header: str) -> None:
    """A right-aligned column whose cells never wrap; its header breaks at the newlines given."""
    table.add_column(header, justify="right", no_wrap=True)


def _modes_table(title: str, modes: tuple[ModeResult, ...], period: int) -> Table:
    table = _table(f"{title} (checkpoint_period {period})")
    table.add_column("mode", min_width=max(len(w) for m in modes for w in m.title.split()))
    _num_column(table, "downtime\n/ failure")
    _num_column(table, "goodput")
    _num_column(table, "hours lost\n/ week")
    _num_column(table, "slice-hours\nlost / week")
    _num_column(table, "own optimum\nsteps (goodput)")
    for m in modes:
        table.add_row(
            m.title,
            format_duration(m.downtime_s),
            _pct(m.goodput),
            f"{m.hours_lost_per_week:.2f}",
            f"{m.slice_hours_lost_per_week:,.1f}",
            f"{m.optimum_steps} ({_pct(m.optimum_goodput)})",
        )
    return table


def render(plan: Plan, console: Console | None = None) -> None:
    # explicit styles only (auto-highlighting halves the speed); in a pipe, no padding after the lines
    console = console or piped_console(sys.stdout, highlight=False)
    if not console.is_terminal:
        console.width = max(console.width, 140)
    inputs, costs = plan.inputs, plan.inputs.costs
    console.print(
        f"[bold]{costs.num_slices} slices[/], slice MTBF {format_duration(costs.slice_mtbf_s)} -> a failure every "
        f"[bold]{format_duration(plan.system_mtbf_s)}[/] ({plan.failures_per_week:.1f} per week); "
        f"step {format_duration(costs.step_time_s)}, save {format_duration(costs.save_s)}, "
        f"restore {format_duration(costs.restore_s)}, replacement {format_duration(costs.replacement_s)}"
    )
    from_run = [name for key, name in _SOURCE_NAMES.items() if inputs.sources.get(key) == "run"]
    if inputs.calibration and from_run:
        cal = inputs.calibration
        console.print(
            f"from run {cal.run_dir}: {', '.join(from_run)} ({cal.steps_sampled} steps, {cal.saves_sampled} saves, "
            f"{cal.restores_sampled} restores sampled)"
        )
        for note in cal.notes:
            console.print(f"  note: {note}")

    rec = _table("Recommended checkpoint_period")
    rec.add_column("rule")
    _num_column(rec, "checkpoint\nperiod")
    _num_column(rec, "compute\nbetween saves")
    # The compute of the whole-step period shown (not the continuous optimum): the same figure as its SLA row.
    live = model.planning_mode(costs) == model.LIVE
    rec.add_row(
        "exact optimum of the model (live-replica: whole-job failures only)" if live else
        "exact optimum of the model (pause-and-resume, also full restart)",
        f"[bold green]{plan.exact_steps}[/] steps",
        format_duration(plan.exact_steps * costs.step_time_s),
    )
    rec.add_row(
        "Young/Daly first order, sqrt(2 C M_job)" if live else "Young/Daly first order, sqrt(2 C M_sys)",
        f"{plan.young_daly_steps} steps",
        format_duration(plan.young_daly_steps * costs.step_time_s),
    )
    console.print(rec)
    console.print(_modes_table("Expected goodput by mode", plan.modes, plan.exact_steps))
    if plan.current and inputs.checkpoint_period is not None:
        console.print(_modes_table("At the current setting", plan.current, inputs.checkpoint_period))

    if plan.storage:
        st = plan.storage
        ttl = f", ttl {format_duration(inputs.ttl_s)}" if inputs.ttl_s else ""
        keep = "all" if inputs.max_to_keep == 0 else inputs.max_to_keep
        console.print(
            f"storage at {plan.exact_steps} steps: {st.checkpoints_kept} checkpoints kept (max_to_keep {keep}{ttl}) = "
            f"[bold]{_gib(st.gib_kept)} GiB[/], ${st.monthly_cost:,.2f}/month at "
            f"${inputs.price_per_gib_month}/GiB-month; {_gib(st.written_gib_per_day)} GiB written/day"
        )
    else:
        console.print("storage: give --checkpoint-size for GiB kept and monthly cost")
    if plan.storage_saved:
        saved = plan.storage_saved
        written = saved.get("written_gib_per_day_saved")
        fewer = saved["saves_per_day"]["pause_resume"] - saved["saves_per_day"]["live"]
        blocking = saved["blocking_save_s_per_day_saved"]
        # Live recovery usually saves less often; when it saves more (a job MTBF short against the slice
        # MTBF), the words say so rather than printing a negative saving.
        console.print(
            f"live-replica saves: checkpoint_period {saved['live_checkpoint_period']} instead of "
            f"{saved['pause_resume_checkpoint_period']} (pause-and-resume's optimum): "
            f"{abs(fewer):.1f} {'fewer' if fewer >= 0 else 'more'} saves/day, "
            f"{format_duration(abs(blocking))} {'less' if blocking >= 0 else 'more'} save blocking/day"
            + (f", {_gib(abs(written))} GiB {'less' if written >= 0 else 'more'} written/day"
               if written is not None else "")
        )

    el = plan.elastic
    console.print(
        f"elasticity: [bold]elastic_min_slice_count {el.elastic_min_slice_count}[/] "
        f"({model.MODE_TITLES[el.mode]} rates higher), [bold]elastic_timeout_seconds {el.elastic_timeout_seconds}[/] "
        f"(covers 3 x replacement), [bold]elastic_max_retries {el.elastic_max_retries}[/] "
        f"({el.expected_failures:.1f} failures expected in --job-duration {format_duration(el.job_duration_s)}; "
        "attempts never reset)"
    )

    sla = _table("SLA: goodput by checkpoint_period")
    _num_column(sla, "period")
    _num_column(sla, "compute")
    modes = model.available_modes(costs)
    for mode in modes:
        _num_column(sla, mode.replace("-", "-\n", 1))
    _num_column(sla, "h lost / wk\n(pause)")
    sla.add_column("", min_width=max((len(", ".join(r.marks)) for r in plan.rows), default=0))
    for row in plan.rows:
        cells = [str(row.period_steps), format_duration(row.compute_s)]
        cells += [_pct(row.goodput[m]) for m in modes]
        cells.append(f"{row.hours_lost_per_week[model.PAUSE_RESUME]:.2f}")
        cells.append(", ".join(row.marks))
        sla.add_row(*cells, style="bold" if "recommended" in row.marks else None)
    console.print(sla)
    if plan.storage:
        store = _table("SLA: storage by checkpoint_period")
        _num_column(store, "period")
        _num_column(store, "GiB kept")
        _num_column(store, "$ / month")
        _num_column(store, "GiB written\n/ day")
        for row in plan.rows:
            if row.storage:
                store.add_row(str(row.period_steps), _gib(row.storage.gib_kept), f"{row.storage.monthly_cost:,.2f}",
                              _gib(row.storage.written_gib_per_day),
                              style="bold" if "recommended" in row.marks else None)
        console.print(store)
    if plan.chip_hours is not None:
        console.print(_cost_table(plan))
        planned = model.planning_mode(costs)
        console.print(f"a week at checkpoint_period {plan.exact_steps} ({model.MODE_TITLES[planned]}; lost by "
                      "cause to first order, other = the exact model's difference):")
        for line in render_chip_hours(plan.chip_hours):
            console.print(line, markup=False)
    if inputs.omitted_periods:
        console.print(
            f"periods {', '.join(map(str, inputs.omitted_periods))} left out: a save takes longer than their compute"
        )
    if plan.simulation:
        _render_simulation(plan.simulation, console)
    for warning in plan.warnings:
        console.print(f"[yellow]warning:[/] {warning}")


def _cost_table(plan: Plan) -> Table:
    """The candidate periods compared in chip-hours and money (with --accelerator; money with a price), in the
    planned mode and in non-elastic full restart, for contrast."""
    inputs = plan.inputs
    planned = model.planning_mode(inputs.costs)
    unit = inputs.accelerator.unit if inputs.accelerator else "chip"
    table = _table(f"SLA: {unit}-hours and money lost per week by checkpoint_period")
    _num_column(table, "period")
    shown = (planned, model.FULL_RESTART)
    for mode in shown:
        folded = mode.replace("-", "-\n", 1)
        _num_column(table, f"{unit}-h lost\n{folded}")
        if inputs.price is not None:
            _num_column(table, f"$ lost\n{folded}")
    table.add_column("", min_width=max((len(", ".join(r.marks)) for r in plan.rows), default=0))
    for row in plan.rows:
        cells = [str(row.period_steps)]
        for mode in shown:
            cells.append(f"{(row.chip_hours_lost_per_week or {})[mode]:,.1f}")
            if row.usd_lost_per_week is not None:
                cells.append(f"{row.usd_lost_per_week[mode]:,.2f}")
        cells.append(", ".join(row.marks))
        table.add_row(*cells, style="bold" if "recommended" in row.marks else None)
    return table


def _render_simulation(sim: dict, console: Console) -> None:
    console.print(
        f"Monte Carlo check: {sim['trials']:,} trials x {format_duration(sim['horizon_s'])}, "
        f"{sim['distribution']} slice failures, {sim['failures']:,} failures in all (seed {sim['seed']})"
    )
    table = _table()
    table.add_column("mode", no_wrap=True)
    _num_column(table, "model\ngoodput")
    _num_column(table, "simulated")
    _num_column(table, "difference")
    for row in sim["points"]:
        table.add_row(
            row["mode"],
            _pct(row["model_goodput"]),
            f"{_pct(row['simulated_goodput'])} ± {100 * row['stderr']:.3f}%",
            "n/a" if row["relative_difference"] is None else f"{100 * row['relative_difference']:+.3f}%",
        )
    console.print(table)
