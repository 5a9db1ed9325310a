"""Badput in chip-hours and money (`elxpk report --accelerator/--chip-hour-price`): the split checked by hand
on runs with known faults (tests/support/run_writer.py, a simulated clock), spent = useful + lost to the
float in JSON and to the last digit in the text, and the flags' refusals."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from elxpk.accelerators import PRICES, Price, lookup
from elxpk.chip_hours import CAUSES, UNITS, Holding, apportion, render, split
from elxpk.runs.report import build_report
from elxpk.runs.run_chip_hours import run_chip_hours
from elxpk.runs.rundir import load_run
from tests.support.run_writer import FakeRun, executed_steps, write_run

# Two kills: slice 1 lost at step 23 (checkpoint 20 restored, 3 steps redone) and at step 37 (30, 7 redone).
TWO_KILLS = FakeRun(steps=40, failures=((23, 20), (37, 30)), step_time=0.25, compile_time=3.0, wait_s=1.5,
                    restore_s=0.75, checkpoint_blocking=0.125, checkpoint_period=10)
V5P_16_CHIPS = 8  # v5p-16: 16 TensorCores, 2 per chip


def _by_hand(spec: FakeRun) -> dict[str, float]:
    """Seconds by cause, from the spec alone: what the writer's simulated clock spends on each."""
    runs = executed_steps(spec.steps, spec.failures)
    saves = sum(1 for s in runs if (s + 1) % spec.checkpoint_period == 0)
    return {
        "useful": spec.steps * spec.step_time,
        "rewind": (len(runs) - spec.steps) * spec.step_time,
        "recovery": len(spec.failures) * spec.restore_s,
        "waiting": len(spec.failures) * spec.wait_s,
        "checkpoint": saves * spec.checkpoint_blocking,
        "compile": spec.compile_time,
        "other": 0.0,  # the writer spends nothing else
    }


def _json_adds_up(data: dict) -> None:
    """spent == useful + lost and lost == the sum of its causes, as floats, exactly."""
    assert data["useful"] + data["lost"] == data["spent"]
    assert sum(data["lost_by_cause"].values()) == data["lost"]
    assert list(data["lost_by_cause"]) == [key for key, _ in CAUSES]


def _text_adds_up(lines: list[str]) -> None:
    """Every `X spent = Y useful + Z lost` line and the `lost:` line after it add up to the last digit shown."""
    for i, line in enumerate(lines):
        found = re.search(r"(-?\$?[\d.,]+) spent = (-?\$?[\d.,]+) useful \+ (-?\$?[\d.,]+) lost", line)
        if not found:
            continue
        spent, useful, lost = (_number(g) for g in found.groups())
        assert useful + lost == spent, line
        causes = [_number(v) for v in re.findall(r" (-?\$?[\d,]+\.\d+)", lines[i + 1])]
        assert len(causes) == len(CAUSES) and sum(causes) == lost, lines[i + 1]


def _number(shown: str) -> Decimal:
    return Decimal(shown.replace("$", "").replace(",", ""))


def test_two_kills_split_by_hand(tmp_path):
    spec = TWO_KILLS
    run = load_run(write_run(tmp_path / "run", spec))
    report = build_report(run)
    chips = V5P_16_CHIPS * spec.num_slices
    ch = run_chip_hours(run, report, lookup("v5p-16"), Price(4.0, "--chip-hour-price"))
    data = ch.to_dict()
    hand = _by_hand(spec)
    wall = sum(hand.values())
    assert data["unit"] == "chip-hours" and data["chips"] == chips
    assert data["spent"] == pytest.approx(chips * wall / 3600, abs=1 / UNITS)
    assert data["useful"] == pytest.approx(chips * hand["useful"] / 3600, abs=1 / UNITS)
    for key, _ in CAUSES:
        assert data["lost_by_cause"][key] == pytest.approx(chips * hand[key] / 3600, abs=1 / UNITS), key
    _json_adds_up(data)
    money = data["money"]
    assert money["usd_per_chip_hour"] == 4.0
    assert money["spent"] == pytest.approx(4.0 * chips * wall / 3600, abs=4 / UNITS)
    assert money["lost_by_cause"]["rewind"] == pytest.approx(4.0 * chips * hand["rewind"] / 3600, abs=4 / UNITS)
    _json_adds_up(money)
    _text_adds_up(render(ch))


