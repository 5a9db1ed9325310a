""""The JobSet exists but a child Job was rejected" (GoogleCloudPlatform/ml-auto-solutions#1369): the API
server admits the JobSet, then refuses the Job the JobSet controller creates from a replicatedJob (a
podFailurePolicy on pods with restartPolicy OnFailure, ...), and the other Jobs (a Pathways head) run
alone. Nothing fails: the JobSet's status shows no condition, the slice is simply missing.

The JobSet controller's only trace is a Warning Event on the JobSet, reason `JobCreationFailed`, message
`job "NAME" creation failed with error: Job.batch "NAME" is invalid: PATH: DETAIL[, PATH: DETAIL]`
(jobset pkg/controllers/jobset_controller.go, v0.12.0). `status --why` reads it when a replicatedJob has
fewer Jobs than replicas, and names the refused field in the JobSet's own terms
(spec.replicatedJobs[i].template.spec...), which is where `workload validate` points offline too.

The controller's Events are recorded through client-go's events API, which folds every JobCreationFailed
of one JobSet into a series of the first and keeps only the first one's words (k8s.io/client-go/tools/events:
its key has no message). Where that first failure was another one (a create retried from a stale cache:
"already exists"), the refusal is in no Event: the missing replicatedJob's template is then checked by the
Job API's own rules (elxpk/admission/jobs.py, as `workload validate` checks it), and the field it refuses is
named from that.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence, Sized

from elxpk.cluster.diagnosis.why import Reason
from elxpk.cluster.objects.pods import Event
from elxpk.cluster.objects.workloads import Job, JobSet

REASON = "JobCreationFailed"
_MESSAGE = re.compile(r'job "(?P<job>[^"]+)" creation failed with error: .*? is invalid: (?P<fields>.*)', re.S)
_FIELD = re.compile(r"(?:^|, |\[)(spec\.[\w.\[\]-]+): ")  # one, or [a: x, b: y] for several


def jobs_missing(jobset: dict | JobSet, jobs: Sized) -> bool:
    """Whether some replicatedJob has fewer Jobs than replicas (the one case where the events are read)."""
    return len(jobs) < sum(r.replicas for r in JobSet.of(jobset).replicated_jobs)


def event_selector(name: str, uid: str) -> str:
    """This JobSet's refusals only: Events outlive their object by about an hour, and an earlier JobSet of the
    same name (deleted and created again) left its own."""
    return f"involvedObject.kind=JobSet,involvedObject.name={name},involvedObject.uid={uid},reason={REASON}"


def rejection_reasons(jobset: dict | JobSet, events: Iterable[dict | Event],
                      jobs: Sequence[dict | Job] | None = None) -> list[Reason]:
    """One Reason per replicatedJob whose Job the API server refused, from the newest such Event; with `jobs`
    (the JobSet's), also one per replicatedJob short of Jobs whose refusal no Event words but the Job API's
    rules find in its template (the module's note)."""
    view = JobSet.of(jobset)
    name = view.meta.name or ""
    rjobs = [str(r.name) for r in view.replicated_jobs]
    newest: dict[str, tuple[str, Event]] = {}
    read = [Event.of(e) for e in events]
    for event in sorted(read, key=_when):
        found = _MESSAGE.match(event.message or "")
        if event.reason != REASON or not found:
            continue
        rjob = _replicated_job(found.group("job"), name, rjobs)
        if rjob is not None:
            newest[rjob] = (found.group("fields").strip(), event)
    reasons = []
    for rjob, (fields, event) in newest.items():
        index = rjobs.index(rjob)
        paths = [f"spec.replicatedJobs[{index}].template.{p}" for p in _FIELD.findall(fields)]
        reasons.append(_rejected(view, rjob, f"the API server refused the Job of replicatedJob {rjob}: "
                                             f"{'; '.join(paths) or fields} ({fields})",
                                 f"JobSet controller ({event.count}x): {event.message or ''}"))
    if jobs is not None:
        reasons += _template_refusals(view, jobs, [e for e in read if e.reason == REASON], set(newest))
    return reasons


def _template_refusals(view: JobSet, jobs: Sequence[dict | Job], failed: list[Event],
                       explained: set[str]) -> list[Reason]:
    """The replicatedJobs short of Jobs, their creation failed (a JobCreationFailed Event), no Event naming
    why, whose template the Job API's rules refuse: one Reason each, naming the fields."""
    if not failed:  # nothing failed to be created: a Job not there yet is waiting (an in-order startup)
        return []
    have = Counter(j.replicated_job for j in map(Job.of, jobs) if not j.meta.deleting)
    short = [(i, str(r.name)) for i, r in enumerate(view.replicated_jobs)
             if have[r.name] < r.replicas and str(r.name) not in explained]
    if not short:
        return []
    from elxpk.admission import jobs as job_rules  # lazy: only where a Job is missing and its creation failed
    from elxpk.admission import webhook  # lazy: as above

    refused = job_rules.job_template_problems(webhook.defaulted(dict(view.raw)))
    first = min(failed, key=_when)
    reasons = []
    for index, rjob in short:
        mine = [v for v in refused if v.path.startswith(f"spec.replicatedJobs[{index}].")]
        if not mine:
            continue
        reasons.append(_rejected(view, rjob, f"the Job of replicatedJob {rjob} was not created, and the Job API "
                                             f"refuses its template: {'; '.join(map(str, mine))}",
                                 "found by elxpk's check of the template by the Job API's rules; the JobSet "
                                 f"controller's Event ({first.count}x) keeps its first failure's words only: "
                                 f"{first.message or ''}"))
    return reasons


def _rejected(view: JobSet, rjob: str, what: str, detail: str) -> Reason:
    """The one `job-rejected` reason of replicatedJob `rjob`: `what` was refused, the others may run alone."""
    running = [str(r.name) for r in view.replicated_jobs if r.name != rjob]
    alone = f"; {', '.join(running)} may run alone" if running else ""
    return Reason("job-rejected", f"the JobSet was admitted, but {what}{alone}",
                  "fix that field of the manifest (`elxpk workload validate FILE` finds it offline), then delete "
                  f"the workload and create it again (`elxpk workload delete {view.meta.name or ''}`)", detail)


def _replicated_job(job: str, jobset: str, rjobs: list[str]) -> str | None:
    """`<jobset>-<replicatedJob>-<index>` -> the replicatedJob (the longest name that fits)."""
    for rjob in sorted(rjobs, key=len, reverse=True):
        prefix = f"{jobset}-{rjob}-"
        if job.startswith(prefix) and job[len(prefix):].isdigit():
            return rjob
    return None


def _when(event: Event) -> str:
    return str(event.last or event.event_time or event.meta.created or "")
