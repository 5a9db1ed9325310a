"""A writer of MaxText metrics files for compare/report tests, line for line as MaxText 0.2.5 writes them
(`maxtext/common/metric_logger.py`, `write_metrics_locally`: every scalar as a float, `step` as a float, and
`run_name`, one JSON line per train step; truncated at step 0, appended otherwise, so the steps redone
after a restore appear twice).

Losses come from `tests.support.run_writer.loss_at`, the bundled trainer fake's loss, so a MaxText file and
a fake run directory on the same data hold the same float32 losses. Everything follows from the fields.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from tests.support import run_writer
from tests.support.run_writer import loss_at


@dataclass(frozen=True)
class MaxTextRun:
    steps: int = 40
    batch: int = 8  # as FakeRun: step s reads examples from s * batch
    run_name: str = "qwen"
    compile_time: float = 30.0  # MaxText's first step time includes the compilation
    step_time: float = 0.5
    restores: tuple[tuple[int, int], ...] = ()  # (step reached, checkpoint step restored): steps redone
    loss_scale: float = 1.0
    non_finite: tuple[tuple[int, float], ...] = ()  # (step, nan or inf): a blow-up from that step on
    eval_every: int = 0  # an eval line (eval/* keys only) after every this many steps; 0: none

    def loss(self, step: int) -> float:
        for at, value in self.non_finite:
            if step >= at:
                return value
        return float(loss_at(step, step * self.batch, self.loss_scale))

    def time(self, step: int) -> float:
        return self.compile_time if step == 0 else self.step_time + 0.01 * (step % 3)


def maxtext_line(step: int, loss: float, run_name: str, step_time: float) -> str:
    record = {"learning/loss": float(loss), "learning/current_learning_rate": 1e-4, "learning/grad_norm": 1.5,
              "perf/step_time_seconds": float(step_time), "perf/per_device_tflops": 12.0}
    record["step"] = float(step)
    record["run_name"] = run_name
    return json.dumps(record) + "\n"  # json.dumps writes NaN and Infinity, as MaxText's file has them


def executed_steps(run: MaxTextRun) -> list[int]:
    """The steps in the order MaxText ran them: after each restore it redoes the steps since the checkpoint."""
    return run_writer.executed_steps(run.steps, run.restores)


def write_maxtext_metrics(path: Path, run: MaxTextRun) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = []
    for step in executed_steps(run):
        lines.append(maxtext_line(step, run.loss(step), run.run_name, run.time(step)))
        if run.eval_every and (step + 1) % run.eval_every == 0:
            lines.append(json.dumps({"eval/avg_loss": 2.5, "step": float(step), "run_name": run.run_name}) + "\n")
    path.write_text("".join(lines), encoding="utf-8")
    return path