def test_without_a_type_it_says_device_hours_of_the_runs_devices(tmp_path):
    run = load_run(write_run(tmp_path / "run", TWO_KILLS))
    lines = render(run_chip_hours(run, build_report(run), None, None))
    assert lines[0].startswith("slice-hours: ") and "chip-hours" not in lines[0]
    assert any("give --accelerator TYPE" in line for line in lines)
    assert not any(line.startswith("money") for line in lines)


def test_the_list_price_is_used_and_cited_when_no_price_is_given(tmp_path):
    run = load_run(write_run(tmp_path / "run", TWO_KILLS))
    from elxpk.accelerators import price_of

    ch = run_chip_hours(run, build_report(run), lookup("v5litepod-8"), price_of(lookup("v5litepod-8"), None))
    listed = PRICES["v5litepod"]
    assert ch.price is not None and ch.price.usd_per_chip_hour == listed.usd_per_chip_hour
    assert listed.source in ch.price.source and listed.date in ch.price.source
    assert ch.holding.chips == 8 * TWO_KILLS.num_slices  # v5litepod-8: 8 cores, 1 per chip


_SECONDS = st.floats(min_value=0, max_value=1e7, allow_nan=False)


@settings(max_examples=300, deadline=None)
@given(chips=st.integers(1, 200_000), wall=_SECONDS, parts=st.lists(_SECONDS, min_size=6, max_size=6),
       price=st.none() | st.floats(min_value=0, max_value=1000, allow_nan=False))
# Figures past 2**53 hundred-millionths: shown through a float quotient, the text lost its last digits.
@example(chips=103329, wall=5.960464477539063e-08, parts=[0.0, 0.0, 0.0, 0.0, 0.0, 3138125.0], price=None)
def test_any_split_adds_up(chips, wall, parts, price):
    """Random seconds, overlapping causes (other < 0) included: the JSON and the text add up."""
    useful, *lost = parts
    named = dict(zip([k for k, _ in CAUSES][:-1], lost, strict=False))
    ch = split(Holding(chips, "chip", "x"), wall, useful, named, None if price is None else Price(price, "p"))
    data = ch.to_dict()
    _json_adds_up(data)
    if data["money"] is not None:
        _json_adds_up(data["money"])
    _text_adds_up(render(ch))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(failures=st.lists(st.integers(1, 9), max_size=3, unique=True),
       step_time=st.floats(0.01, 5.0), wait=st.floats(0.0, 100.0), restore=st.floats(0.0, 50.0),
       compile_time=st.floats(0.0, 300.0), gap=st.floats(0.0, 1.0), slices=st.integers(1, 4))
def test_random_runs_add_up(tmp_path_factory, failures, step_time, wait, restore, compile_time, gap, slices):
    """Random runs through the typed records: chip-hours add up, and their lost causes are the report's."""
    fails = tuple((f * 4 + 3, f * 4) for f in sorted(failures))  # a kill 3 steps past each checkpoint
    spec = FakeRun(steps=40, checkpoint_period=4, failures=fails, step_time=step_time, wait_s=wait,
                   restore_s=restore, compile_time=compile_time, host_gap=gap, num_slices=slices, lost_slice=0)
    run = load_run(write_run(tmp_path_factory.mktemp("run"), spec))
    report = build_report(run)
    ch = run_chip_hours(run, report, lookup("v6e-8"), Price(2.7, "p"))
    data = ch.to_dict()
    _json_adds_up(data)
    _json_adds_up(data["money"])
    _text_adds_up(render(ch))
    chips = 8 * slices
    assert data["lost_by_cause"]["rewind"] == pytest.approx(chips * report.badput.rewound_s / 3600, abs=8 / UNITS)


