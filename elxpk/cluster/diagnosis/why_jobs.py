"""Why a slice has fewer pods than it needs although Kueue admitted it: the Job controller's side of `--why`.

Pure (objects in, reasons out; the clock passed in). Three things hold a Job's pods back after admission,
each read from what the Job controller wrote:
- it cannot create them: its `FailedCreate` Warning Events on the Job ("Error creating: ... serviceaccount
  "xpk-sa" not found", a ResourceQuota, an admission webhook's refusal);
- its pod-failure back-off: after failed pods it waits before creating new ones, 10 s doubled per failed
  pod since the last success, at most 10 min (DefaultJobPodFailureBackOff and MaxJobPodFailureBackOff of
  pkg/controller/job in Kubernetes 1.34; the Job docs still say six minutes), from the newest failure's
  finish time. The controller keeps its count in memory, so the wait is estimated from what the API shows:
  the Job's `status.failed` or its Failed pods still there, whichever is more (a failure a podFailurePolicy
  Ignore rule left uncounted still doubles the wait);
- the Job failed (its Failed condition): the first one, with where its last output is.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from datetime import datetime, timezone

from elxpk.cluster.objects.labels import COMPLETION_INDEX, HEAD, parse_time
from elxpk.cluster.objects.pods import Event, Pod
from elxpk.cluster.objects.workloads import Job
from elxpk.units import format_duration
from elxpk_contract.exit_codes import BY_CODE, SLICE_LOST

BACKOFF_S, BACKOFF_MAX_S = 10.0, 600.0
FAILED_CREATE = "FailedCreate"
_EXIT_CODE = re.compile(r"exit code ([0-9]{1,19})(?![0-9])")
_SERVICE_ACCOUNT = re.compile(r'serviceaccount "([^"]+)" not found')
_QUOTA = re.compile(r'exceeded quota: ([^,\s]+)')
_WEBHOOK = re.compile(r'admission webhook "([^"]+)" denied the request')


def short_of_pods(job: dict | Job, pods: Sequence[dict | Pod] | None = None) -> bool:
    """A Job still running that has fewer pods than it asks for (not suspended, not finished). With `pods`
    (its pods among them), its active pods are counted from them, not read from its status."""
    job = Job.of(job)
    if job.spec.suspend or job.meta.deleting or any(
            job.true(kind) for kind in ("Failed", "FailureTarget", "Complete", "SuccessCriteriaMet")):
        return False
    return active_pods(job, pods) + job.succeeded < job.spec.pods


def active_pods(job: dict | Job, pods: Sequence[dict | Pod] | None) -> int:
    """The Job's pods still pending or running. The Job controller writes its status a sync after its pods
    change, so a pod that just failed is still `active` there: with the pods listed, they are the count."""
    job = Job.of(job)
    if pods is None:
        return job.active
    return sum(1 for p in map(Pod.of, pods) if not p.done and not p.meta.deleting and p.meta.owned_by(job.meta.uid))


def _where(job: Job) -> str:
    return f"Job {job.meta.name} (replicatedJob {job.replicated_job or '?'}, slice {job.index or '?'})"


# --- FailedCreate ---------------------------------------------------------------------------------------

def failed_create(name: str, namespace: str, jobs: Sequence[dict | Job], events: Sequence[dict | Event],
                  reason: Callable) -> list:
    """The newest FailedCreate Event of each Job still short of pods, newer than the Job."""
    out = []
    event_list = [Event.of(e) for e in events]
    for job in map(Job.of, jobs):
        if not short_of_pods(job):
            continue
        made = parse_time(job.meta.created) or 0.0
        # an Event that names no uid is about the Job of its name
        mine = [e for e in event_list if e.reason == FAILED_CREATE and e.involved.uid in (None, job.meta.uid)
                and e.involved.name == job.meta.name and (parse_time(_event_time(e)) or 0.0) >= made]
        if not mine:
            continue
        event = max(mine, key=lambda e: parse_time(_event_time(e)) or 0.0)
        message = str(event.message or "")
        count = event.count
        out.append(reason("pod-create", f"the Job controller cannot create the pods of {_where(job)}: "
                          + _cause_of(message) + (f" ({count} tries, the last at {_event_time(event)})"
                                                  if count > 1 else f" (at {_event_time(event)})"),
                          _create_fix(message, namespace, name), f"Job controller: {message}"))
    return out


def _event_time(event: Event) -> str:
    return str(event.time or "")


def _cause_of(message: str) -> str:
    account = _SERVICE_ACCOUNT.search(message)
    if account:
        return f"service account {account.group(1)} does not exist"
    quota = _QUOTA.search(message)
    if quota:
        return f"ResourceQuota {quota.group(1)} is exceeded"
    hook = _WEBHOOK.search(message)
    if hook:
        return f"admission webhook {hook.group(1)} refuses the pods"
    return "the API server refuses the pods"


def _create_fix(message: str, namespace: str, name: str) -> str:
    account = _SERVICE_ACCOUNT.search(message)
    if account:
        return (f"create ServiceAccount {account.group(1)} in namespace {namespace} (xpk's cluster create makes "
                f"xpk-sa; `kubectl create serviceaccount {account.group(1)} -n {namespace}`): the Job controller "
                "retries by itself and the pods start")
    if _QUOTA.search(message):
        return (f"raise the ResourceQuota of namespace {namespace} or free some of it (`elxpk workload list -n "
                f"{namespace}`); the Job controller retries by itself")
    hook = _WEBHOOK.search(message)
    if hook:
        return (f"the webhook {hook.group(1)} says why in the message below; fix what it names and recreate "
                f"the workload (`elxpk workload delete {name}`, then create it again)")
    return "the message below is the API server's; fix what it names, and the Job controller retries by itself"


# --- the pod-failure back-off ---------------------------------------------------------------------------

def finished_at(pod: dict | Pod) -> float | None:
    """When a failed pod ended, as the Job controller reads it (getFinishedTime): its containers' latest
    finish, else its Ready=False transition, else its deletion time less the grace period."""
    pod = Pod.of(pod)
    ends = [cs.terminated.finished if cs.terminated else None for cs in pod.containers]
    if ends and all(ends):
        return max(parse_time(t) or 0.0 for t in ends)
    ready = next((c for c in pod.conditions if c.type == "Ready" and c.status == "False" and c.time), None)
    if ready:
        return ready.at
    deleted = parse_time(pod.meta.deletion)
    if deleted is not None:
        return deleted - pod.meta.grace_s
    return None


def backoff_wait_s(failures: int) -> float:
    """The Job controller's wait after `failures` failed pods since the last success."""
    if failures <= 0:
        return 0.0
    return min(BACKOFF_S * 2 ** min(failures - 1, 30), BACKOFF_MAX_S)


