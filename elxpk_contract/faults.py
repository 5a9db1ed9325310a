"""The fault schedule: which slice dies, where, and when it comes back.

Grammar of one spec (`--fault`, repeatable; `FaultSchedule.parse`):

    K@S            kill slice K when step S (0-based) is about to run
    K@mid:S        kill slice K while step S runs: the step has been dispatched (its input state handed
                   to it, and donated where the step donates) and the loss surfaces when the loop
                   waits for its result, as a real slice loss does
    K@data:S       kill slice K inside the data loader, while it produces the batch of step S
    K@save:S       kill slice K while the first checkpoint at or after step S is being committed:
                   its data are written but the commit (the rename of the tmp directory) never happens
    K@restore      kill slice K during the next restore of the state: from a checkpoint, or under live
                   recovery from the surviving slices (after another fault)
    K@hang:S       slice K stops making progress when step S is about to run, without raising: the step
                   blocks (interruptibly, in the simulated backend) until the stall watchdog
                   (`--stall-timeout-seconds`) notices, marks K lost, and the elastic loop recovers
    K@sick:S[+R]   kill slice K when step S is about to run (as K@S); when it comes back (+R or
                   `revive_after`, one of them is required) it fails the health check a returning slice
                   runs before it receives the state (trainer.elastic.slice_health): its matmul gives a wrong
                   result. It stays sick, so the run treats it as still lost and goes on without it
    ...@...+R      (suffix on any form) revive slice K when the run reaches step R; only useful when
                   the run can continue without K (resize mode, `--elastic-min-slice-count` below
                   the slice count): in pause-and-resume mode no step runs while K is down

A killed slice without +R comes back `revive_after` seconds after it died (`--revive-after`); with
neither, it stays down. An explicit +R wins over `revive_after`. A fault or revive step the run never
reaches (beyond --steps) is refused (`problems`). Each fault fires once; a spec given N times fires N
times, at N successive occurrences of its point (`1@5` three times: slice 1 dies each time step 5 is
about to run, a deterministic crash that a retry reproduces). The schedule is pure data: the simulated
slice backend (`trainer.elastic.slices`) keeps track of what has fired.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from elxpk_contract.setting_rules import said

POINTS = ("step", "mid", "data", "save", "restore", "hang", "sick")

_SPEC = re.compile(
    r"^(?P<slice>\d+)@(?:(?P<point>mid|data|save|restore|hang|sick)(?::(?P<pstep>\d+))?|(?P<step>\d+))"
    r"(?:\+(?P<revive>\d+))?$",
    re.ASCII,  # \d alone also matches other scripts' digits, which int() then reads
)


@dataclass(frozen=True)
class Fault:
    """One scheduled slice death."""

    slice: int
    point: str  # one of POINTS
    step: int | None  # None only for "restore"
    revive_at_step: int | None
    spec: str

    def strikes(self, point: str, step: int) -> bool:
        """Whether this fault fires at injection point `point` of step `step`: a save fault at the first
        commit at or after its step, a restore fault at the next restore, the others at their step.
        A hang and a sick slice strike at the "step" point of their step (a backend tells them from a kill
        by `point`)."""
        if self.point in ("hang", "sick"):
            return point == "step" and step == self.step
        if self.point != point:
            return False
        if self.step is None:  # restore
            return True
        return step >= self.step if point == "save" else step == self.step


@dataclass(frozen=True)
class FaultSchedule:
    """An ordered set of faults plus the default time a killed slice stays down."""

    faults: tuple[Fault, ...] = ()
    revive_after: float | None = None

    @classmethod
    def parse(cls, specs: Iterable[str], revive_after: float | None = None) -> FaultSchedule:
        """Parse `--fault` specs; raises ValueError naming every bad spec and the grammar."""
        faults, errors = [], []
        for raw in specs:
            spec = raw.strip()
            match = _SPEC.match(spec)
            if not match:
                errors.append(
                    f"{said('fault')} {raw!r}: expected K@STEP, K@mid:STEP, K@data:STEP, K@save:STEP, K@hang:STEP, "
                    "K@sick:STEP or K@restore, optionally with +REVIVE_STEP (e.g. 1@120, 1@mid:120, 1@save:100, "
                    "1@hang:60, 1@sick:60+80, 0@restore, 1@50+80)"
                )
                continue
            point = match["point"] or "step"
            step = match["step"] if point == "step" else match["pstep"]
            if point in ("mid", "data", "save", "hang", "sick") and step is None:
                errors.append(f"{said('fault')} {raw!r}: {point} needs a step, e.g. 1@{point}:100")
                continue
            if point == "restore" and step is not None:
                errors.append(f"{said('fault')} {raw!r}: restore takes no step; use 1@restore")
                continue
            revive = int(match["revive"]) if match["revive"] is not None else None
            at = int(step) if step is not None else None
            if revive is not None and at is not None and revive <= at:
                errors.append(f"{said('fault')} {raw!r}: the revive step {revive} must come after step {at}")
                continue
            faults.append(Fault(int(match["slice"]), point, at, revive, spec))
        if revive_after is not None and not revive_after >= 0:
            errors.append(f"{said('revive_after')} {revive_after!r}: must be a number of seconds >= 0")
        if errors:
            raise ValueError("\n".join(errors))
        return cls(tuple(faults), revive_after)

    def problems(self, num_slices: int, steps: int | None = None) -> list[str]:
        """Messages for faults that cannot apply to a run with `num_slices` slices and `steps` steps. One
        rule for every kind: a fault (or revive) step the run never reaches is refused, not ignored. Steps
        run 0..steps-1; saves are numbered by the steps done, the last one is `steps` itself."""
        found = []
        for f in self.faults:
            if f.point == "sick" and f.revive_at_step is None and self.revive_after is None:
                found.append(f"{said('fault')} {f.spec!r}: a sick slice is refused when it comes back, so it must come "
                             f"back: add a revive step, e.g. {f.spec}+{(f.step or 0) + 1}, or give {said('revive_after')}")
            if f.slice >= num_slices:
                found.append(f"{said('fault')} {f.spec!r}: slice {f.slice} does not exist (slices are 0..{num_slices - 1})")
            if steps is None:
                continue
            last = steps if f.point == "save" else steps - 1
            if f.step is not None and f.step > last:
                what = "no checkpoint is saved at or after step {} with" if f.point == "save" else \
                    "step {} is never reached with"
                found.append(f"{said('fault')} {f.spec!r}: {what.format(f.step)} {said('steps')} {steps}; use a step up to {last}")
            elif f.revive_at_step is not None and f.revive_at_step > steps - 1:
                found.append(f"{said('fault')} {f.spec!r}: the revive step {f.revive_at_step} is never reached with "
                             f"{said('steps')} {steps}; revive at a step up to {steps - 1}")
        return found

    def __bool__(self) -> bool:
        return bool(self.faults)
