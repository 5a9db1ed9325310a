"""Helpers of the planner tests: run `elxpk plan` in-process, write a small run directory."""

from __future__ import annotations

import json
from pathlib import Path

from elxpk.cli.main import main
from elxpk_contract.records import Metric, make_event
from tests.support.run_writer import run_info

# The example invocation.
EXAMPLE = [
    "--num-slices", "32", "--slice-mtbf", "30d", "--step-time", "2.5s", "--checkpoint-save-time", "20s",
    "--checkpoint-size", "120GiB", "--restore", "90s", "--slice-replacement-time", "100s",
    "--price-per-gib-month", "0.02", "--max-to-keep", "5",
]


def example_with(extra: list[str]) -> list[str]:
    """EXAMPLE with the flags of `extra` (FLAG VALUE pairs) replaced by theirs: elxpk refuses a flag twice."""
    given = set(extra[::2])
    pairs = [EXAMPLE[i:i + 2] for i in range(0, len(EXAMPLE), 2)]
    return [token for pair in pairs if pair[0] not in given for token in pair] + extra


def run_plan(argv: list[str], capsys) -> tuple[int, str, str]:
    """`elxpk plan ARGV` through the real entry point, in process: (exit code, stdout, stderr)."""
    capsys.readouterr()
    code = main(["plan", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def write_run(
    path: Path,
    *,
    t0: float = 1_700_000_000.0,
    step_time: float = 0.5,
    compile_extra: float = 2.5,
    steps: int = 40,
    period: int = 10,
    blocking: tuple[float, ...] = (0.2, 0.3, 0.25, 0.2),
    with_blocking_field: bool = True,
    failure_at: int | None = 25,
    wait: float = 5.0,
    restore: float = 1.2,
    config: dict | None = None,
    checkpoint_bytes: dict[int, int] | None = None,
) -> dict:
    """A run directory written through the typed records, with a simulated clock; returns its true costs."""
    path.mkdir(parents=True, exist_ok=True)
    metrics, events = [], []
    t = t0
    saves = iter(blocking)
    recovering = 0.0

    def event(name: str, step: int, **details) -> None:
        events.append(make_event(name, t, step, **details).to_json())

    event("run_started", 0)
    # trainer/elastic/attempt.py: a cold "restore" of nothing, then the compile, ahead of the first step.
    event("restore_started", 0)
    t += 0.05
    event("restore_done", 0, from_checkpoint=False, compile_needed=True, compile_s=compile_extra)
    t += compile_extra
    step = 0
    failed = False
    while step < steps:
        if failure_at is not None and step == failure_at and not failed:
            failed = True
            restored = (step // period) * period
            event("failure_detected", step, slices_lost=[1])
            t += wait
            event("slices_ready", step)
            event("restore_started", restored)
            t += restore
            event("restore_done", restored, from_checkpoint=True, compile_s=0.0)
            recovering += wait + restore
            step = restored
        t += step_time
        metrics.append(Metric(step=step, loss=1.0.hex(), lr=1e-3, step_time_s=step_time, examples=(step * 8, step * 8 + 8),
                              slices=(0, 1), time=t).to_json())
        step += 1
        if step % period == 0:
            b = next(saves, blocking[-1])
            t += b
            event("checkpoint_saved", step, **({"blocking_s": b} if with_blocking_field else {}))
            event("checkpoint_committed", step)
    event("run_finished", step)
    (path / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in metrics))
    (path / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    cfg = {"num_slices": 2, "checkpoint_period": period, "max_to_keep": 3, "slice_backend": "multi-controller"}
    cfg.update(config or {})
    (path / "run.json").write_text(json.dumps(run_info(cfg).to_json()))
    for ckpt_step, size in (checkpoint_bytes or {}).items():
        d = path / "checkpoints" / str(ckpt_step) / "state"
        d.mkdir(parents=True, exist_ok=True)
        (d / "data.bin").write_bytes(b"\0" * size)
    saved = [e for e in events if e["event"] == "checkpoint_saved"]
    return {
        "wall": t - t0,
        "startup": 0.05 + compile_extra,  # the cold restore of nothing and the first compile
        "step_times": [m["step_time_s"] for m in metrics],
        "recovering": recovering,
        "saves": len(saved),
        "blocking": [e.get("blocking_s") for e in saved],
    }