def backoff(name: str, jobs: Sequence[dict | Job], pods: Sequence[dict | Pod], now: float, reason: Callable) -> list:
    """Each Job short of pods whose newest failed pod ended less than the back-off ago."""
    out = []
    pod_list = [Pod.of(p) for p in pods]
    for job in map(Job.of, jobs):
        if not short_of_pods(job, pod_list):
            continue
        failed = [p for p in pod_list if p.phase == "Failed" and p.meta.owned_by(job.meta.uid)]
        ends = [t for t in (finished_at(p) for p in failed) if t is not None]
        failures = max(job.failed, len(failed))
        if not failures or active_pods(job, pod_list):
            continue
        wait = backoff_wait_s(failures)
        pods_word = f"{failures} failed pod{'s' if failures > 1 else ''}"
        if not ends:  # the failed pods are gone (force-deleted, evicted): when the last one ended is not known
            out.append(reason("backoff", f"{_where(job)} has no pod: after {pods_word} the Job controller waits "
                              f"up to {format_duration(wait)} after the last failure (its pod is gone, so when is "
                              f"not known) before creating pods again; next try by {_utc(now + wait)} at the latest",
                              _BACKOFF_FIX.format(name=name)))
            continue
        next_try = max(ends) + wait
        left = next_try - now
        when = _utc(next_try)
        if left > 0:
            text = (f"{_where(job)} is in the Job controller's pod-failure back-off: {pods_word} since its last "
                    f"success, so it waits {format_duration(wait)} after the last failure before creating pods "
                    f"again; next try in about {format_duration(left)} (at {when})")
        else:
            text = (f"{_where(job)}: the Job controller's pod-failure back-off ({format_duration(wait)} after "
                    f"{pods_word}) ended {format_duration(-left)} ago (at {when}); it creates the "
                    "pods at its next sync")
        out.append(reason("backoff", text, _BACKOFF_FIX.format(name=name)))
    return out


_BACKOFF_FIX = ("nothing to do: the Job controller creates the pods itself then (each further failed pod doubles "
                "the wait: 10 s, 20 s, 40 s ... up to 10 min); `elxpk workload events {name}` lists the failures")


def _utc(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- the first failed Job --------------------------------------------------------------------------------

def first_failed(name: str, jobs: Sequence[dict | Job], pods: Sequence[dict | Pod], reason: Callable) -> list:
    """The first failed Job (by the time of its Failed condition) that is not a survivor's, why, and the command
    that shows the output of its failed pod (restartPolicy Never: the failed container is the pod's own, not a
    previous one). A Job that failed with 75 (slice_lost) is a survivor's when another failed for a cause of
    its own: its process stopped because a peer was lost (issue 52 L4: that peer's Job may fail later)."""
    failed = []
    for job in map(Job.of, jobs):
        c = job.true("Failed")
        if c:
            found = _EXIT_CODE.search(c.message or "")
            failed.append((c.at or 0.0, job, c, int(found.group(1)) if found else None))
    if not failed:
        return []
    first = min(failed, key=lambda item: item[0])
    _, job, c, code = min(failed, key=lambda item: (item[3] == SLICE_LOST.code, item[0]))
    text = (f"{'first failed' if job is first[1] else 'failed'}: Job {job.meta.name} of replicatedJob "
            f"{job.replicated_job or '?'} ({c.reason})" + (exit_class(code) if code is not None else ""))
    if job is not first[1]:
        text += f"; Job {first[1].meta.name} failed first, with 75: a survivor, its peer lost"
    return [reason("job-failed", text, logs_fix(name, job, pods), f"Job: {c.message}")]


def logs_fix(name: str, job: dict | Job, pods: Sequence[dict | Pod]) -> str:
    job = Job.of(job)
    own = [p for p in map(Pod.of, pods) if p.meta.owned_by(job.meta.uid)]
    failed = [p for p in own if p.phase == "Failed"] or own
    where = ""
    if job.replicated_job == HEAD:
        where = " --head"
    elif failed:
        newest = max(failed, key=lambda p: finished_at(p) or 0.0)
        vm = newest.meta.labels.get(COMPLETION_INDEX, "0")
        where = f" --slice {job.index or '0'} --vm {vm}"
    if not failed:
        return (f"its pods are gone; `elxpk workload events {name}` lists the exits and reasons of the "
                "workload's pods")
    return f"`elxpk workload logs {name}{where}` shows the failed pod's last output"


def exit_class(code: int) -> str:
    known = BY_CODE.get(code)
    if known is None:
        return f", exit {code}: not in the trainer's table (137: killed, e.g. out of memory)"
    return f", exit {code} {known.name}: " + ("retryable" if known.retryable else "not retryable, fix and resubmit")
