"""`elxpk plan` end to end: table, JSON, plot, and bad input (one line per error, exit 2, nothing written)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from elxpk.plan import model
from elxpk.plan.model import PAUSE_RESUME, Costs

from .helpers import EXAMPLE, example_with, run_plan

EXAMPLE_COSTS = Costs(32, 30 * 86400, 2.5, 20, 90, 100)


def test_example_prints_the_recommendation_modes_storage_and_sla(capsys):
    code, out, err = run_plan([*EXAMPLE, "--ttl", "7d", "--checkpoint-period", "100"], capsys)
    assert code == 0, err
    best = model.best_period_steps(EXAMPLE_COSTS, PAUSE_RESUME)
    assert f"{best} steps" in out
    for text in ("Young/Daly", "elastic pause-and-resume", "elastic resize", "non-elastic full restart",
                 "hours lost", "At the current setting", "600 GiB", "$12.00/month", "SLA"):
        assert text in out, text


def _render_at(width: int, argv: list[str]) -> list[str]:
    from rich.console import Console

    from elxpk.plan.compute import make_plan
    from elxpk.plan.inputs import PlanFlags, PlanInputs
    from elxpk.plan.table import render

    names = {"--num-slices": "num_slices", "--slice-mtbf": "slice_mtbf", "--step-time": "step_time",
             "--checkpoint-save-time": "checkpoint_save_time", "--checkpoint-size": "checkpoint_size", "--restore": "restore",
             "--slice-replacement-time": "slice_replacement_time", "--price-per-gib-month": "price_per_gib_month",
             "--max-to-keep": "max_to_keep", "--checkpoint-period": "checkpoint_period"}
    values = dict(zip(argv[::2], argv[1::2], strict=True))
    kinds = {"num_slices": int, "max_to_keep": int, "checkpoint_period": int, "price_per_gib_month": float}
    flags = PlanFlags(**{names[k]: kinds.get(names[k], str)(v) for k, v in values.items()})
    console = Console(width=width, force_terminal=True, color_system=None, record=True)
    render(make_plan(PlanInputs.from_flags(flags)), console)
    return console.export_text().splitlines()


def test_tables_are_readable_at_80_columns():
    lines = _render_at(80, [*EXAMPLE, "--checkpoint-period", "100"])
    assert max(len(line) for line in lines) <= 80
    text = "\n".join(lines)
    assert "…" not in text  # nothing truncated
    best = model.best_period_steps(EXAMPLE_COSTS, PAUSE_RESUME)
    row = next(line for line in lines if line.split()[:1] == [str(best)] and "recommended" in line)
    assert "97.42%" in row and "recommended" in row
    for title in ("elastic resize", "pause-and-resume", "non-elastic full", f"{best} (97.42%)", "young-daly",
                  "current"):
        assert title in text, title


def test_the_same_period_prints_the_same_everywhere():
    # 715 steps x 2.5 s = 1787.5 s, while the continuous optimum is 1787.4 s: both tables show the period's.
    from elxpk.plan.fmt import duration

    best = model.best_period_steps(EXAMPLE_COSTS, PAUSE_RESUME)
    shown = duration(best * EXAMPLE_COSTS.step_time_s)
    lines = _render_at(120, [*EXAMPLE, "--checkpoint-period", "100"])
    recommended = next(line for line in lines if line.startswith("exact optimum"))
    sla = next(line for line in lines if line.split()[:1] == [str(best)])
    assert shown in recommended and shown in sla
    assert duration(1787.5) == duration(1787.5000001) == "29m48s" and duration(1787.4) == "29m47s"
    assert duration(2.5) == "2.5s" and duration(30 * 86400) == "30d"


def test_defaults_come_from_the_contract(capsys):
    from elxpk.plan.hint import TRAINER_DEFAULT_PERIOD
    from elxpk_contract.settings import default

    assert TRAINER_DEFAULT_PERIOD == default("checkpoint_period")
    argv = [a for a in EXAMPLE if a not in ("--max-to-keep", "5")]
    code, out, _ = run_plan([*argv, "-o", "json"], capsys)
    data = json.loads(out)
    assert code == 0 and data["inputs"]["max_to_keep"] == default("max_to_keep")
    assert data["inputs"]["sources"]["max_to_keep"] == "default"


def test_negative_seed_is_refused(capsys):
    code, out, err = run_plan([*EXAMPLE, "--simulate", "10", "--seed", "-1"], capsys)
    assert code == 2 and out == ""
    assert err.strip().splitlines() == ["error: --seed -1: must be from 0 to 4294967295"]  # a seed's one rule


def test_json_carries_every_figure(capsys):
    code, out, _ = run_plan([*EXAMPLE, "-o", "json"], capsys)
    assert code == 0
    data = json.loads(out)
    best = model.best_period_steps(EXAMPLE_COSTS, PAUSE_RESUME)
    assert data["recommended"]["checkpoint_period"] == best
    assert data["recommended"]["young_daly_checkpoint_period"] == 720  # sqrt(2*20*810000)/2.5
    modes = {m["mode"]: m for m in data["modes"]}
    assert set(modes) == {"pause-resume", "resize", "full-restart"}
    for name, m in modes.items():
        g = model.goodput(EXAMPLE_COSTS, name, best * 2.5)
        assert m["goodput"] == pytest.approx(g)
        assert m["hours_lost_per_week"] == pytest.approx(168 * (1 - g))
        assert m["slice_hours_lost_per_week"] == pytest.approx(32 * 168 * (1 - g))
    assert modes["full-restart"]["downtime_s"] == 100 + 60 + 120 + 90
    assert data["storage"]["gib_kept"] == pytest.approx(600) and data["storage"]["monthly_cost"] == pytest.approx(12)
    periods = [row["period_steps"] for row in data["sla"]]
    assert {50, 100, 200, 500, 1000, best, 720} == set(periods) and periods == sorted(periods)
    assert data["failures_per_week"] == pytest.approx(7 * 86400 * 32 / (30 * 86400))
    assert data["inputs"]["sources"]["replacement_s"] == "flag"


def test_plot_writes_a_png(tmp_path, capsys):
    target = tmp_path / "goodput.png"
    code, out, _ = run_plan([*EXAMPLE, "--checkpoint-period", "100", "--simulate", "200", "--plot", str(target)],
                            capsys)
    assert code == 0 and f"plot: {target}" in out and "Monte Carlo check" in out
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_simulate_adds_a_monte_carlo_check(capsys):
    code, out, _ = run_plan([*EXAMPLE, "-o", "json", "--simulate", "300", "--seed", "3"], capsys)
    assert code == 0
    sim = json.loads(out)["simulation"]
    assert sim["trials"] == 300 and len(sim["points"]) == 3
    for point in sim["points"]:
        assert abs(point["relative_difference"]) < 0.01


@pytest.mark.parametrize(
    "extra,flag",
    [
        (["--slice-mtbf", "0s"], "--slice-mtbf"),
        (["--slice-mtbf", "-3d"], "--slice-mtbf"),
        (["--slice-mtbf", "30 fortnights"], "--slice-mtbf"),
        (["--step-time", "0"], "--step-time"),
        (["--checkpoint-size", "12 parsecs"], "--checkpoint-size"),
        (["--checkpoint-period", "5"], "--checkpoint-save-time"),  # 20s save > 5 x 2.5s
        (["--periods", "5,100"], "--periods"),
        (["--periods", "ten"], "--periods"),
        (["--num-slices", "0"], "--num-slices"),
        (["--max-to-keep", "0"], "--max-to-keep"),
        (["--ttl", "0s"], "--ttl"),
        (["--price-per-gib-month", "-1"], "--price-per-gib-month"),
        (["-o", "yaml"], "-o/--output"),
        (["--plot", "goodput.txt"], "--plot"),
        (["--plot", "/nonexistent-dir/goodput.png"], "--plot"),
        (["--slice-mtbf", "10m"], "--checkpoint-save-time"),  # 32 slices: a failure every 19s, less than a save
        (["--simulate", "-5"], "--simulate"),
    ],
)
def test_bad_input_is_one_line_naming_the_flag_and_exit_2(extra, flag, capsys, tmp_path):
    code, out, err = run_plan(example_with(extra), capsys)
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {flag}"), lines


def test_every_error_is_reported_at_once_and_no_plot_is_written(tmp_path, capsys):
    target = tmp_path / "p.png"
    code, _, err = run_plan(["--slice-mtbf", "0", "--step-time", "x", "--plot", str(target)], capsys)
    assert code == 2 and not target.exists()
    flags = [line.split()[1].rstrip(":") for line in err.strip().splitlines()]
    assert sorted(flags) == sorted(["--slice-mtbf", "--step-time", "--checkpoint-save-time", "--restore", "--num-slices"])


def test_default_periods_shorter_than_a_save_are_left_out_not_refused(capsys):
    argv = [a if a != "2.5s" else "0.1s" for a in EXAMPLE]  # 50 steps = 5s < a 20s save
    code, out, _ = run_plan([*argv, "-o", "json"], capsys)
    assert code == 0
    data = json.loads(out)
    assert data["omitted_periods"] == [50, 100, 200]
    assert min(r["period_steps"] for r in data["sla"]) > 200


def test_ttl_shorter_than_the_save_interval_warns(capsys):
    code, out, _ = run_plan([*EXAMPLE, "--ttl", "10m", "-o", "json"], capsys)
    assert code == 0
    data = json.loads(out)
    assert data["storage"]["checkpoints_kept"] == 1
    assert any("--ttl" in w for w in data["warnings"])


def test_console_script_maps_bad_input_to_exit_2(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "elxpk.cli.main", "plan", "--num-slices", "4", "--slice-mtbf", "-1d",
         "--step-time", "1s", "--checkpoint-save", "5s", "--restore", "10s"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("error: --slice-mtbf") and "Traceback" not in proc.stderr


def test_plan_and_hint_import_no_heavy_modules():
    code = (
        "import sys, elxpk.cli.plan, elxpk.plan.hint, elxpk.plan.compute, elxpk.plan.table, elxpk.plan.inputs\n"
        "heavy = [m for m in ('numpy', 'jax', 'matplotlib', 'scipy', 'kubernetes', 'google.cloud') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_the_trainer_settings_are_read_with_every_other_flag(capsys):
    # --num-slices, --max-to-keep and --checkpoint-period are rows read by the contract's rule, all at once
    # with plan's own: one line each, in the trainer's words, exit 2.
    code, out, err = run_plan(example_with(["--num-slices", "abc", "--max-to-keep", "1", "--checkpoint-period",
                                            "0", "--step-time", "soon"]), capsys)
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [
        "error: --num-slices 'abc': not a whole number; give a whole number, at least 1",
        "error: --max-to-keep 1: must be at least 2 (keep at least 2 so a corrupt newest checkpoint has a valid "
        "predecessor)",
        "error: --checkpoint-period 0: must be at least 1 (steps between checkpoints, e.g. 100)",
        "error: --step-time 'soon': not a number with a unit; give a duration such as 90s, 2h or 30d"]
