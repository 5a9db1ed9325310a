"""A process's start-up timeline: each phase from the process's start to its first step, written once as a
`startup` event (elxpk_contract.event_records.STARTUP_PHASES), so a restart's seconds are told apart: the
imports, opening the devices, joining the slices, the restore, making the step's executable (and how), and
the first step.

The process's start is the kernel's: /proc/self/stat's starttime (clock ticks after boot) set against
/proc/uptime, read once, at this module's import. It counts what no Python clock can, the interpreter's
own start and the imports before `python -m trainer` runs a line (on a TPU host, seconds). Where /proc is
not there, the time of this module's import stands in (early: `python -m trainer` imports it at once).
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

from elxpk_contract.event_records import STARTUP_PHASES

if TYPE_CHECKING:
    from collections.abc import Callable

    from trainer.clock import Clock
    from trainer.metrics import RunRecorder

_IMPORTED_AT = time.time()


def _kernel_start(now: float) -> float | None:
    """The unix time the kernel started this process, or None where /proc does not say."""
    try:
        with open("/proc/self/stat", encoding="ascii") as stat, open("/proc/uptime", encoding="ascii") as up:
            # Field 22 (starttime); the command name (field 2) may hold spaces, so count after its ")".
            ticks = int(stat.read().rsplit(")", 1)[1].split()[19])
            uptime = float(up.read().split()[0])
        return now - (uptime - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return None


PROCESS_START = _kernel_start(_IMPORTED_AT) or _IMPORTED_AT


class StartupTimeline:
    """The phases of one process's start, each recorded once (a later attempt in the same process is a
    recovery, told by its own events). Phases seen before the recorder exists are held until `attach`."""

    def __init__(self, clock: Clock, process_start: float) -> None:
        self._clock, self._start, self._process = clock, process_start, 0
        self._seen: set[str] = set()
        self._held: list[tuple[str, int | None, float, dict[str, Any]]] = []
        self._recorder: RunRecorder | None = None
        self._publish: Callable[[dict[str, float], str, float], None] | None = None
        self.phases: dict[str, float] = {}  # phase -> seconds from the process's start
        self.how = ""  # executable_ready's how

    def mark(self, phase: str, step: int | None = None, *, at: float | None = None, **details: Any) -> None:
        """`phase` ended now (or at unix time `at`); `details`: the event's own fields (how)."""
        assert phase in STARTUP_PHASES, phase
        if phase in self._seen:
            return
        self._seen.add(phase)
        when = self._clock.time() if at is None else at
        self.phases[phase] = round(max(0.0, when - self._start), 6)
        self.how = details.get("how", self.how)
        self._held.append((phase, step, when, details))
        self._write()

    def attach(self, recorder: RunRecorder, process: int,
               publish: Callable[[dict[str, float], str, float], None] | None = None) -> None:
        """Write the held phases and every later one to `recorder`, as jax process `process`'s, and hand
        the phases so far, how the step was made and the process's start to `publish` at each (the progress
        record's ProgressWriter.startup: `status` reads them)."""
        self._recorder, self._process, self._publish = recorder, process, publish
        self._write()

    def _write(self) -> None:
        if self._recorder is None:
            return
        held, self._held = self._held, []
        if self._publish is not None:
            self._publish(self.phases, self.how, self._start)
        for phase, step, when, details in held:
            self._recorder.event("startup", step, at=when, phase=phase, since_start_s=self.phases[phase],
                                 process=self._process, **details)
