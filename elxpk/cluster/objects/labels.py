"""The names the cluster's objects carry: the labels JobSet, the Job controller, Kueue and xpk put on
Jobs and pods, GKE's TPU node labels, and the Pathways head's replicatedJob. Read by status, incidents, observe and the
fetchers alike, so they live below all of them."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB = "jobset.sigs.k8s.io/replicatedjob-name"
JOB_INDEX = "jobset.sigs.k8s.io/job-index"
RESTART_ATTEMPT = "jobset.sigs.k8s.io/restart-attempt"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
KUEUE_JOB_UID = "kueue.x-k8s.io/job-uid"
KUEUE_QUEUE = "kueue.x-k8s.io/queue-name"
XPK_WORKLOAD = "xpk.google.com/workload"
HEAD = "pathways-head"
# What GKE labels a TPU node with (the catalog's gke_accelerator and topology); a TPU pod selects them.
ACCELERATOR = "cloud.google.com/gke-tpu-accelerator"
TOPOLOGY = "cloud.google.com/gke-tpu-topology"
# The JobSet elxpk submitted (submit.py); its renders carry the xpk labels too (xpk's tools read them).
SUBMISSION_ANNOTATION = "elxpk.dev/submission-id"


def is_pathways(jobset: Mapping[str, Any]) -> bool:
    """Whether a JobSet runs Pathways: it has the head's replicatedJob. The one test, for the API's answers
    (JobSet.pathways) and for manifests (create's checks, which import no view: this module is all the render
    path loads of elxpk/cluster/objects/)."""
    return any(r.get("name") == HEAD for r in (jobset.get("spec") or {}).get("replicatedJobs") or ())


def parse_time(text: str | None) -> float | None:
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
