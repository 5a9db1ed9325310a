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

The summary: recoveries that succeeded out of N, recovery time p50/p95 (kill -> every pod of the slice
running and ready again), steps rewound (from the trainer's progress record: steps done since the
last committed checkpoint at each kill, which a restore repeats), and the restart budgets consumed
(JobSet restarts counted towards maxRestarts, Jobs' backoffLimit used, pod restarts by cause).
Clock, sleep and the random source are injected.
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
from elxpk.cluster.verbs.verb_flags import KILL_MODES
from elxpk.errors import ClusterError, NotFoundError, UsageError
from elxpk.units import format_duration

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
    recovery_s: float | None
    steps_rewound: int | None
    error: str = ""


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

    def percentile(self, q: float) -> float | None:
        times = sorted(r.recovery_s for r in self.rounds if r.recovery_s is not None)
        if not times:
            return None
        return times[max(math.ceil(q / 100 * len(times)) - 1, 0)]  # nearest rank

    @property
    def steps_rewound(self) -> int | None:
        known = [r.steps_rewound for r in self.rounds if r.steps_rewound is not None]
        return sum(known) if known else None

    def to_dict(self) -> dict:
        return {"rounds": [asdict(r) for r in self.rounds], "succeeded": self.succeeded, "total": len(self.rounds),
                "recovery_p50_s": self.percentile(50), "recovery_p95_s": self.percentile(95),
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


def _ready(pod: dict) -> bool:
    view = Pod.of(pod)
    return view.ready and not view.meta.deleting


def inject(kube: Kube, namespace: str, plan: KillPlan, mode: str, exit_code: int) -> None:
    if mode == "delete":
        kill(kube, namespace, plan)
        return
    containers = {p["metadata"]["name"]: p["spec"]["containers"][0]["name"]
                  for p in kube.list_pods(namespace, plan.selector)} if mode == "exit" else {}
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


def wait_back(kube: Kube, namespace: str, plan: KillPlan, before: dict[str, int], *, killed_at: float,
              clock: Callable[[], float], sleep: Callable[[float], None], timeout_s: float, poll_s: float,
              on_tick: Callable[[str], None]) -> float | None:
    """Seconds until every pod of the slice is a new pod or a restarted container, running and ready."""
    while True:
        pods = [p for p in kube.list_pods(namespace, plan.selector) if not p["metadata"].get("deletionTimestamp")]
        back = [p for p in pods if _ready(p) and (p["metadata"]["uid"] not in plan.uids
                                                  or _restarts(p) > before.get(p["metadata"]["uid"], 0))]
        on_tick(f"{len(back)}/{plan.expected} pods back")
        if len(back) >= plan.expected:
            return clock() - killed_at
        if clock() - killed_at >= timeout_s:
            return None
        sleep(poll_s)


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
        jobset = get_workload(kube, namespace, name)
        progress, _ = progress_of(jobset, clock())
        rewound = None
        if progress is not None:
            rewound = progress["steps_done"] - (progress.get("checkpoint_step") or 0)
        try:
            plan = plan_kill(kube, namespace, name, k, None)
        except NotFoundError as exc:
            result = Round(index + 1, k, mode, 0, False, None, None, str(exc))
        else:
            pods = kube.list_pods(namespace, plan.selector)
            before = {p["metadata"]["uid"]: _restarts(p) for p in pods}
            killed_at = clock()
            try:
                inject(kube, namespace, plan, mode, exit_code)
            except ClusterError as exc:  # e.g. a PodDisruptionBudget refused the eviction: the round failed
                result = Round(index + 1, k, mode, len(plan.pods), False, None, None, f"not injected: {exc}")
            else:
                took = wait_back(kube, namespace, plan, before, killed_at=killed_at, clock=clock, sleep=sleep,
                                 timeout_s=timeout_s, poll_s=poll_s, on_tick=on_tick)
                error = "" if took is not None else f"not running again within {timeout_s:g}s"
                result = Round(index + 1, k, mode, len(plan.pods), took is not None, took,
                               rewound if took is not None else None, error)
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


def summary_lines(summary: SoakSummary) -> list[str]:
    def dur(seconds: float | None) -> str:
        return "-" if seconds is None else format_duration(seconds)

    before, after = summary.restarts_counted
    rewound = summary.steps_rewound
    causes = ", ".join(f"{n} {c}" for c, n in summary.causes.items() if n) or "none"
    return [
        f"recoveries: {summary.succeeded}/{len(summary.rounds)} succeeded",
        f"recovery time: p50 {dur(summary.percentile(50))}, p95 {dur(summary.percentile(95))}",
        "steps rewound: " + ("unknown (no trainer progress record readable)" if rewound is None
                             else f"{rewound} (steps since the last committed checkpoint at each kill)"),
        f"budget consumed: JobSet restarts {after - before} (now {after}/{summary.max_restarts} counted); "
        f"backoffLimit used {summary.backoff_used[0]} -> {summary.backoff_used[1]}; pod restarts by cause: {causes}",
    ]
