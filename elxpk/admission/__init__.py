"""Would the API server and the JobSet controller accept this manifest? Checked offline, from upstream's rules.

`check(objects)` runs the create-time rules on each JobSet: type and object meta, the JobSet webhook
(defaults first), the CRD's CEL rule, list-type map keys, int32/int64 ranges, and the batch/v1 Job rules
for each replicatedJob's template. Pure Python over the parsed objects, with a small index derived from the
vendored CRD: `render()` runs it on every manifest (the `--dry-run` start-up budget). The full structural
check against the CRD schema (`admission.schema`) and the core pod schema (`admission.files`) are for
`elxpk workload validate`. docs/launcher.md lists the rules and their upstream sources.
"""

from __future__ import annotations

from typing import Any

from elxpk.admission import fields, jobs, objectmeta, webhook
from elxpk.admission.violation import Violation
from elxpk.errors import ElxpkError

__all__ = ["Violation", "check", "check_jobset", "require_admissible"]

JOBSET = ("jobset.x-k8s.io/v1alpha2", "JobSet")


def check_jobset(jobset: dict[str, Any]) -> list[Violation]:
    """Every create-time rule for one JobSet, sorted by path; empty when the cluster would admit it and
    create its Jobs and pods."""

    found = objectmeta.type_meta_problems(jobset, *JOBSET)
    found += objectmeta.object_meta_problems(jobset.get("metadata"))
    indexed = fields.indexed_fields(jobset)
    found += fields.integer_problems(jobset, indexed)
    found += fields.list_problems(jobset, indexed)
    obj = webhook.defaulted(jobset)
    found += webhook.webhook_problems(obj)
    found += jobs.job_template_problems(obj)
    return sorted(set(found), key=lambda v: (v.path, v.message))


def check(objects: Any) -> list[Violation]:
    """`check_jobset` on each JobSet of a parsed manifest; other kinds are not this module's business."""
    found: list[Violation] = []
    for obj in objects:
        if isinstance(obj, dict) and (obj.get("apiVersion"), obj.get("kind")) == JOBSET:
            found += check_jobset(obj)
    return found


def require_admissible(objects: Any) -> None:
    """For `render()`: a manifest from a validated spec that the cluster would refuse is elxpk's bug, not
    the user's input, so it is an internal error (exit 1) naming the first few violations."""
    found = check(objects)
    if found:
        shown = "; ".join(str(v) for v in found[:3]) + (f"; and {len(found) - 3} more" if len(found) > 3 else "")
        raise ElxpkError(f"internal error: the cluster would refuse the rendered manifest ({shown}); "
                         f"please report it with the flags used")
