"""A number is ASCII digits, as a person types it. Python's int() and float() (and a regex's \\d) also read
other scripts' digits and `_` groups (`١٢` is 12, `1_0` is 10): every place elxpk or the trainer converts a
number refuses them, exit 2 with one line naming the flag, and nothing is written.

The rule is pure (a reader of flag text), so its 48 cases call the two entry points' `main` in-process; one
subprocess per entry point (`python -m trainer`, the `elxpk` script) checks that the real process exits 2
the same way."""

from __future__ import annotations

from pathlib import Path

import pytest

from elxpk.cli.main import main as elxpk_main
from elxpk_contract.exit_codes import BAD_SETTINGS
from tests.process.conftest import Exited, elxpk, trainer, user_env
from trainer.__main__ import main as trainer_main

ODD = ["١٢", "1_0", "٠.٥", "１２"]  # Arabic-Indic, an underscore group, a decimal, fullwidth

TRAINER = [("--steps", "{v}"), ("--learning-rate", "{v}"), ("--elastic-timeout-seconds", "{v}"),
           ("--fault", "1@{v}"), ("--fault", "{v}@3")]
ELXPK = [
    (["plan", "--num-slices", "{v}"], "--num-slices"),
    (["plan", "--price-per-gib-month", "{v}"], "--price-per-gib-month"),
    (["workload", "create", "--workload", "w", "--tpu-type", "v5litepod-16", "--num-slices", "{v}",
      "--command", "true", "--dry-run"], "--num-slices"),
    (["workload", "kill-slice", "w", "--slice", "{v}", "--yes", "--kubeconfig", "/dev/null"], "--slice"),
    (["workload", "logs", "w", "--tail", "{v}", "--kubeconfig", "/dev/null"], "--tail"),
    (["local", "run", "--kill-slice", "1@{v}"], "--kill-slice"),
    (["local", "run", "--steps", "{v}"], "--steps"),
]


def trainer_args(flag: str, template: str, value: str, tmp_path: Path) -> list[str]:
    return ["--run-dir", str(tmp_path / "run"), flag, template.format(v=value), "--print-config"]


def assert_refused(refused: Exited, flag: str) -> None:
    assert refused.code == BAD_SETTINGS.code, refused.out + refused.err
    assert flag in refused.err and "Traceback" not in refused.err


@pytest.mark.parametrize("value", ODD)
@pytest.mark.parametrize("flag, template", TRAINER)
def test_the_trainer_refuses_a_number_only_python_reads(flag, template, value, tmp_path, capsys):
    code = trainer_main(trainer_args(flag, template, value, tmp_path), user_env())
    captured = capsys.readouterr()
    assert_refused(Exited(code, captured.out, captured.err), flag)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("value", ODD)
@pytest.mark.parametrize("args, flag", ELXPK)
def test_elxpk_refuses_a_number_only_python_reads(args, flag, value, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the process tests run in an empty folder: nothing may appear in it
    code = elxpk_main([a.format(v=value) for a in args])
    captured = capsys.readouterr()
    assert_refused(Exited(code, captured.out, captured.err), flag)
    assert list(tmp_path.iterdir()) == []


def test_the_trainer_process_refuses_it_too(tmp_path):
    refused = trainer(trainer_args("--steps", "{v}", "١٢", tmp_path), tmp_path)
    assert_refused(refused, "--steps")
    assert not (tmp_path / "run").exists()


def test_the_elxpk_process_refuses_it_too(tmp_path):
    args, flag = ELXPK[2]
    refused = elxpk([a.format(v="1_0") for a in args], tmp_path)
    assert_refused(refused, flag)
    assert list(tmp_path.iterdir()) == []
