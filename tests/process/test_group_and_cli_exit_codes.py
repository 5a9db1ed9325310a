"""The multi-controller backend's processes and the `elxpk` console script, as real processes."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from elxpk_contract.exit_codes import BAD_SETTINGS, DONE
from tests.process.conftest import elxpk, user_env
from tests.support.loopback import free_port
from tests.support.processes import wait_group
from tests.support.runs import read_jsonl

pytestmark = pytest.mark.slow



def _group(run: Path, cwd: Path, *flags: str) -> tuple[list[int], list[str]]:
    """Two processes, one slice each, as two pods of a multi-controller JobSet start them."""
    port = free_port()
    args = [sys.executable, "-m", "trainer", "--slice-backend", "multi-controller", "--num-processes", "2",
            "--coordinator", f"127.0.0.1:{port}", "--run-dir", str(run), *flags]
    group = [subprocess.Popen([*args, "--process-id", str(i)], cwd=cwd, env=user_env(), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL) for i in range(2)]
    return wait_group(group, 300)


# A group's exit 0 when done and again after a resume is checked on the group-restart run of
# tests/trainer/test_multicontroller.py (real processes too; the same kind of run, so one run checks both).


def test_a_multi_controller_process_with_bad_settings_exits_2(tmp_path):
    codes, outputs = _group(tmp_path / "run", tmp_path, "--steps", "4", "--heartbeat-timeout-seconds", "0")
    assert codes == [BAD_SETTINGS.code, BAD_SETTINGS.code], outputs
    assert all("--heartbeat-timeout-seconds" in out and "Traceback" not in out for out in outputs)
    assert not (tmp_path / "run").exists()


# --- elxpk: 0 ok, 1 the checked thing failed, 2 bad input -----------------------------------------------------

def test_elxpk_local_run_with_a_killed_slice_exits_0_and_compare_and_report_read_it(tmp_path):
    run = elxpk(["local", "run", "--run-dir", "killed", "--steps", "12", "--checkpoint-period", "4",
                 "--kill-slice", "1@6", "--plain"], tmp_path)
    assert run.code == DONE.code, run.err[-3000:] + run.out[-3000:]
    ref = elxpk(["local", "run", "--run-dir", "ref", "--steps", "12", "--checkpoint-period", "4", "--no-faults",
                 "--plain"], tmp_path)
    assert ref.code == DONE.code, ref.err[-3000:]
    same = elxpk(["compare", "ref", "killed"], tmp_path)
    assert same.code == 0, same.out + same.err
    assert elxpk(["report", "killed"], tmp_path).code == 0

    # The reference with one loss changed (a run of its own would cost a third trainer process for this alone)
    other = tmp_path / "other"
    shutil.copytree(tmp_path / "ref", other)
    metrics = read_jsonl(other / "metrics.jsonl")
    metrics[6]["loss"] = (float.fromhex(metrics[6]["loss"]) * 1.5).hex()
    (other / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in metrics), encoding="utf-8")
    differ = elxpk(["compare", "ref", "other"], tmp_path)
    assert differ.code == 1, differ.out + differ.err  # the checked thing failed: the losses diverge
    assert "losses diverge" in differ.err


@pytest.mark.parametrize("args, names", [
    (["local", "run", "--steps", "0"], "--steps"),
    (["local", "run", "--kill-slice", "x@y"], "--kill-slice"),
    (["compare", "missing-a", "missing-b"], "missing-a"),
])
def test_elxpk_bad_input_exits_2_with_one_line_and_writes_nothing(args, names, tmp_path):
    bad = elxpk(args, tmp_path)
    assert bad.code == BAD_SETTINGS.code, bad.out + bad.err
    assert "Traceback" not in bad.err and names in bad.err
    assert list(tmp_path.iterdir()) == []