def test_apportion_keeps_the_total_and_each_value_within_one():
    assert apportion(10, [3.4, 3.3, 3.3]) == [4, 3, 3]
    assert apportion(0, [0.5, -0.5]) == [1, -1] or apportion(0, [0.5, -0.5]) == [0, 0]
    assert sum(apportion(7, [1.9, 2.9, 2.2])) == 7


def test_report_json_and_text_carry_the_split(tmp_path, cli, cli_json):
    run_dir = write_run(tmp_path / "run", TWO_KILLS)
    code, data = cli_json("report", run_dir, "--no-png", "--accelerator", "v5p-16", "--chip-hour-price", "3.5")
    assert code == 0
    _json_adds_up(data["chip_hours"])
    _json_adds_up(data["chip_hours"]["money"])
    assert data["chip_hours"]["money"]["source"] == "--chip-hour-price"
    code, out, _ = cli("report", run_dir, "--no-png", "--accelerator", "v5p-16")
    assert code == 0
    lines = out.splitlines()
    assert any(line.startswith("chip-hours: ") for line in lines) and any("$4.2/chip-hour" in ln for ln in lines)
    _text_adds_up(lines)


@pytest.mark.parametrize(("argv", "flag"), [
    (["--chip-hour-price", "-1", "--accelerator", "v5p-16"], "--chip-hour-price"),
    (["--chip-hour-price", "nan", "--accelerator", "v5p-16"], "--chip-hour-price"),
    (["--chip-hour-price", "4,2", "--accelerator", "v5p-16"], "--chip-hour-price"),
    (["--accelerator", "v9z-16"], "--accelerator"),
    (["--accelerator", ""], "--accelerator"),
    (["--chip-hour-price", "4"], "--chip-hour-price"),  # a price needs the chips
])
def test_bad_price_or_type_exits_2_naming_the_flag_and_writes_nothing(tmp_path, cli, argv, flag):
    run_dir = write_run(tmp_path / "run", TWO_KILLS)
    before = sorted(p.name for p in run_dir.iterdir())
    code, out, err = cli("report", run_dir, *argv)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {flag}") and "Traceback" not in err
    assert sorted(p.name for p in run_dir.iterdir()) == before  # no report.png


def _elxpk() -> str:
    exe = shutil.which("elxpk", path=str(Path(sys.executable).parent))
    assert exe, "the elxpk console script is not installed beside this interpreter"
    return exe


def test_console_script_report_with_type_and_price(tmp_path):
    """As a user runs it: the console script, exit 0 with the split, exit 2 on a bad price."""
    run_dir = write_run(tmp_path / "run", TWO_KILLS)
    done = subprocess.run([_elxpk(), "report", str(run_dir), "--no-png", "-o", "json", "--accelerator", "v5p-2x2x2",
                           "--chip-hour-price", "4.2"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)["chip_hours"]
    assert data["chips"] == 2 * V5P_16_CHIPS
    assert data["held"].endswith("of v5p-16")  # the catalog's name, as status names the same slice
    _json_adds_up(data)
    bad = subprocess.run([_elxpk(), "report", str(run_dir), "--accelerator", "v5p-16", "--chip-hour-price", "-3"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stderr.startswith("error: --chip-hour-price -3")
    assert not (run_dir / "report.png").exists()


def test_the_docs_report_example_runs_as_written(tmp_path, monkeypatch, cli):
    """docs/local.md's command, on a run directory named as the README's demo names it."""
    import shlex

    page = (Path(__file__).resolve().parents[2] / "docs" / "local.md").read_text(encoding="utf-8")
    section = page.split("### Badput in chip-hours and money", 1)[1]
    command = section.split("```\n", 1)[1].split("\n```", 1)[0].strip()
    argv = shlex.split(command)
    assert argv[:3] == ["elxpk", "report", "elxpk-run"]
    monkeypatch.chdir(tmp_path)
    write_run(tmp_path / "elxpk-run", TWO_KILLS)
    code, out, err = cli(*argv[1:], "--no-png")
    assert code == 0, err
    assert "chip-hours: " in out and "(2 slices x 8 chips of v5p-16" in out and "money at $4.2/chip-hour" in out
    _text_adds_up(out.splitlines())
