"""Measured costs from a run directory (contracts.md format): step, save, restore and more.

Every figure is a median over the run's samples, so one slow first step or one slow save does not set
the plan. Nothing here imports jax: a run directory is plain JSON lines plus checkpoint folders.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from elxpk.errors import UsageError

# Detail fields a `checkpoint_saved` event may carry for the time the save blocked training
# (the same set `elxpk report` reads).
BLOCKING_KEYS = ("blocking_s", "block_s", "duration_s", "save_s")


@dataclass(frozen=True)
class Calibration:
    run_dir: str | None
    step_time_s: float | None = None
    save_s: float | None = None
    save_method: str = ""
    restore_s: float | None = None
    replacement_s: float | None = None
    compile_s: float | None = None
    checkpoint_size_bytes: float | None = None
    num_slices: int | None = None
    checkpoint_period: int | None = None
    max_to_keep: int | None = None
    steps_sampled: int = 0
    saves_sampled: int = 0
    restores_sampled: int = 0
    notes: tuple[str, ...] = ()

    @classmethod
    def empty(cls) -> Calibration:
        return cls(run_dir=None)

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def _median(values: list[float]) -> float:
    # Not statistics.median: importing statistics pulls in random, decimal and fractions (CLI start-up).
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def _read_jsonl(path: Path) -> list[dict]:
    from elxpk.runs.jsonl import read_jsonl  # the shared reader: survives a torn last line

    return list(read_jsonl(path).records)


def _num(record: dict, key: str) -> float | None:
    value = record.get(key)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _pairs(events: list[dict], start: str, end: str) -> list[tuple[float, dict]]:
    """(duration, end event) from each `start` event to the next `end` event."""
    out, began = [], None
    for e in events:
        t = _num(e, "time")
        if e.get("event") == start and t is not None:
            began = t
        elif e.get("event") == end and began is not None and t is not None:
            out.append((t - began, e))
            began = None
    return out


def _compile_s(events: list[dict], step_times: list[float], median_step: float | None) -> float | None:
    """Compile time of a cold start: the trainer reports it on restore_done (it compiles ahead of the
    first step); otherwise the first step's excess over the median step."""
    reported = [c for c in (_num(e, "compile_s") for e in events if e.get("event") == "restore_done") if c]
    if reported:
        return _median(reported)
    if step_times and median_step is not None:
        return max(0.0, step_times[0] - median_step)
    return None


def _config(run_dir: Path) -> dict:
    try:
        data = json.loads((run_dir / "run.json").read_text())
    except (OSError, ValueError):
        return {}
    if isinstance(data, dict) and isinstance(data.get("config"), dict):
        return data["config"]
    return data if isinstance(data, dict) else {}


def _newest_checkpoint_bytes(ckpt_dir: Path) -> float | None:
    """Bytes of the newest numbered step directory (orbax layout: one directory per step)."""
    if not ckpt_dir.is_dir():
        return None
    steps = [p for p in ckpt_dir.iterdir() if p.is_dir() and p.name.isdigit()]
    if not steps:
        return None
    newest = max(steps, key=lambda p: int(p.name))
    return float(sum(f.stat().st_size for f in newest.rglob("*") if f.is_file()))


def _int(config: dict, key: str) -> int | None:
    value = config.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def calibrate(run_dir: Path) -> Calibration:
    """Read `run_dir`; raise UsageError naming --from-run when it is not a usable run directory."""
    if not run_dir.is_dir():
        raise UsageError(f"--from-run: {str(run_dir)!r} is not a directory; give a run directory")
    metrics = _read_jsonl(run_dir / "metrics.jsonl")
    events = _read_jsonl(run_dir / "events.jsonl")
    if not metrics:
        raise UsageError(
            f"--from-run: {str(run_dir)!r} has no step records in metrics.jsonl; give the directory of a run "
            "that trained at least one step"
        )
    config = _config(run_dir)
    notes: list[str] = []

    times = [t for t in (_num(r, "step_time_s") for r in metrics) if t is not None and t > 0]
    step_time = _median(times) if times else None
    compile_s = _compile_s(events, times, step_time)

    saves = [e for e in events if e.get("event") == "checkpoint_saved"]
    blocking = [b for b in (next((_num(e, k) for k in BLOCKING_KEYS if _num(e, k) is not None), None)
                            for e in saves) if b is not None]
    save_s, save_method = None, ""
    if blocking:
        save_s, save_method = _median(blocking), "median blocking time of checkpoint_saved events"
    elif saves and times:
        save_s = _unexplained_wall_per_save(events, times, len(saves))
        save_method = "wall time not spent in steps or recoveries, per save (an upper bound)"
        if save_s is not None:
            notes.append("the run's checkpoint_saved events carry no blocking time; the save cost is estimated")

    # A cold start with nothing to restore also logs restore_started/restore_done (from_checkpoint false).
    restores = [d for d, done in _pairs(events, "restore_started", "restore_done")
                if d >= 0 and done.get("from_checkpoint") is not False]
    replacement = None
    waits = [d for d, _ in _pairs(events, "failure_detected", "slices_ready") if d >= 0]
    if waits:
        if config.get("slice_backend") == "simulated":
            notes.append("replacement time not taken from a run with simulated slices; give --replacement")
        else:
            replacement = _median(waits)

    # run.json records the checkpoint directory as the run saw it; a copied run keeps it beside itself.
    size = None
    for ckpt_dir in (config.get("checkpoint_dir"), "checkpoints"):
        if isinstance(ckpt_dir, str) and size is None:
            size = _newest_checkpoint_bytes(run_dir / ckpt_dir)  # an absolute path replaces run_dir

    return Calibration(
        run_dir=str(run_dir),
        step_time_s=step_time,
        save_s=save_s,
        save_method=save_method,
        restore_s=_median(restores) if restores else None,
        replacement_s=replacement,
        compile_s=compile_s,
        checkpoint_size_bytes=size,
        num_slices=_int(config, "num_slices"),
        checkpoint_period=_int(config, "checkpoint_period"),
        max_to_keep=_int(config, "max_to_keep"),
        steps_sampled=len(times),
        saves_sampled=len(blocking) or len(saves),
        restores_sampled=len(restores),
        notes=tuple(notes),
    )


def _unexplained_wall_per_save(events: list[dict], step_times: list[float], n_saves: int) -> float | None:
    start = next((_num(e, "time") for e in events if e.get("event") == "run_started"), None)
    end = next((_num(e, "time") for e in reversed(events) if e.get("event") == "run_finished"), None)
    if start is None or end is None or end <= start:
        return None
    recovering = sum(d for d, _ in _pairs(events, "failure_detected", "restore_done"))
    unexplained = (end - start) - sum(step_times) - recovering
    return max(unexplained, 0.0) / n_saves if unexplained > 0 else None
