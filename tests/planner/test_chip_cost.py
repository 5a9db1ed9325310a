"""`elxpk plan --accelerator TYPE [--chip-hour-price USD]`: the candidate checkpoint periods compared in
chip-hours and money (a column, a JSON field), a week's spent = useful + lost, and the refusals."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from elxpk.plan import model
from elxpk.plan.chip_cost import WEEK_S

from .helpers import EXAMPLE, run_plan

V5P_256_CHIPS = 128  # 256 TensorCores, 2 per chip


def test_json_compares_every_period_in_chip_hours_and_money(capsys):
    code, out, err = run_plan([*EXAMPLE, "--accelerator", "v5p-256", "--chip-hour-price", "3", "-o", "json"], capsys)
    assert code == 0, err
    data = json.loads(out)
    chips = 32 * V5P_256_CHIPS
    for row in data["sla"]:
        for mode, goodput in row["goodput"].items():
            expected = chips * WEEK_S / 3600 * (1 - goodput)
            assert row["chip_hours_lost_per_week"][mode] == pytest.approx(expected, rel=1e-12)
            assert row["usd_lost_per_week"][mode] == pytest.approx(3 * expected, rel=1e-12)
    # The recommended period is the planned mode's best goodput: no candidate loses less money.
    best = next(r for r in data["sla"] if "recommended" in r["marks"])
    assert all(best["usd_lost_per_week"][model.PAUSE_RESUME] <= r["usd_lost_per_week"][model.PAUSE_RESUME] + 1e-6
               for r in data["sla"])
    week = data["chip_hours_per_week"]
    assert week["chips"] == chips and week["spent"] == chips * 168
    assert week["useful"] + week["lost"] == week["spent"]
    assert sum(week["lost_by_cause"].values()) == week["lost"]
    assert week["money"]["useful"] + week["money"]["lost"] == week["money"]["spent"]
    assert data["inputs"]["chip_hour_price"]["source"] == "--chip-hour-price"
    assert all(m["usd_lost_per_week"] is not None for m in data["modes"])


def test_without_a_type_there_are_no_chip_figures(capsys):
    code, out, _ = run_plan([*EXAMPLE, "-o", "json"], capsys)
    assert code == 0
    data = json.loads(out)
    assert data["chip_hours_per_week"] is None
    assert all(r["chip_hours_lost_per_week"] is None and r["usd_lost_per_week"] is None for r in data["sla"])


def test_the_table_has_the_money_column_and_the_week_adds_up(capsys):
    code, out, err = run_plan([*EXAMPLE, "--accelerator", "v6e-256"], capsys)
    assert code == 0, err
    assert "SLA: chip-hours and money lost per week" in out and "$ lost" in out  # v6e's cited list price
    assert "chip-hours: " in out and "money at $2.7/chip-hour" in out


@pytest.mark.parametrize(("extra", "flag"), [
    (["--accelerator", "v5p-7"], "--accelerator"),
    (["--accelerator", "v5p-256", "--chip-hour-price", "-2"], "--chip-hour-price"),
    (["--accelerator", "v5p-256", "--chip-hour-price", "inf"], "--chip-hour-price"),
    (["--chip-hour-price", "2"], "--chip-hour-price"),  # a price needs the chips
])
def test_bad_type_or_price_is_one_line_exit_2(extra, flag, capsys, tmp_path):
    plot = tmp_path / "p.png"
    code, out, err = run_plan([*EXAMPLE, *extra, "--plot", str(plot)], capsys)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {flag}") and "Traceback" not in err
    assert not plot.exists()


def test_console_script_plan_with_type_and_price():
    exe = shutil.which("elxpk", path=str(Path(sys.executable).parent))
    assert exe
    done = subprocess.run([exe, "plan", *EXAMPLE, "--accelerator", "h100-80gb-8", "--chip-hour-price", "11.06",
                           "-o", "json"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    week = json.loads(done.stdout)["chip_hours_per_week"]
    assert week["unit"] == "GPU-hours" and week["chips"] == 32 * 8
    assert week["useful"] + week["lost"] == week["spent"]
    bad = subprocess.run([exe, "plan", *EXAMPLE, "--accelerator", "h100"], capture_output=True, text=True,
                         timeout=120)
    assert bad.returncode == 2 and bad.stderr.startswith("error: --accelerator 'h100'")


def test_the_cost_table_is_readable_at_80_columns():
    from rich.console import Console

    from elxpk.plan.compute import make_plan
    from elxpk.plan.inputs import PlanFlags, PlanInputs
    from elxpk.plan.table import render

    flags = PlanFlags(num_slices=32, slice_mtbf="30d", step_time="2.5s", checkpoint_save_time="20s", restore="90s",
                      checkpoint_period=100, accelerator="v5p-256", chip_hour_price="4.2", job_mtbf="90d")
    console = Console(width=80, force_terminal=True, color_system=None, record=True)
    render(make_plan(PlanInputs.from_flags(flags)), console)
    lines = console.export_text().splitlines()
    assert max(len(line) for line in lines) <= 80 and "…" not in "\n".join(lines)
    table = lines[lines.index(next(ln for ln in lines if ln.startswith("SLA: chip-hours"))):]
    assert any(line.rstrip().endswith("recommended") for line in table)
    assert any("live-" in line for line in table[:4])  # a job MTBF plans the live-replica mode


def test_the_docs_example_runs_as_written_and_prints_its_figures(capsys):
    """docs/planner.md's chip-hours example: the command as written, and the figures the page shows."""
    import re
    import shlex

    page = (Path(__file__).resolve().parents[2] / "docs" / "planner.md").read_text(encoding="utf-8")
    section = page.split("### In chip-hours and money", 1)[1].split("\n## ", 1)[0]
    block = section.split("```console\n", 1)[1].split("```", 1)[0]
    joined = re.sub(r"\\\n\s*", "", block).splitlines()
    argv = shlex.split(joined[0].removeprefix("$ "))
    assert argv[:2] == ["elxpk", "plan"]
    code, out, err = run_plan(argv[2:], capsys)
    assert code == 0, err
    printed = " ".join(out.split())  # Rich folds long lines where the page does not
    for line in joined[1:]:
        if line.strip() not in ("", "..."):
            assert " ".join(line.split()) in printed, line
    assert "$228,747 a week" in section and "$74,547 at the recommended 715" in section
