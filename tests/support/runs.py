"""Session-scoped trainer runs shared by several test modules (trainer, local run, report, compare).

Each fixture trains a tiny model once per test session on 2 simulated slices x 2 CPU devices and hands
back the run directory with its parsed records, so many tests can assert on one run instead of
re-training. Import the fixtures into a conftest.py:

    from tests.support.runs import reference_run, pause_resume_run, resize_run, save_kill_run  # noqa: F401

All runs share one configuration (`tiny_config`), so their losses are comparable step by step.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

import pytest

STEPS = 16
PERIOD = 4
# The "random" kill step of the pause-and-resume run: drawn from a fixed seed so a failure reproduces.
KILL_STEP = random.Random(20261130).randrange(PERIOD + 1, STEPS - 1)
RESIZE_KILL_STEP, RESIZE_REVIVE_STEP = 6, 10


def tiny_config(run_dir: Path | str, **overrides):
    """A ~20k-parameter model that trains in a few seconds; every test run uses these settings."""
    from elxpk_contract.settings import TrainerConfig

    settings = dict(
        run_dir=str(run_dir), steps=STEPS, checkpoint_period=PERIOD, max_to_keep=3, seed=7,
        num_slices=2, devices_per_slice=2, global_batch=8, seq_len=16, vocab_size=64, d_model=32,
        n_layers=2, n_heads=2, d_ff=64, dropout=0.1, learning_rate=3e-3, warmup_steps=4, decay_steps=32,
        elastic_enabled=True, elastic_poll_seconds=0.05, elastic_timeout_seconds=60,
        # These shared runs exercise the checkpoint path; tests/trainer/test_live_recovery.py the live one.
        recovery="checkpoint",
    )
    settings.update(overrides)
    return TrainerConfig(**settings)


def read_jsonl(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@dataclass
class Run:
    cfg: object
    result: object  # trainer.elastic.loop.TrainResult
    run_dir: Path
    metrics: list[dict]
    events: list[dict]

    def last_by_step(self) -> dict[int, dict]:
        """The record that counts for each step: the last one written (a rewind appends)."""
        last = {}
        for record in self.metrics:
            last[record["step"]] = record
        return last

    def events_named(self, name: str) -> list[dict]:
        return [e for e in self.events if e["event"] == name]


def run_trainer(run_dir: Path, *, faults=(), revive_after=None, dataset=None, **overrides) -> Run:
    from elxpk_contract.faults import FaultSchedule
    from trainer.elastic.loop import train

    cfg = tiny_config(run_dir, **overrides)
    result = train(cfg, faults=FaultSchedule.parse(faults, revive_after=revive_after), dataset=dataset)
    return load_run(cfg, result, run_dir)


def load_run(cfg, result, run_dir: Path) -> Run:
    run_dir = Path(run_dir)
    return Run(cfg, result, run_dir, read_jsonl(run_dir / "metrics.jsonl"), read_jsonl(run_dir / "events.jsonl"))


@pytest.fixture(scope="session")
def reference_run(tmp_path_factory) -> Run:
    """An uninterrupted run: the trajectory every other run is compared with."""
    return run_trainer(tmp_path_factory.mktemp("reference"))


@pytest.fixture(scope="session")
def pause_resume_run(tmp_path_factory) -> Run:
    """Slice 1 dies before step KILL_STEP and is back 0.2 s later; the run waits for it, then resumes."""
    return run_trainer(tmp_path_factory.mktemp("pause"), faults=[f"1@{KILL_STEP}"], revive_after=0.2)


@pytest.fixture(scope="session")
def resize_run(tmp_path_factory) -> Run:
    """Slice 1 dies at step 6; the run continues on slice 0 alone, and scales up when 1 returns at 10."""
    return run_trainer(tmp_path_factory.mktemp("resize"), faults=[f"1@{RESIZE_KILL_STEP}+{RESIZE_REVIVE_STEP}"],
                       elastic_min_slice_count=1)


@pytest.fixture(scope="session")
def save_kill_run(tmp_path_factory) -> Run:
    """Slice 1 dies while the checkpoint of step 8 is being committed (written, not yet renamed)."""
    return run_trainer(tmp_path_factory.mktemp("savekill"), faults=["1@save:8"], revive_after=0.2)
