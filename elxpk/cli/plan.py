"""`elxpk plan`: choose checkpoint_period from MTBF, step time and checkpoint cost (see docs/planner.md).

Its flags are rows of elxpk/plan/flags.py (`with_flags`: help, default and bounds from the rows), and
PlanInputs reads them all with `read_all`. --num-slices, --max-to-keep and --checkpoint-period are rows of the
trainer settings table, read by the contract's rule as the trainer reads them."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import typer

from elxpk.cli.options import NO_FLAGS, PlanOutput, with_flags
from elxpk.plan import flags as table


@with_flags("plan", table.ROWS)
def plan(
    flags: Mapping[str, Any] = NO_FLAGS,
    output: PlanOutput = "table",
) -> None:
    """Recommended checkpoint_period, goodput per recovery mode, failure and storage costs."""
    from elxpk.errors import UsageError
    from elxpk.flag_rows import alias_pairs, merge_aliases
    from elxpk.plan.compute import make_plan
    from elxpk.plan.inputs import PlanFlags, PlanInputs

    named, problems = merge_aliases(alias_pairs(table.FLAGS), flags)  # --checkpoint-save: --checkpoint-save-time's row
    if problems:
        raise UsageError(*problems)
    given = PlanFlags(output=output, **{name: value for name, value in named.items() if value is not None})
    inputs = PlanInputs.from_flags(given)
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
