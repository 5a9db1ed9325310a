"""One timeline per recovery: failure detected -> slices ready -> restored -> first new step.

Built from events.jsonl alone, so the same code reads in-process recoveries (pause-resume, resize) and
multi-controller group restarts (where the supervisor writes the detection and the restarted trainer the rest).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

_SLICE_IN_TEXT = re.compile(r"\bslice (\d+)\b")
_PHASES = ("slices_ready", "restore_started", "restore_done", "first_step_after_recovery")


def lost_slices(event: dict) -> tuple[int, ...]:
    """The slices an event names as lost: `slices_lost` as the trainer and the supervisor write it, older
    names, and, for runs written before the field existed, the slice named in the error text."""
    for key in ("slices_lost", "lost_slices", "slices", "slice"):
        value = event.get(key)
        if isinstance(value, int):
            return (value,)
        if isinstance(value, (list, tuple)) and all(isinstance(v, int) for v in value):
            return tuple(value)
    for key in ("error", "detail"):  # e.g. "DATA_LOSS: simulated loss of slice 1 at step 120"
        if isinstance(event.get(key), str):
            found = _SLICE_IN_TEXT.findall(event[key])
            if found:
                return tuple(sorted({int(s) for s in found}))
    return ()


def restored_step(event: dict) -> int | None:
    for key in ("restored_step", "checkpoint_step", "step"):
        if isinstance(event.get(key), int):
            return event[key]
    return None


@dataclass(frozen=True)
class Recovery:
    failure_step: int | None
    lost: tuple[int, ...]
    detected_at: float  # unix seconds
    slices_ready_s: float | None  # offsets from detection, seconds
    restore_started_s: float | None
    restored_s: float | None
    first_step_s: float | None
    restored_step: int | None
    first_step: int | None
    caught_up_s: float | None = None  # when the step after the failed one ended (metric time, or estimated)

    @property
    def complete(self) -> bool:
        return self.first_step_s is not None

    @property
    def restore_s(self) -> float | None:
        if self.restored_s is None or self.restore_started_s is None:
            return None
        return self.restored_s - self.restore_started_s

    @property
    def rewound_steps(self) -> int | None:
        if self.failure_step is None or self.restored_step is None:
            return None
        return max(0, self.failure_step - self.restored_step)

    def to_dict(self) -> dict:
        return {
            "failure_step": self.failure_step,
            "lost_slices": list(self.lost),
            "detected_at": self.detected_at,
            "slices_ready_s": self.slices_ready_s,
            "restore_started_s": self.restore_started_s,
            "restored_s": self.restored_s,
            "first_step_s": self.first_step_s,
            "restore_s": self.restore_s,
            "restored_step": self.restored_step,
            "first_step": self.first_step,
            "rewound_steps": self.rewound_steps,
            "caught_up_s": self.caught_up_s,
        }

    def describe(self) -> str:
        """One line, e.g. 'slice 1 lost at step 120; restored step 100 in 0.4 s; step 100 reached 2.1 s ...'."""
        who = "slice " + ",".join(map(str, self.lost)) if self.lost else "a slice"
        parts = [f"{who} lost at step {self.failure_step if self.failure_step is not None else '?'}"]
        if self.restored_step is not None:
            took = f" in {self.restore_s:.1f} s" if self.restore_s is not None else ""
            parts.append(f"restored step {self.restored_step}{took}")
        if self.first_step_s is not None:
            step = self.first_step if self.first_step is not None else "?"
            parts.append(f"step {step} reached {self.first_step_s:.1f} s after the failure")
            if self.caught_up_s is not None and self.failure_step is not None and self.rewound_steps:
                parts.append(f"step {self.failure_step + 1} after {self.caught_up_s:.1f} s")
        else:
            parts.append("not recovered")
        return "; ".join(parts)


def _time(event: dict) -> float | None:
    value = event.get("time")
    return float(value) if isinstance(value, (int, float)) else None


def recoveries(events: tuple[dict, ...] | list[dict]) -> list[Recovery]:
    """Pair each failure_detected with the first of each later phase before the next failure."""
    found: list[Recovery] = []
    # By time, not file order: a supervisor writes its events once the group it watched is down.
    timed = sorted((e for e in events if _time(e) is not None), key=_time)
    starts = [i for i, e in enumerate(timed) if e.get("event") == "failure_detected"]
    for n, i in enumerate(starts):
        detect = timed[i]
        t0 = _time(detect)
        end = starts[n + 1] if n + 1 < len(starts) else len(timed)
        first: dict[str, dict] = {}
        for e in timed[i + 1 : end]:
            name = e.get("event")
            if name in _PHASES and name not in first:
                first[name] = e
            if name == "first_step_after_recovery":
                break

        def offset(name: str, first: dict[str, dict] = first, t0: float = t0) -> float | None:
            return _time(first[name]) - t0 if name in first else None

        done = first.get("restore_done", {})
        step_event = first.get("first_step_after_recovery", {})
        found.append(
            Recovery(
                failure_step=detect.get("step") if isinstance(detect.get("step"), int) else None,
                lost=lost_slices(detect),
                detected_at=t0,
                slices_ready_s=offset("slices_ready"),
                restore_started_s=offset("restore_started"),
                restored_s=offset("restore_done"),
                first_step_s=offset("first_step_after_recovery"),
                restored_step=restored_step(done) if done else None,
                first_step=step_event.get("step") if isinstance(step_event.get("step"), int) else None,
            )
        )
    return found


def with_catch_up(found: list[Recovery], metrics: tuple[dict, ...]) -> list[Recovery]:
    """Add when each recovery regained its lost progress: when the step after the failed one ended.

    Metrics records carry their end `time`; for runs written before they did, it is estimated as the first
    new step's time plus the step times of the re-executed steps.
    """
    out, start = [], 0
    for rec in found:
        if rec.first_step_s is None or rec.first_step is None or rec.failure_step is None:
            out.append(rec)
            continue
        # The recovery's first record: its first step, executed again after a rewind.
        i = next((k for k in range(start, len(metrics)) if metrics[k].get("step") == rec.first_step
                  and k > 0 and isinstance(metrics[k - 1].get("step"), int)
                  and metrics[k - 1]["step"] >= rec.first_step), None)
        if i is None:
            out.append(rec)
            continue
        elapsed, caught = rec.first_step_s, None
        for k in range(i, len(metrics)):
            step = metrics[k].get("step")
            if k > i:
                elapsed += float(metrics[k].get("step_time_s") or 0.0)
            if isinstance(step, int) and step > rec.failure_step:
                ended = _time(metrics[k])
                caught = ended - rec.detected_at if ended is not None else elapsed
                start = k
                break
        out.append(replace(rec, caught_up_s=caught))
    return out
