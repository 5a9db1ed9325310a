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
from collections.abc import Callable
from datetime import datetime, timezone

from elxpk.cluster.objects.labels import COMPLETION_INDEX, JOB_INDEX, REPLICATED_JOB, parse_time
from elxpk.units import format_duration
from elxpk_contract.exit_codes import BY_CODE

BACKOFF_S, BACKOFF_MAX_S = 10.0, 600.0
FAILED_CREATE = "FailedCreate"
_EXIT_CODE = re.compile(r"exit code ([0-9]{1,19})(?![0-9])")
_SERVICE_ACCOUNT = re.compile(r'serviceaccount "([^"]+)" not found')
_QUOTA = re.compile(r'exceeded quota: ([^,\s]+)')
_WEBHOOK = re.compile(r'admission webhook "([^"]+)" denied the request')


def _true(job: dict, kind: str) -> dict | None:
    return next((c for c in (job.get("status") or {}).get("conditions") or []
                 if c.get("type") == kind and c.get("status") == "True"), None)


def short_of_pods(job: dict, pods: list[dict] | None = None) -> bool:
    """A Job still running that has fewer pods than it asks for (not suspended, not finished). With `pods`
    (its pods among them), its active pods are counted from them, not read from its status."""
    spec, status = job.get("spec") or {}, job.get("status") or {}
    if spec.get("suspend") or job["metadata"].get("deletionTimestamp") or any(
            _true(job, kind) for kind in ("Failed", "FailureTarget", "Complete", "SuccessCriteriaMet")):
        return False
    wanted = min(int(spec.get("parallelism", 1)), int(spec.get("completions", spec.get("parallelism", 1))))
    return active_pods(job, pods) + int(status.get("succeeded") or 0) < wanted


def active_pods(job: dict, pods: list[dict] | None) -> int:
    """The Job's pods still pending or running. The Job controller writes its status a sync after its pods
    change, so a pod that just failed is still `active` there: with the pods listed, they are the count."""
    if pods is None:
        return int((job.get("status") or {}).get("active") or 0)
    uid = job["metadata"].get("uid")
    return sum(1 for p in pods if (p.get("status") or {}).get("phase") not in ("Failed", "Succeeded")
               and not p["metadata"].get("deletionTimestamp")
               and any(r.get("uid") == uid for r in p["metadata"].get("ownerReferences") or []))


def _where(job: dict) -> str:
    labels = job["metadata"].get("labels") or {}
    return f"Job {job['metadata']['name']} (replicatedJob {labels.get(REPLICATED_JOB, '?')}, " \
           f"slice {labels.get(JOB_INDEX, '?')})"


# --- FailedCreate ---------------------------------------------------------------------------------------

def failed_create(name: str, namespace: str, jobs: list[dict], events: list[dict], reason: Callable) -> list:
    """The newest FailedCreate Event of each Job still short of pods, newer than the Job."""
    out = []
    for job in jobs:
        if not short_of_pods(job):
            continue
        made = parse_time(job["metadata"].get("creationTimestamp")) or 0.0
        mine = [e for e in events if e.get("reason") == FAILED_CREATE
                and (e.get("involvedObject") or {}).get("uid", job["metadata"].get("uid")) == job["metadata"].get("uid")
                and (e.get("involvedObject") or {}).get("name") == job["metadata"]["name"]
                and (parse_time(_event_time(e)) or 0.0) >= made]
        if not mine:
            continue
        event = max(mine, key=lambda e: parse_time(_event_time(e)) or 0.0)
        message = str(event.get("message") or "")
        count = int(event.get("count") or 1)
        out.append(reason("pod-create", f"the Job controller cannot create the pods of {_where(job)}: "
                          + _cause_of(message) + (f" ({count} tries, the last at {_event_time(event)})"
                                                  if count > 1 else f" (at {_event_time(event)})"),
                          _create_fix(message, namespace, name), f"Job controller: {message}"))
    return out


def _event_time(event: dict) -> str:
    return str(event.get("lastTimestamp") or event.get("eventTime") or event.get("firstTimestamp") or "")


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

