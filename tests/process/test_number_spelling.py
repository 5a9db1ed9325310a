"""A number is ASCII digits, as a person types it. Python's int() and float() (and a regex's \\d) also read
other scripts' digits and `_` groups (`١٢` is 12, `1_0` is 10): every place elxpk or the trainer converts a
number refuses them, exit 2 with one line naming the flag, and nothing is written."""

from __future__ import annotations

import pytest

from elxpk_contract.exit_codes import BAD_SETTINGS
from tests.process.conftest import elxpk, trainer

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


@pytest.mark.parametrize("value", ODD)
@pytest.mark.parametrize("flag, template", TRAINER)
def test_the_trainer_refuses_a_number_only_python_reads(flag, template, value, tmp_path):
    refused = trainer(["--run-dir", str(tmp_path / "run"), flag, template.format(v=value), "--print-config"],
                      tmp_path)
    assert refused.code == BAD_SETTINGS.code, refused.out + refused.err
    assert flag in refused.err and "Traceback" not in refused.err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("value", ODD)
@pytest.mark.parametrize("args, flag", ELXPK)
def test_elxpk_refuses_a_number_only_python_reads(args, flag, value, tmp_path):
    refused = elxpk([a.format(v=value) for a in args], tmp_path)
    assert refused.code == BAD_SETTINGS.code, refused.out + refused.err
    assert flag in refused.err and "Traceback" not in refused.err
    assert list(tmp_path.iterdir()) == []
