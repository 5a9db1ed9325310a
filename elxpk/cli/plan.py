"""`elxpk plan`: choose checkpoint_period from MTBF, step time and checkpoint cost (see docs/planner.md).

--num-slices, --max-to-keep and --checkpoint-period are trainer settings: their help and bounds come from
the contract table (elxpk/cli/options.py `setting_option`), and PlanInputs checks them with it."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from elxpk.cli.options import PlanOutput, setting_option
from elxpk_contract.settings import default

Dur = "a duration: 90s, 2h, 30d"


def plan(
    num_slices: Annotated[int | None, setting_option("num_slices", extra=" in the job [the run's]")] = None,
    slice_mtbf: Annotated[str | None, typer.Option("--slice-mtbf", metavar="DURATION", help=f"Mean time between failures of ONE slice ({Dur}).")] = None,
    step_time: Annotated[str | None, typer.Option("--step-time", metavar="DURATION", help="Seconds per training step.")] = None,
    checkpoint_save: Annotated[str | None, typer.Option("--checkpoint-save", metavar="DURATION", help="Time a save blocks training.")] = None,
    checkpoint_size: Annotated[str | None, typer.Option("--checkpoint-size", metavar="SIZE", help="Bytes per checkpoint: 120GiB, 500MB.")] = None,
    restore: Annotated[str | None, typer.Option("--restore", metavar="DURATION", help="Time to restore the latest checkpoint.")] = None,
    replacement: Annotated[str | None, typer.Option("--replacement", metavar="DURATION", help="Time to replace a pod and slice [100s].")] = None,
    image_pull: Annotated[str | None, typer.Option("--image-pull", metavar="DURATION", help="Non-elastic restart: image pull [60s].")] = None,
    compile_time: Annotated[str | None, typer.Option("--compile", metavar="DURATION", help="Non-elastic restart: compile [120s, or the run's].")] = None,
    price_per_gib_month: Annotated[float, typer.Option("--price-per-gib-month", help="Storage price, $/GiB-month.")] = 0.02,
    max_to_keep: Annotated[int | None, setting_option("max_to_keep", extra=f" [the run's, else {default('max_to_keep')}]")] = None,
    ttl: Annotated[str | None, typer.Option("--ttl", metavar="DURATION", help="Bucket lifecycle: delete checkpoints older than this.")] = None,
    checkpoint_period: Annotated[int | None, setting_option("checkpoint_period", extra=": your current setting, to compare")] = None,
    periods: Annotated[str | None, typer.Option("--periods", metavar="N,N,...", help="SLA table rows [50,100,200,500,1000].")] = None,
    job_duration: Annotated[str, typer.Option("--job-duration", metavar="DURATION", help="Expected wall time of the job, for elastic_max_retries.")] = "30d",
    from_run: Annotated[str | None, typer.Option("--from-run", metavar="RUN_DIR", help="Take step, save and restore times from this run directory.")] = None,
    output: PlanOutput = "table",
    plot: Annotated[str | None, typer.Option("--plot", metavar="FILE", help="Write goodput against period to FILE.png.")] = None,
    simulate: Annotated[int, typer.Option("--simulate", help="Also check the model with this many Monte Carlo trials.")] = 0,
    weibull_shape: Annotated[float, typer.Option("--weibull-shape", help="Weibull shape of slice failures in --simulate (1 = exponential, <1 infant mortality).")] = 1.0,
    seed: Annotated[int, typer.Option("--seed", help="Seed of --simulate (0 or more).")] = 0,
    job_mtbf: Annotated[str | None, typer.Option("--job-mtbf", metavar="DURATION", help="Mean time between whole-job failures (every slice or the controller); given, plans the live-replica mode (--recovery live), whose slice failures rewind nothing.")] = None,
    reshard: Annotated[str | None, typer.Option("--reshard", metavar="DURATION", help="Live-replica: rebuilding the state from the survivors [10s].")] = None,
) -> None:
    """Recommended checkpoint_period, goodput per recovery mode, failure and storage costs."""
    from elxpk.plan.compute import make_plan
    from elxpk.plan.inputs import PlanFlags, PlanInputs

    flags = PlanFlags(
        num_slices=num_slices, slice_mtbf=slice_mtbf, step_time=step_time, checkpoint_save=checkpoint_save,
        checkpoint_size=checkpoint_size, restore=restore, replacement=replacement, image_pull=image_pull,
        compile=compile_time, price_per_gib_month=price_per_gib_month, max_to_keep=max_to_keep, ttl=ttl,
        checkpoint_period=checkpoint_period, periods=periods, job_duration=job_duration, from_run=from_run, output=output, plot=plot,
        simulate=simulate, weibull_shape=weibull_shape, seed=seed, job_mtbf=job_mtbf, reshard=reshard,
    )
    inputs = PlanInputs.from_flags(flags)
    result = make_plan(inputs)
    if inputs.simulate_trials:
        from dataclasses import replace

        from elxpk.plan.simulate import check_plan

        sim = check_plan(inputs.costs, result.exact_steps, trials=inputs.simulate_trials,
                         shape=inputs.weibull_shape, seed=inputs.seed)
        result = replace(result, simulation=sim)
    if inputs.plot is not None:
        from elxpk.plan.plot import write_plot

        write_plot(result, inputs.plot)
    if inputs.output == "json":
        data = result.to_dict()
        data["plot"] = str(inputs.plot) if inputs.plot else None
        typer.echo(json.dumps(data, indent=2))
        return
    from elxpk.plan.table import render

    render(result)
    if inputs.plot is not None:
        typer.echo(f"plot: {inputs.plot}")
