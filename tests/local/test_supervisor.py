"""The group supervisor's failure path, against a stand-in `python -m trainer` that fails on its own."""

from __future__ import annotations

import dataclasses
import json
import sys
import textwrap

import pytest

from elxpk.errors import CheckFailed
from elxpk.local.supervisor import GroupPlan, GroupSupervisor, process_env
from elxpk_contract.command_line import config_from_args
from elxpk_contract.event_records import parse_event
from elxpk_contract.settings import TrainerConfig

FAKE_MAIN = textwrap.dedent('''
    import json, os, sys
    args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
    if args.get("--process-id", "0") == "0":
        with open(os.path.join(args["--run-dir"], "metrics.jsonl"), "a") as f:
            f.write(json.dumps({"step": 0, "loss": "0x1p+0", "lr": 0.1, "step_time_s": 0.01, "examples": [0, 4],
                                "slices": [0, 1], "time": 1.0}) + "\\n")
    print("error: fake trainer crashed on purpose", file=sys.stderr)
    sys.exit(3)
''')


@pytest.fixture
def fake_trainer(tmp_path):
    pkg = tmp_path / "fake" / "trainer"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "__main__.py").write_text(FAKE_MAIN)
    return pkg.parent


def test_unexpected_failures_restart_then_give_up(tmp_path, fake_trainer):
    run_dir = tmp_path / "run"
    config = TrainerConfig(run_dir=str(run_dir), num_slices=2, devices_per_slice=2, seed=3)
    plan = GroupPlan(config=config, kills=(), revive_after=0.0, max_restarts=1, python=sys.executable)
    seen: list[tuple[str, dict]] = []
    supervisor = GroupSupervisor(plan, lambda kind, rec: seen.append((kind, rec)), cwd=str(fake_trainer))
    with pytest.raises(CheckFailed) as info:
        supervisor.run()
    message = str(info.value)
    assert "failed 2 times without an injected fault (exit codes [3, 3])" in message
    assert "attempt2-process0.log: error: fake trainer crashed on purpose" in message
    assert [k for k, _ in seen].count("metric") == 2  # one step per attempt, relayed to the view
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    assert [e["event"] for e in events] == ["slices_ready"]  # one group restart, no injected failure
    assert parse_event(events[0]).source == "supervisor"  # a typed record, like the trainer's
    assert sorted(p.name for p in (run_dir / "logs").iterdir()) == [
        "attempt1-process0.log", "attempt1-process1.log", "attempt2-process0.log", "attempt2-process1.log"]


def test_processes_start_with_flags_built_from_the_config(tmp_path):
    config = TrainerConfig(run_dir=str(tmp_path / "run"), num_slices=2, devices_per_slice=2, steps=30, seed=3,
                           d_model=64)
    supervisor = GroupSupervisor(GroupPlan(config=config, kills=(), revive_after=0.0), lambda kind, rec: None)
    argv = supervisor._command(1, 4567)[3:]  # after `python -m trainer`
    child = config_from_args(argv)
    assert child == dataclasses.replace(config, slice_backend="multi-controller", num_processes=2, process_id=1,
                                        coordinator="127.0.0.1:4567")


def test_child_environment_sets_its_own_device_count():
    env = process_env(2, {"XLA_FLAGS": "--xla_force_host_platform_device_count=8 --xla_foo=1", "PATH": "/bin"})
    assert env["XLA_FLAGS"] == "--xla_force_host_platform_device_count=2 --xla_foo=1"
    assert env["JAX_PLATFORMS"] == "cpu" and env["NO_GCE_CHECK"] == "true"
