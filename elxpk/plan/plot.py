"""`elxpk plan --plot FILE`: goodput against checkpoint_period for each mode (matplotlib, imported here)."""

from __future__ import annotations

import math
from pathlib import Path

from elxpk.outfile import save_figure
from elxpk.plan import model
from elxpk.plan.compute import Plan


def write_plot(plan: Plan, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    costs = plan.inputs.costs
    periods = [p.period_steps for p in plan.rows] + [plan.exact_steps, plan.young_daly_steps]
    lo = max(1.0, min(periods) / 3, math.ceil(costs.save_s / costs.step_time_s) + 1)
    hi = max(periods) * 3
    n = 200
    grid = [math.exp(math.log(lo) + (math.log(hi) - math.log(lo)) * i / (n - 1)) for i in range(n)]
    fig, ax = plt.subplots(figsize=(8, 4.8), dpi=110)
    for mode in model.available_modes(costs):
        ax.plot(grid, [100 * model.goodput(costs, mode, p * costs.step_time_s) for p in grid],
                label=model.MODE_TITLES[mode])
    ax.axvline(plan.exact_steps, color="k", lw=1, label=f"exact optimum {plan.exact_steps}")
    ax.axvline(plan.young_daly_steps, color="grey", ls="--", lw=1, label=f"Young/Daly {plan.young_daly_steps}")
    if plan.inputs.checkpoint_period:
        ax.axvline(plan.inputs.checkpoint_period, color="tab:red", ls=":", lw=1.5,
                   label=f"current {plan.inputs.checkpoint_period}")
    if plan.simulation:
        for point in plan.simulation["points"]:
            ax.errorbar([point["checkpoint_period"]], [100 * point["simulated_goodput"]],
                        yerr=[200 * point["stderr"]], fmt="o", ms=4, color="k")
    ax.set_xscale("log")
    ax.set_xlabel("checkpoint_period (steps)")
    ax.set_ylabel("expected goodput (%)")
    ax.set_title(f"{costs.num_slices} slices, system MTBF {plan.system_mtbf_s / 3600:.1f} h, "
                 f"save {costs.save_s:g}s, step {costs.step_time_s:g}s")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path, flag="--plot")
    plt.close(fig)
    return path
