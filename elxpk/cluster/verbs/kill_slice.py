"""`workload kill-slice`: one force-delete of a given slice (or VM), watched to recovery on request, or the
rounds of a soak test (elxpk/cluster/verbs/soak.py: evict/exit modes, --slice random, --repeat).

The command line is read by elxpk/cluster/verbs/verb_flags.py (typed values, every problem before any I/O); this
module does the kill. What it says goes through `out` (stdout: the results) and `tick` (stderr: progress);
the confirmation is the caller's (`confirm(question)` returns, or ends the command), so nothing here reads
a terminal. Clock, sleep and the random source are injected.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from elxpk.cluster.api.kube import Kube
from elxpk.cluster.verbs.ops import kill, plan_kill
from elxpk.cluster.verbs.soak import inject, round_line, slice_count, soak, summary_lines
from elxpk.cluster.verbs.trainer_recovery import watch_recovery
from elxpk.cluster.verbs.verb_flags import RANDOM_SLICE, is_soak
from elxpk.units import format_clock, format_duration

# What each mode did to the pods, as one round's line says it.
_DONE = {"delete": "force-deleted", "evict": "evicted", "exit": "sent signal {signal}"}


@dataclass(frozen=True)
class KillRequest:
    """kill-slice's typed flags (elxpk/cluster/verbs/verb_flags.py KILL_SLICE)."""

    name: str
    slice_index: int | None  # None: --slice random, a new draw each round
    vm: int | None
    mode: str
    exit_code: int
    repeat: int
    every_s: float
    seed: int | None
    watch: bool
    timeout_s: float
    poll_s: float

    @property
    def slice_spec(self) -> str:
        return RANDOM_SLICE if self.slice_index is None else str(self.slice_index)

    @property
    def soak(self) -> bool:
        """Rounds (soak.py) rather than one force-delete of a given slice (with --vm, one VM of it)."""
        return is_soak(self.repeat, self.mode, self.slice_index is None)


@dataclass(frozen=True)
class Io:
    """Where kill-slice speaks and asks: `out` the results, `tick` progress, `confirm` before any kill."""

    out: Callable[[str], None]
    tick: Callable[[str], None]
    confirm: Callable[[str], None]
    clock: Callable[[], float]
    sleep: Callable[[float], None]


def run(kube: Kube, namespace: str, request: KillRequest, io: Io) -> bool:
    """Kill as requested; False when a soak round did not recover (the command exits 1)."""
    if request.soak:
        return _soak(kube, namespace, request, io)
    _once(kube, namespace, request, io)
    return True


def _once(kube: Kube, namespace: str, request: KillRequest, io: Io) -> None:
    """Force-delete the pods of slice K (or VM I of it); with --watch, time its recovery."""
    name, index = request.name, int(request.slice_spec)
    plan = plan_kill(kube, namespace, name, index, request.vm)
    what = f"slice {index}" + (f" vm {request.vm}" if request.vm is not None else "")
    io.confirm(f"force-delete {len(plan.pods)} pods of {what} of {name} ({', '.join(plan.pods)})?")
    killed_at = io.clock()
    kill(kube, namespace, plan)
    io.out(f"killed {what} of {name}: {len(plan.pods)} pods force-deleted")
    if not request.watch:
        return
    recovery = watch_recovery(kube, namespace, name, plan, killed_at=killed_at, clock=io.clock, sleep=io.sleep,
                              timeout_s=request.timeout_s, poll_s=request.poll_s,
                              on_tick=lambda text: io.tick(f"{name}: {text}"))
    io.out(f"{what}'s pods running and ready again after {format_duration(recovery.slice_back_s)}")
    if recovery.next_step_s is not None:  # the recovery: training again, not pods ready
        step = "" if recovery.next_step is None else f" (step {recovery.next_step} done)"
        # its clock time as well: the figure the trainer's records, the alerts and `report` give of the same step
        io.out(f"recovered: the trainer's next step {format_duration(recovery.next_step_s)} after the kill{step}, "
               f"at {format_clock(killed_at + recovery.next_step_s)}, from {recovery.source}")
        if recovery.startup:  # where the new process's seconds went, from its own start (trainer/startup.py)
            io.out(f"  the new process's start: {recovery.startup}")
        # the rewind as the trainer recorded its stop, never an estimate from the checkpoint's step
        io.out("  rewound: " + ("unknown (the trainer recorded no stop with its rewind)" if recovery.steps_lost is None
                                else f"{recovery.steps_lost} steps, as the trainer recorded its stop"))
    else:
        io.out(f"the trainer's next step after the kill was not seen ({recovery.source}), within "
               f"{format_duration(request.timeout_s)}")


def _soak(kube: Kube, namespace: str, request: KillRequest, io: Io) -> bool:
    """Evict/exit modes, --slice random and --repeat: rounds watched to recovery when repeated or --watch."""
    r = request
    how = {"delete": "force-delete", "evict": "evict", "exit": f"make exit with {r.exit_code}"}[r.mode]
    rounds = f"{r.repeat} times, every {format_duration(r.every_s)}" if r.repeat > 1 else "once"
    io.confirm(f"{how} the pods of slice {r.slice_spec} of {r.name} in namespace {namespace}, {rounds}?")
    rng = random.Random(r.seed)
    if r.repeat == 1 and not r.watch:
        index = rng.randrange(slice_count(kube, namespace, r.name)) if r.slice_index is None else r.slice_index
        plan = plan_kill(kube, namespace, r.name, index, None)
        inject(kube, namespace, plan, r.mode, r.exit_code)
        io.out(f"slice {index} of {r.name}: {len(plan.pods)} pods {_DONE[r.mode].format(signal=r.exit_code - 128)}")
        return True

    def show(done) -> None:
        io.out(round_line(done, r.repeat))

    summary = soak(kube, namespace, r.name, slice_spec=r.slice_spec, mode=r.mode, repeat=r.repeat,
                   every_s=r.every_s, exit_code=r.exit_code, rng=rng, clock=io.clock, sleep=io.sleep,
                   timeout_s=r.timeout_s, poll_s=r.poll_s, on_tick=lambda text: io.tick(f"{r.name}: {text}"),
                   on_round=show)
    for line in summary_lines(summary):
        io.out(line)
    return summary.succeeded == len(summary.rounds)
