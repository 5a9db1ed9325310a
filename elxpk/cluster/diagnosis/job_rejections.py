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

from elxpk.cluster.diagnosis.why import Reason

REASON = "JobCreationFailed"
_MESSAGE = re.compile(r'job "(?P<job>[^"]+)" creation failed with error: .*? is invalid: (?P<fields>.*)', re.S)
_FIELD = re.compile(r"(?:^|, |\[)(spec\.[\w.\[\]-]+): ")  # one, or [a: x, b: y] for several


def jobs_missing(jobset: dict, jobs: list[dict]) -> bool:
    """Whether some replicatedJob has fewer Jobs than replicas (the one case where the events are read)."""
    expected = sum(int(r.get("replicas", 1) or 0) for r in (jobset.get("spec") or {}).get("replicatedJobs") or [])
    return len(jobs) < expected


def event_selector(name: str, uid: str) -> str:
    """This JobSet's refusals only: Events outlive their object by about an hour, and an earlier JobSet of the
    same name (deleted and created again) left its own."""
    return f"involvedObject.kind=JobSet,involvedObject.name={name},involvedObject.uid={uid},reason={REASON}"


def rejection_reasons(jobset: dict, events: list[dict]) -> list[Reason]:
    """One Reason per replicatedJob whose Job the API server refused, from the newest such Event."""
    name = (jobset.get("metadata") or {}).get("name", "")
    rjobs = [str(r.get("name")) for r in (jobset.get("spec") or {}).get("replicatedJobs") or []]
    newest: dict[str, tuple[str, dict]] = {}
    for event in sorted(events, key=_when):
        found = _MESSAGE.match(event.get("message") or "")
        if event.get("reason") != REASON or not found:
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
            f"JobSet controller ({event.get('count') or 1}x): {event.get('message', '')}"))
    return reasons


def _replicated_job(job: str, jobset: str, rjobs: list[str]) -> str | None:
    """`<jobset>-<replicatedJob>-<index>` -> the replicatedJob (the longest name that fits)."""
    for rjob in sorted(rjobs, key=len, reverse=True):
        prefix = f"{jobset}-{rjob}-"
        if job.startswith(prefix) and job[len(prefix):].isdigit():
            return rjob
    return None


def _when(event: dict) -> str:
    return str(event.get("lastTimestamp") or event.get("eventTime") or (event.get("metadata") or {})
               .get("creationTimestamp") or "")
