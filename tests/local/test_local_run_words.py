"""Every message `elxpk local run` prints names a flag the user's command has: its own flags, or a trainer
setting as --trainer-arg=--NAME (never a trainer flag it does not take, such as a bare --global-batch)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from elxpk.local.options import _OWN
from elxpk_contract.settings import FIELDS

_FLAG = re.compile(r"(?<![\w=-])(--[a-z][a-z0-9-]*)(?:=(--[a-z][a-z0-9-]*))?")


def _local_run_flags() -> set[str]:
    import typer
    import typer.main

    from elxpk.cli.local import run

    app = typer.Typer()
    app.command()(run)
    return {o for p in typer.main.get_command(app).params for o in (*p.opts, *p.secondary_opts)}


LOCAL_FLAGS = _local_run_flags()
BIG = ["--trainer-arg=--d-model=8192", "--trainer-arg=--n-layers=64", "--trainer-arg=--d-ff=32768",
       "--trainer-arg=--n-heads=64"]


def _foreign_flags(message: str) -> list[str]:
    found = []
    for flag, inner in _FLAG.findall(message):
        if flag == "--trainer-arg" and inner:
            name = inner[2:].replace("-", "_")
            if name not in FIELDS or name in _OWN:
                found.append(f"{flag}={inner}")
        elif flag not in LOCAL_FLAGS:
            found.append(flag)
    return found


@pytest.mark.parametrize("argv", [
    ["--num-slices", "3"],
    ["--num-slices", "3", "--mode", "resize"],
    ["--num-slices", "5", "--mode", "resize", "--trainer-arg=--global-batch=20"],
    ["--trainer-arg=--n-heads=3"],
    ["--trainer-arg=--d-model=30", "--trainer-arg=--n-heads=4"],
    ["--kill-slice", "1@mid:999"],
    ["--kill-slice", "9@restore"],
    ["--kill-slice", "1@2+999", "--mode", "resize"],
    ["--kill-slice", "x"],
    ["--steps", "0", "--seed", "-4"],
    ["--revive-after", "inf"],
    ["--trainer-arg=--data=/nonexistent.npy"],
    ["--trainer-arg=--recovery=maybe"],
    BIG,
])
def test_every_refusal_names_only_flags_local_run_has(tmp_path, argv):
    env = {k: v for k, v in os.environ.items() if not k.startswith("ELXPK_")}
    done = subprocess.run([sys.executable, "-m", "elxpk.cli.main", "local", "run", "--run-dir", "r", "--plain",
                           "--steps", "20", *argv], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: ") and "Traceback" not in done.stderr
    assert [f for line in done.stderr.splitlines() for f in _foreign_flags(line)] == [], done.stderr
    assert not (tmp_path / "r").exists()  # refused before anything was written, or cleaned up after


def test_the_check_would_catch_a_trainer_flag():
    assert _foreign_flags("error: --global-batch 16: must divide evenly") == ["--global-batch"]
    assert _foreign_flags("error: --trainer-arg=--global-batch 16: ...; --steps 3") == []
    assert _foreign_flags("error: --trainer-arg=--steps 3") == ["--trainer-arg=--steps"]
