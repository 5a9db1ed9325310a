"""`workload status --chip-hour-price`: the chips a workload holds, read from its own JobSet (captured from the
real control plane: tests/cluster/captured.py), and the chip-hours and money its age has cost."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from elxpk.accelerators import PRICES
from elxpk.chip_hours import UNITS
from elxpk.cluster.chips import workload_accelerator
from tests.cluster.captured import OPS, captured, load_captured
from tests.cluster.conftest import run_cli

# The captured `ops` workload: 2 slices of v5litepod-16 (topology 4x4: 16 chips, 4 VMs of 4).
OPS_CHIPS = 2 * 16


@pytest.fixture(autouse=True)
def wide_terminal(monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")


def _expected(age_s: float, chips: int, price: float) -> tuple[float, float]:
    units = round(chips * age_s / 3600 * UNITS)
    return units / UNITS, round(units * price) / UNITS


def test_status_json_states_chips_spent_and_money(fake, capsys, k):
    load_captured(fake, "running")
    code, out, err = run_cli(capsys, "workload", "status", OPS, "--chip-hour-price", "2.5", "-o", "json", *k)
    assert code == 0, err
    data = json.loads(out)
    assert data["accelerator"]["name"] == "v5litepod-4x4" and data["accelerator"]["chips_per_slice"] == 16
    cost = data["chip_hours"]
    assert cost["chips"] == OPS_CHIPS and cost["unit"] == "chip-hours"
    spent, usd = _expected(cost["wall_s"], OPS_CHIPS, 2.5)
    assert cost["wall_s"] == data["age_s"] and cost["spent"] == spent
    assert cost["money"]["spent"] == usd and cost["money"]["source"] == "--chip-hour-price"
    # Status sees no step times: it says where the split is, and claims none.
    assert cost["useful"] is None and cost["lost"] is None
    assert cost["split"].startswith("elxpk report RUN_DIR --accelerator v5litepod-4x4")


def test_status_uses_the_cited_list_price_and_shows_a_row(fake, capsys, k):
    load_captured(fake, "running")
    code, out, err = run_cli(capsys, "workload", "status", OPS, *k)
    assert code == 0, err
    row = next(line for line in out.splitlines() if "Chip-hours" in line)
    assert "chip-hours spent (2 slices x 16 chips of v5litepod-4x4" in row
    assert f"at ${PRICES['v5litepod'].usd_per_chip_hour:g}/hour" in row and "elxpk report RUN_DIR" in row


@pytest.mark.parametrize("price", ["-1", "abc", "inf", "1e999"])
def test_a_bad_price_is_exit_2_and_nothing_is_sent(fake, capsys, k, price):
    before = len(fake.calls)
    code, out, err = run_cli(capsys, "workload", "status", OPS, "--chip-hour-price", price, *k)
    assert code == 2 and out == ""
    assert err.startswith("error: --chip-hour-price ") and price in err and len(err.strip().splitlines()) == 1
    assert len(fake.calls) == before


def test_a_gpu_workload_counts_gpus_per_node_times_nodes(tmp_path, capsys):
    """The rendered GPU JobSet (one node group of --num-nodes nodes of 8 GPUs), read back as status reads it."""
    code, out, err = run_cli(capsys, "workload", "create", "--workload", "g1", "--device-type", "h100-80gb-8",
                             "--num-nodes", "3", "--docker-image", "us-docker.pkg.dev/p/r/i:1", "--command", "echo",
                             "--dry-run")
    assert code == 0, err
    jobset = next(d for d in yaml.safe_load_all(out) if d and d.get("kind") == "JobSet")
    found = workload_accelerator(jobset)
    assert found is not None and (found.name, found.chips_per_slice, found.unit) == ("h100-80gb-8", 24, "GPU")
    assert workload_accelerator(captured("running")["jobset"]).chips_per_slice == 16


def test_console_script_status_with_a_price(fake, kubeconfig):
    """As a user runs it, against the captured workload: exit 0 with the figures, exit 2 on a bad price."""
    load_captured(fake, "running")
    exe = shutil.which("elxpk", path=str(Path(sys.executable).parent))
    assert exe
    done = subprocess.run([exe, "workload", "status", OPS, "--kubeconfig", str(kubeconfig), "--chip-hour-price",
                           "4", "-o", "json"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    cost = json.loads(done.stdout)["chip_hours"]
    assert cost["chips"] == OPS_CHIPS and cost["money"]["spent"] == _expected(cost["wall_s"], OPS_CHIPS, 4)[1]
    bad = subprocess.run([exe, "workload", "status", OPS, "--kubeconfig", str(kubeconfig), "--chip-hour-price",
                          "-4"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stderr.startswith("error: --chip-hour-price -4")