def finished_at(pod: dict) -> float | None:
    """When a failed pod ended, as the Job controller reads it (getFinishedTime): its containers' latest
    finish, else its Ready=False transition, else its deletion time less the grace period."""
    status = pod.get("status") or {}
    ends = [((cs.get("state") or {}).get("terminated") or {}).get("finishedAt")
            for cs in status.get("containerStatuses") or []]
    if ends and all(ends):
        return max(parse_time(t) or 0.0 for t in ends)
    ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"
                  and c.get("status") == "False" and c.get("lastTransitionTime")), None)
    if ready:
        return parse_time(ready["lastTransitionTime"])
    deleted = parse_time(pod["metadata"].get("deletionTimestamp"))
    if deleted is not None:
        return deleted - float(pod["metadata"].get("deletionGracePeriodSeconds") or 0)
    return None


def backoff_wait_s(failures: int) -> float:
    """The Job controller's wait after `failures` failed pods since the last success."""
    if failures <= 0:
        return 0.0
    return min(BACKOFF_S * 2 ** min(failures - 1, 30), BACKOFF_MAX_S)


def backoff(name: str, jobs: list[dict], pods: list[dict], now: float, reason: Callable) -> list:
    """Each Job short of pods whose newest failed pod ended less than the back-off ago."""
    out = []
    for job in jobs:
        if not short_of_pods(job, pods):
            continue
        uid = job["metadata"].get("uid")
        failed = [p for p in pods if (p.get("status") or {}).get("phase") == "Failed"
                  and any(r.get("uid") == uid for r in p["metadata"].get("ownerReferences") or [])]
        ends = [t for t in (finished_at(p) for p in failed) if t is not None]
        failures = max(int((job.get("status") or {}).get("failed") or 0), len(failed))
        if not failures or active_pods(job, pods):
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

def first_failed(name: str, jobs: list[dict], pods: list[dict], reason: Callable) -> list:
    """The first failed Job (by the time of its Failed condition), why, and the command that shows the
    output of its failed pod (restartPolicy Never: the failed container is the pod's own, not a previous one)."""
    failed = []
    for job in jobs:
        c = _true(job, "Failed")
        if c:
            failed.append((parse_time(c.get("lastTransitionTime")) or 0.0, job, c))
    if not failed:
        return []
    _, job, c = min(failed, key=lambda item: item[0])
    labels = job["metadata"].get("labels") or {}
    code = _EXIT_CODE.search(c.get("message") or "")
    return [reason("job-failed", f"first failed: Job {job['metadata']['name']} of replicatedJob "
                   f"{labels.get(REPLICATED_JOB, '?')} ({c.get('reason')})"
                   + (exit_class(int(code.group(1))) if code else ""),
                   logs_fix(name, job, pods), f"Job: {c.get('message')}")]


def logs_fix(name: str, job: dict, pods: list[dict]) -> str:
    uid = job["metadata"].get("uid")
    own = [p for p in pods if any(r.get("uid") == uid for r in p["metadata"].get("ownerReferences") or [])]
    failed = [p for p in own if (p.get("status") or {}).get("phase") == "Failed"] or own
    labels = job["metadata"].get("labels") or {}
    where = ""
    if labels.get(REPLICATED_JOB) == "pathways-head":
        where = " --head"
    elif failed:
        newest = max(failed, key=lambda p: finished_at(p) or 0.0)
        vm = (newest["metadata"].get("labels") or {}).get(COMPLETION_INDEX, "0")
        where = f" --slice {labels.get(JOB_INDEX, '0')} --vm {vm}"
    if not failed:
        return (f"its pods are gone; `elxpk workload events {name}` lists the exits and reasons of the "
                "workload's pods")
    return f"`elxpk workload logs {name}{where}` shows the failed pod's last output"


def exit_class(code: int) -> str:
    known = BY_CODE.get(code)
    if known is None:
        return f", exit {code}: not in the trainer's table (137: killed, e.g. out of memory)"
    return f", exit {code} {known.name}: " + ("retryable" if known.retryable else "not retryable, fix and resubmit")
