""""The JobSet exists but a child Job was rejected" (GoogleCloudPlatform/ml-auto-solutions#1369): the API
server admits the JobSet, then refuses the Job the JobSet controller creates from a replicatedJob (a
podFailurePolicy on pods with restartPolicy OnFailure, ...), and the other Jobs (a Pathways head) run
alone. Nothing fails: the JobSet's status shows no condition, the slice is simply missing.

The JobSet controller's only trace is a Warning Event on the JobSet, reason `JobCreationFailed`, message
`job "NAME" creation failed with error: Job.batch "NAME" is invalid: PATH: DETAIL[, PATH: DETAIL]`
(jobset pkg/controllers/jobset_controller.go, v0.12.0). `status --why` reads it when a replicatedJob has
fewer Jobs than replicas, and names the refused field in the JobSet's own terms
(spec.replicatedJobs[i].template.spec...), which is where `workload validate` points offline too.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sized

from elxpk.cluster.diagnosis.why import Reason
from elxpk.cluster.objects.pods import Event
from elxpk.cluster.objects.workloads import JobSet

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


def rejection_reasons(jobset: dict | JobSet, events: Iterable[dict | Event]) -> list[Reason]:
    """One Reason per replicatedJob whose Job the API server refused, from the newest such Event."""
    view = JobSet.of(jobset)
    name = view.meta.name or ""
    rjobs = [str(r.name) for r in view.replicated_jobs]
    newest: dict[str, tuple[str, Event]] = {}
    for event in sorted(map(Event.of, events), key=_when):
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
        running = [r for r in rjobs if r != rjob]
        alone = f"; {', '.join(running)} may run alone" if running else ""
        reasons.append(Reason(
            "job-rejected",
            f"the JobSet was admitted, but the API server refused the Job of replicatedJob {rjob}: "
            f"{'; '.join(paths) or fields} ({fields}){alone}",
            "fix that field of the manifest (`elxpk workload validate FILE` finds it offline), then delete the "
            f"workload and create it again (`elxpk workload delete {name}`)",
            f"JobSet controller ({event.count}x): {event.message or ''}"))
    return reasons


def _replicated_job(job: str, jobset: str, rjobs: list[str]) -> str | None:
    """`<jobset>-<replicatedJob>-<index>` -> the replicatedJob (the longest name that fits)."""
    for rjob in sorted(rjobs, key=len, reverse=True):
        prefix = f"{jobset}-{rjob}-"
        if job.startswith(prefix) and job[len(prefix):].isdigit():
            return rjob
    return None


def _when(event: Event) -> str:
    return str(event.last or event.event_time or event.meta.created or "")
