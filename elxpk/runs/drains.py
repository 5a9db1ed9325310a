"""The run's stops on SIGTERM (drains), as the trainer recorded them: where each stopped, who heard the
signal, whether the group saved the stop step on the way out, and the steps its restart rewinds.

Read from `preempted` (the writer heard the signal) and `failure_detected` of kind `peer_preempted` (it
stopped with its group at a peer's signal): trainer/elastic/drain.py writes the same fields into both.
A record written before the drain fields (no `drain_steps_lost`) is left out: it cannot say what it lost.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from elxpk.runs.words import plural
from elxpk_contract.event_records import Event, FailureDetected, Preempted


@dataclass(frozen=True)
class Drain:
    step: int  # the step the group stopped at
    heard_by: int | None  # the process that heard the signal
    saved: bool
    steps_lost: int
    save_skipped: str  # why it did not save ("" when it did)

    def describe(self) -> str:
        who = "" if self.heard_by is None else f" (process {self.heard_by} heard SIGTERM)"
        done = "saved on the way out" if self.saved else f"not saved: {self.save_skipped}"
        return f"stopped at step {self.step}{who}: {done}; {plural(self.steps_lost, 'step')} lost"

    def to_dict(self) -> dict:
        return {"step": self.step, "heard_by": self.heard_by, "saved": self.saved,
                "drain_steps_lost": self.steps_lost, "save_skipped": self.save_skipped}


def drains(events: Sequence[Event]) -> list[Drain]:
    found = []
    for e in events:
        if not (isinstance(e, Preempted) or (isinstance(e, FailureDetected) and e.kind == "peer_preempted")):
            continue
        if e.step is not None and e.saved is not None and e.drain_steps_lost is not None:
            found.append(Drain(e.step, e.heard_by, e.saved, e.drain_steps_lost, e.save_skipped))
    return found
