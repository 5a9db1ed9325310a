"""`workload kill-slice --repeat N --every D`: a soak test of elastic recovery on one's own cluster.

Each round starts from a whole workload (every slice healthy: after a JobSet restart the round's own slice
is back before the others), takes a slice down in one of three ways, waits for it to run again, and times it:
- delete: force-delete its pods (grace period 0), as a lost VM or node looks to the Job controller;
- evict: the Eviction API (policy/v1), what a drain or a node upgrade does: PodDisruptionBudgets are
  honoured and the pods get a DisruptionTarget condition (a `podFailurePolicy` may then ignore them);
- exit: the trainer's container dies of a signal, through the API's exec (`kill -N 1` in the container):
  exit code 128+N as the Job sees it. A process can only be made to exit with a code it chooses
  itself, so the codes offered are the signal ones (129-159); PID 1 receives only the signals it
  handles (the trainer handles SIGTERM: it saves and exits with its preemption code, 77).

Each round is watched as `--mode delete --watch` watches its kill (elxpk/cluster/verbs/trainer_recovery.py):
the slice's pods back (new pods or restarted containers, running and ready), then the trainer's next step.
The summary: recoveries that succeeded out of N, recovery time p50/p95 (kill -> the trainer's next step, from
its own records; pods ready come before its imports, restore and compile, and are given apart), steps
rewound (what the trainer recorded at each stop, `drain_steps_lost`; unknown where it recorded none), and
the restart budgets consumed (JobSet restarts counted towards maxRestarts, Jobs' backoffLimit used, pod
restarts by cause). Clock, sleep and the random source are injected.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from elxpk.cluster.api.kube import Kube
from elxpk.cluster.objects.pods import Pod
from elxpk.cluster.records.progress import progress_of
from elxpk.cluster.records.status import WorkloadStatus, worker_replicated_job
from elxpk.cluster.verbs.observe import fetch_status, get_workload
from elxpk.cluster.verbs.ops import KillPlan, kill, plan_kill
from elxpk.cluster.verbs.trainer_recovery import watch_recovery
from elxpk.cluster.verbs.verb_flags import KILL_MODES
from elxpk.errors import ClusterError, NotFoundError, Timeout, UsageError
from elxpk.units import format_clock, format_duration

MODES = KILL_MODES  # declared once, with kill-slice's other flags


def exit_command(exit_code: int) -> list[str]:
    return ["/bin/sh", "-c", f"kill -{exit_code - 128} 1"]


@dataclass(frozen=True)
class Round:
    index: int
    slice: int
    mode: str
    pods: int
    recovered: bool
    recovery_s: float | None  # kill -> the trainer's next step (its records); None: not seen
    steps_rewound: int | None  # the trainer's recorded rewind of the stop (drain_steps_lost); None: not recorded
    error: str = ""
    pods_back_s: float | None = None  # kill -> every pod of the slice running and ready again
    source: str = ""  # where the trainer's next step was read, or why it was not
    stepped_at: float | None = None  # the unix time of the trainer's next step (recovery_s after the kill)


@dataclass
class SoakSummary:
    rounds: list[Round] = field(default_factory=list)
    restarts_counted: tuple[int, int] = (0, 0)  # JobSet restarts counted towards maxRestarts: before, after
    max_restarts: int = 0
    backoff_used: tuple[int, int] = (0, 0)  # sum over the current Jobs of failed pods + container restarts
    causes: dict[str, int] = field(default_factory=dict)  # pod restarts by cause now, minus before

    @property
    def succeeded(self) -> int:
        return sum(1 for r in self.rounds if r.recovered)

    def percentile(self, q: float, pods: bool = False) -> float | None:
        """The q-th nearest-rank percentile of the recoveries (the trainer's next step), or of pods ready."""
        times = sorted(t for t in ((r.pods_back_s if pods else r.recovery_s) for r in self.rounds) if t is not None)
        if not times:
            return None
        return times[max(math.ceil(q / 100 * len(times)) - 1, 0)]  # nearest rank

    @property
    def steps_rewound(self) -> int | None:
        known = [r.steps_rewound for r in self.rounds if r.steps_rewound is not None]
        return sum(known) if known else None

    @property
    def rewinds_unknown(self) -> int:
        """Rounds whose trainer recorded no rewind (no stop on SIGTERM seen in its record)."""
        return sum(1 for r in self.rounds if r.steps_rewound is None)

    def to_dict(self) -> dict:
        return {"rounds": [asdict(r) for r in self.rounds], "succeeded": self.succeeded, "total": len(self.rounds),
                "recovery_p50_s": self.percentile(50), "recovery_p95_s": self.percentile(95),
                "pods_back_p50_s": self.percentile(50, pods=True), "pods_back_p95_s": self.percentile(95, pods=True),
                "steps_rewound": self.steps_rewound, "restarts_counted": list(self.restarts_counted),
                "max_restarts": self.max_restarts, "backoff_used": list(self.backoff_used),
                "restart_causes": self.causes}


def _backoff_used(status: WorkloadStatus) -> int:
    return sum(s.budget_used for s in status.slices)


def slice_count(kube: Kube, namespace: str, name: str) -> int:
    worker = worker_replicated_job(get_workload(kube, namespace, name))
    if worker is None:
        raise ClusterError(f"workload {name} has no worker replicatedJob")
    return worker.replicas


def _restarts(pod: dict) -> int:
    return sum(c.restarts for c in Pod.of(pod).containers)


def inject(kube: Kube, namespace: str, plan: KillPlan, mode: str, exit_code: int) -> None:
    if mode == "delete":
        kill(kube, namespace, plan)
        return
    containers = {p.meta.name: p.container_names[0]
                  for p in map(Pod.of, kube.list_pods(namespace, plan.selector))} if mode == "exit" else {}
    for pod in plan.pods:
        try:
            if mode == "evict":
                kube.evict_pod(namespace, pod, uid=plan.uid_of(pod))
            elif pod in containers:
                out, code = kube.exec_in_pod(namespace, pod, containers[pod], exit_command(exit_code))
                if code:  # None: the connection ended with the container, as a kill of PID 1 may end it
                    raise ClusterError(f"exec in pod {pod} (container {containers[pod]}): "
                                       f"`{' '.join(exit_command(exit_code)[2:])}` exited {code}"
                                       + (f": {out.strip().splitlines()[-1]}" if out.strip() else "")
                                       + " (the image needs /bin/sh and kill; use --mode delete or evict)")
        except NotFoundError:
            pass  # gone already (the JobSet restarted the group): the slice is down, as intended


def wait_whole(kube: Kube, namespace: str, name: str, *, clock: Callable[[], float],
               sleep: Callable[[float], None], timeout_s: float, poll_s: float,
               on_tick: Callable[[str], None]) -> bool:
    """Wait until every slice is healthy again, so that a round starts from a whole workload: a round's
    slice is back before the rest when the JobSet restarts every Job (a slice picked meanwhile has no pods
    yet). False when `timeout_s` passed first (the round then goes on and reports what it finds)."""
    started = clock()
    while True:
        status = fetch_status(kube, namespace, name, now=clock())
        if status.slices_healthy == status.slices_total and status.state == "Running":
            return True
        on_tick(f"waiting for every slice before the next round: {status.slices_healthy}/{status.slices_total}")
        if clock() - started >= timeout_s:
            return False
        sleep(poll_s)


def soak(kube: Kube, namespace: str, name: str, *, slice_spec: str, mode: str, repeat: int, every_s: float,
         exit_code: int, rng: random.Random, clock: Callable[[], float], sleep: Callable[[float], None],
         timeout_s: float, poll_s: float, on_tick: Callable[[str], None] = lambda s: None,
         on_round: Callable[[Round], None] = lambda r: None) -> SoakSummary:
    if mode not in MODES:
        raise UsageError(f"--mode {mode}: use {', '.join(MODES)}")
    first = fetch_status(kube, namespace, name, now=clock())
    summary = SoakSummary(max_restarts=first.max_restarts)
    slices = slice_count(kube, namespace, name)
    for index in range(repeat):
        if index:
            wait_whole(kube, namespace, name, clock=clock, sleep=sleep, timeout_s=timeout_s, poll_s=poll_s,
                       on_tick=on_tick)
        started = clock()
        k = rng.randrange(slices) if slice_spec == "random" else int(slice_spec)
        try:
            plan = plan_kill(kube, namespace, name, k, None)
        except NotFoundError as exc:
            result = Round(index + 1, k, mode, 0, False, None, None, str(exc))
        else:
            pods = kube.list_pods(namespace, plan.selector)
            before = {str(Pod.of(p).meta.uid): _restarts(p) for p in pods}
            unread = _unread(kube, namespace, name, clock())
            killed_at = clock()
            try:
                inject(kube, namespace, plan, mode, exit_code)
            except ClusterError as exc:  # e.g. a PodDisruptionBudget refused the eviction: the round failed
                result = Round(index + 1, k, mode, len(plan.pods), False, None, None, f"not injected: {exc}")
            else:
                result = _watched(kube, namespace, name, plan, before, index + 1, k, mode, killed_at=killed_at,
                                  clock=clock, sleep=sleep, timeout_s=timeout_s, poll_s=poll_s, on_tick=on_tick,
                                  unread=unread)
        summary.rounds.append(result)
        on_round(result)
        if index + 1 < repeat:
            sleep(max(every_s - (clock() - started), 0.0))
    last = fetch_status(kube, namespace, name, now=clock())
    summary.restarts_counted = (first.restarts_counted, last.restarts_counted)
    summary.backoff_used = (_backoff_used(first), _backoff_used(last))
    summary.causes = {c: last.restart_causes.get(c, 0) - first.restart_causes.get(c, 0)
                      for c in last.restart_causes}
    return summary


def _watched(kube: Kube, namespace: str, name: str, plan: KillPlan, before: dict[str, int], number: int,
             index: int, mode: str, *, killed_at: float, clock: Callable[[], float], sleep: Callable[[float], None],
             timeout_s: float, poll_s: float, on_tick: Callable[[str], None], unread: str) -> Round:
    """One round's recovery, as `--mode delete --watch` reads it: recovered once the trainer steps again
    (its records), or with its pods back where the workload had no trainer record to read before the kill
    (`unread` says why; waiting for a record that was not there would only run out the round's timeout)."""
    try:
        seen = watch_recovery(kube, namespace, name, plan, killed_at=killed_at, clock=clock, sleep=sleep,
                              timeout_s=timeout_s, poll_s=poll_s, on_tick=on_tick, before=before, unread=unread)
    except Timeout:
        return Round(number, index, mode, len(plan.pods), False, None, None, f"not running again within {timeout_s:g}s")
    except ClusterError as exc:  # the workload finished before the slice came back
        return Round(number, index, mode, len(plan.pods), False, None, None, str(exc))
    recovered = seen.next_step_s is not None or bool(unread)
    error = "" if recovered else f"the trainer's next step not seen within {timeout_s:g}s ({seen.source})"
    return Round(number, index, mode, len(plan.pods), recovered, seen.next_step_s, seen.steps_lost, error,
                 seen.slice_back_s, seen.source, seen.stepped_at)


def _unread(kube: Kube, namespace: str, name: str, now: float) -> str:
    """Why the trainer's progress record cannot be read before a kill ("" when it can)."""
    jobset = get_workload(kube, namespace, name)
    progress, problem = progress_of(jobset, now)
    if progress is not None:
        return ""
    return problem or "the workload names no checkpoint directory, so no progress record"


def round_line(done: Round, repeat: int) -> str:
    """One round as kill-slice prints it: the trainer's next step is the recovery, pods ready given apart."""
    head = f"round {done.index}/{repeat}: slice {done.slice} ({done.mode}, {done.pods} pods) "
    if not done.recovered:
        return head + f"NOT recovered: {done.error}"
    pods = "" if done.pods_back_s is None else f"pods ready after {format_duration(done.pods_back_s)}"
    if done.recovery_s is None:  # nothing of the trainer's to read: the pods are all that is known
        return head + f"back: {pods}; the trainer's next step unknown ({done.source})"
    rewound = "rewind unknown (the trainer recorded none)" if done.steps_rewound is None else \
        f"{done.steps_rewound} steps rewound"
    at = "" if done.stepped_at is None else f" at {format_clock(done.stepped_at)}"
    return head + (f"recovered: the trainer's next step {format_duration(done.recovery_s)} after the kill{at} "
                   f"({pods}); {rewound}")


def summary_lines(summary: SoakSummary) -> list[str]:
    def dur(seconds: float | None) -> str:
        return "-" if seconds is None else format_duration(seconds)

    before, after = summary.restarts_counted
    rewound, unknown = summary.steps_rewound, summary.rewinds_unknown
    causes = ", ".join(f"{n} {c}" for c, n in summary.causes.items() if n) or "none"
    return [
        f"recoveries: {summary.succeeded}/{len(summary.rounds)} succeeded",
        f"recovery time (kill -> the trainer's next step): p50 {dur(summary.percentile(50))}, "
        f"p95 {dur(summary.percentile(95))}; pods ready: p50 {dur(summary.percentile(50, pods=True))}, "
        f"p95 {dur(summary.percentile(95, pods=True))}",
        "steps rewound: " + ("unknown (the trainer recorded no rewind at any stop)" if rewound is None
                             else f"{rewound} (as the trainer recorded each stop)"
                             + (f"; unknown for {unknown} of {len(summary.rounds)} rounds" if unknown else "")),
        f"budget consumed: JobSet restarts {after - before} (now {after}/{summary.max_restarts} counted); "
        f"backoffLimit used {summary.backoff_used[0]} -> {summary.backoff_used[1]}; pod restarts by cause: {causes}",
    ]
