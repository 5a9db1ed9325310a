"""Where the trainer's time went, as running totals: what `elxpk report` computes from the run directory,
kept while the records are written, so the progress record (trainer/elastic/progress.py) can carry them
to `workload status`, which cannot read the run directory of a pod.

It watches the records the RunRecorder writes (its observer) and sums, as elxpk/runs/report.py does:
productive (the step time of each step's last execution) and rewound (executions a rewind made void),
restore (restore_started -> restore_done), waiting (failure_detected -> slices_ready), compile
(restore_done's compile_s) and checkpoint (checkpoint_saved's blocking_s).

A restarted process carries the previous process's totals over (`carry`); a step it executes again
below the steps the previous one had done is counted as rewound: the voided execution was the earlier
one, of about the same length, whose time is already in the carried productive total.
"""

from __future__ import annotations

import math
from array import array
from typing import Any

from elxpk_contract.progress_record import BADPUT_KEYS as KEYS


class BadputMeter:
    def __init__(self) -> None:
        self._base = dict.fromkeys(KEYS, 0.0)
        self._base_steps = 0  # steps the carried totals already hold as productive
        self._last = array("d")  # by step: the step time of its latest execution in this process (nan: none)
        self._executed = 0.0
        self._productive = 0.0
        self._restore = self._waiting = self._compile = self._checkpoint = 0.0
        self._restore_at: float | None = None
        self._failed_at: float | None = None
        # The billed interval's ends as the run records hold them (elxpk/chip_hours.py billed_s): the first
        # run_started (carried from the previous process) and the newest event's time.
        self.started_at: float | None = None
        self.last_record_at: float | None = None

    def carry(self, totals: dict[str, float], steps_done: int, started_at: float | None = None,
              last_record_at: float | None = None) -> None:
        """The previous process's totals (its progress record), the steps it had done, and its billed ends."""
        self._base = {k: float(totals.get(k, 0.0)) for k in KEYS}
        self._base_steps = max(0, steps_done)
        self.started_at = None if started_at is None else float(started_at)
        self.last_record_at = None if last_record_at is None else float(last_record_at)

    def observe(self, kind: str, record: dict[str, Any]) -> None:
        """One record as the RunRecorder wrote it (kind "metric" or "event")."""
        if kind == "metric":
            self._step(int(record["step"]), float(record["step_time_s"]))
            return
        name, at = record.get("event"), float(record.get("time") or 0.0)
        if name == "run_started" and self.started_at is None:
            self.started_at = at
        self.last_record_at = at if self.last_record_at is None else max(self.last_record_at, at)
        if name == "restore_started":
            self._restore_at = at
        elif name == "restore_done":
            if self._restore_at is not None:
                self._restore += max(0.0, at - self._restore_at)
                self._restore_at = None
            self._compile += float(record.get("compile_s") or 0.0)
        elif name == "failure_detected":
            self._failed_at = at
        elif name == "slices_ready" and self._failed_at is not None:
            self._waiting += max(0.0, at - self._failed_at)
            self._failed_at = None
        elif name == "checkpoint_saved":
            self._checkpoint += float(record.get("blocking_s") or 0.0)

    def _step(self, step: int, seconds: float) -> None:
        self._executed += seconds
        if step < self._base_steps:  # redone after a restart: the earlier execution was the voided one
            return
        if step >= len(self._last):
            self._last.extend([math.nan] * (step + 1 - len(self._last)))
        previous = self._last[step]
        if not math.isnan(previous):
            self._productive -= previous
        self._last[step] = seconds
        self._productive += seconds

    def totals(self) -> dict[str, float]:
        here = {"productive": self._productive, "rewound": self._executed - self._productive,
                "restore": self._restore, "waiting": self._waiting, "compile": self._compile,
                "checkpoint": self._checkpoint}
        return {k: self._base[k] + here[k] for k in KEYS}
