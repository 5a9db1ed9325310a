"""Failure classification: the trainer's exit-code table (elxpk_contract/exit_codes.py) as Kubernetes policy,
and the one evaluator of that policy the tests (and the scripted controller) use.

Rendering (read by the templates; no code is written in a template):
- `pod_failure_rules`: a batch/v1 Job `podFailurePolicy.rules` list for the pod that runs the trainer:
  `Ignore` a pod with a `DisruptionTarget` condition (preemption, eviction, drain: not the run's fault),
  then one rule per action of the table (`Ignore` 77, `FailJob` 2 and 70), and with
  `--restart-on-exit-codes` xpk's rule: `FailJob` on every code `NotIn` the restartable list.
- `jobset_failure_rules`: the JobSet `failurePolicy.rules`: `FailJobSet` when a Job failed by its
  podFailurePolicy (Job failure reason `PodFailurePolicy`), `RestartJobSet` (counted against maxRestarts)
  on any other Job failure.

The worker Job's restart budget (`worker_backoff_limit`): xpk's formula, and the only place it is written;
the spec renders it, `workload create` bounds it to an int32, the budget checks read it back off a JobSet.

Evaluation (pure functions over dicts, no clock): `match_pod_failure_policy` is the Job controller's
`matchPodFailurePolicy` (kubernetes/kubernetes pkg/controller/job/pod_failure_policy.go: first matching
rule wins; an `onExitCodes` rule looks at containers, then init containers, that terminated with a non-zero
code, optionally only the named one; an `onPodConditions` rule matches a condition of that type and status,
status defaulting to "True"; no rule matching means Count). `job_outcome` applies it to a Job's failed pods
with `backoffLimit` (pkg/controller/job/job_controller.go: Ignored failures are not counted, a FailJob ends
the Job with reason `PodFailurePolicy`, more counted failures than backoffLimit end it with
`BackoffLimitExceeded`). `jobset_action` is JobSet's failure policy (kubernetes-sigs/jobset
pkg/controllers/failure_policy.go: the first rule whose onJobFailureReasons and targetReplicatedJobs match
the failed Job applies; none matching, or RestartJobSet with the restarts spent, as upstream: restart while
maxRestarts allows, else fail).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from elxpk.admission.names import MAX_INT32
from elxpk_contract.exit_codes import EXIT_CODES, FAIL_JOB, IGNORE
from elxpk_contract.spelling import said

DISRUPTION_TARGET = "DisruptionTarget"  # the pod condition preemption, eviction and taint-based deletion set
# xpk's restartable codes besides the user's (xpk src/xpk/commands/workload.py get_restart_exit_codes):
# 42, and 127-255 (the shell's and the signals' range: SIGKILL, SIGTERM, OOM).
XPK_RESTART_CODES = (42, *range(127, 256))
POD_FAILURE_POLICY_REASON = "PodFailurePolicy"  # the Job's Failed condition reason after a FailJob rule
BACKOFF_LIMIT_REASON = "BackoffLimitExceeded"
FAIL_ON_USER_ERROR = "failOnUserError"  # JobSet rule names: webhook `ruleNameFmt`
RESTART_ON_INFRASTRUCTURE = "restartOnInfrastructure"


def codes_with(action: str, *, except_codes: Iterable[int] = ()) -> list[int]:
    """The table's codes rendered with `action`, sorted (the API requires ordered values)."""
    skip = set(except_codes)
    return sorted(c.code for c in EXIT_CODES if c.action == action and c.code not in skip)


def restartable_codes(user_codes: Sequence[int]) -> list[int]:
    """With --restart-on-exit-codes: every code that must not fail the Job at once (xpk's list, the user's,
    and the table's retryable ones), sorted and unique; the `NotIn` values of the xpk rule."""
    retryable = [c.code for c in EXIT_CODES if c.retryable]
    return sorted(set(XPK_RESTART_CODES) | set(user_codes) | set(retryable))


def pod_failure_rules(container: str, restart_on_exit_codes: Sequence[int] = ()) -> list[dict[str, Any]]:
    """The podFailurePolicy rules for the pod whose `container` runs the trainer (first match wins)."""
    rules: list[dict[str, Any]] = [
        {"action": IGNORE, "onPodConditions": [{"type": DISRUPTION_TARGET, "status": "True"}]}]
    ignored = codes_with(IGNORE)  # a restart without spending the budget stays so, whatever the user lists
    if ignored:
        rules.append(_on_codes(IGNORE, container, "In", ignored))
    failing = codes_with(FAIL_JOB, except_codes=restart_on_exit_codes)
    if failing:
        rules.append(_on_codes(FAIL_JOB, container, "In", failing))
    if restart_on_exit_codes:
        rules.append(_on_codes(FAIL_JOB, container, "NotIn", restartable_codes(restart_on_exit_codes)))
    return rules


def _on_codes(action: str, container: str, operator: str, values: list[int]) -> dict[str, Any]:
    return {"action": action,
            "onExitCodes": {"containerName": container, "operator": operator, "values": values}}


def jobset_failure_rules(target: str | None = None) -> list[dict[str, Any]]:
    """JobSet `failurePolicy.rules`: fail on a user error in `target` (None: any Job), restart on the rest."""
    fail: dict[str, Any] = {"name": FAIL_ON_USER_ERROR, "action": "FailJobSet",
                            "onJobFailureReasons": [POD_FAILURE_POLICY_REASON]}
    if target:
        fail["targetReplicatedJobs"] = [target]
    return [fail, {"name": RESTART_ON_INFRASTRUCTURE, "action": "RestartJobSet"}]


# The worker Job's restart budget -------------------------------------------------------------------------

# xpk's formula, inherited from the PathwaysJob controller (google/pathways-job#5: "4 suspend/resume loops"):
# without elasticity each VM of a slice may restart its pod this many times.
XPK_RESTARTS_PER_VM = 4


def worker_backoff_limit(*, elastic: bool, max_slice_restarts: int, vms_per_slice: int) -> int:
    """The `backoffLimit` of a Pathways slice's worker Job (restartPolicy OnFailure: every container restart
    counts): --max-slice-restarts x VMs per slice when elastic, else 4 x VMs per slice, as in xpk."""
    return (max_slice_restarts if elastic else XPK_RESTARTS_PER_VM) * vms_per_slice


def slice_restarts(backoff_limit: int, vms_per_slice: int) -> int:
    """The inverse: the --max-slice-restarts a worker Job's `backoffLimit` stands for (whole restarts)."""
    return backoff_limit // max(vms_per_slice, 1)


def backoff_limit_problem(*, elastic: bool, max_slice_restarts: int, vms_per_slice: int) -> str | None:
    """Why the worker Job's `backoffLimit` would not fit the int32 JobSet stores it as, or None."""
    if worker_backoff_limit(elastic=elastic, max_slice_restarts=max_slice_restarts,
                            vms_per_slice=vms_per_slice) <= MAX_INT32:
        return None
    return (f"{said('max_slice_restarts')} {max_slice_restarts}: at most {slice_restarts(MAX_INT32, vms_per_slice)} with "
            f"{vms_per_slice} VMs per slice (the worker Job's backoffLimit = restarts x VMs; JobSet stores it as a "
            f"32-bit integer)")


# Evaluation ----------------------------------------------------------------------------------------------

def _terminated_code(status: dict[str, Any]) -> int | None:
    terminated = (status.get("state") or {}).get("terminated")
    return None if terminated is None else int(terminated.get("exitCode", 0))


def _matches_codes(pod_status: dict[str, Any], requirement: dict[str, Any]) -> bool:
    name, values = requirement.get("containerName"), set(requirement.get("values") or [])
    for key in ("containerStatuses", "initContainerStatuses"):  # upstream order: containers first
        for status in pod_status.get(key) or []:
            code = _terminated_code(status)
            if code is None or code == 0 or (name is not None and status.get("name") != name):
                continue
            if (code in values) == (requirement.get("operator") == "In"):
                return True
    return False


def _matches_conditions(pod_status: dict[str, Any], patterns: list[dict[str, Any]]) -> bool:
    return any(cond.get("type") == pat.get("type") and cond.get("status") == pat.get("status", "True")
               for cond in pod_status.get("conditions") or [] for pat in patterns)


def match_pod_failure_policy(policy: dict[str, Any] | None, pod: dict[str, Any]) -> str:
    """The action (FailJob, Ignore, Count or FailIndex) the Job controller takes for the failed `pod`."""
    status = pod.get("status") or {}
    for rule in (policy or {}).get("rules") or []:
        if "onExitCodes" in rule:
            matched = _matches_codes(status, rule["onExitCodes"])
        else:
            matched = _matches_conditions(status, rule.get("onPodConditions") or [])
        if matched:
            return str(rule["action"])
    return "Count"


class JobOutcome(NamedTuple):
    failed: bool
    reason: str | None  # the Job's Failed condition reason
    counted: int  # failures counted against backoffLimit
    ignored: int  # failures the policy ignored (a replacement pod, no budget spent)


def job_outcome(job_spec: dict[str, Any], failed_pods: Sequence[dict[str, Any]]) -> JobOutcome:
    """What a Job with `job_spec` (a rendered replicatedJob's `template.spec`) does after `failed_pods`."""
    policy, limit = job_spec.get("podFailurePolicy"), int(job_spec.get("backoffLimit", 6))
    counted = ignored = 0
    for pod in failed_pods:
        action = match_pod_failure_policy(policy, pod)
        if action == FAIL_JOB:
            return JobOutcome(True, POD_FAILURE_POLICY_REASON, counted, ignored)
        if action == IGNORE:
            ignored += 1
            continue
        counted += 1
        if counted > limit:
            return JobOutcome(True, BACKOFF_LIMIT_REASON, counted, ignored)
    return JobOutcome(False, None, counted, ignored)


def jobset_action(failure_policy: dict[str, Any] | None, replicated_job: str, reason: str,
                  restarts: int) -> str:
    """FailJobSet, RestartJobSet or RestartJobSetAndIgnoreMaxRestarts after a Job of `replicated_job` failed
    with `reason`, when the JobSet has restarted `restarts` times so far."""
    policy = failure_policy or {}
    action = "RestartJobSet"
    for rule in policy.get("rules") or []:
        reasons, targets = rule.get("onJobFailureReasons") or [], rule.get("targetReplicatedJobs") or []
        if (not reasons or reason in reasons) and (not targets or replicated_job in targets):
            action = str(rule["action"])
            break
    if action == "RestartJobSet" and restarts >= int(policy.get("maxRestarts", 0)):
        return "FailJobSet"
    return action


def failed_pod(container: str, exit_code: int, *, disrupted: bool = False) -> dict[str, Any]:
    """A failed pod's status as the kubelet reports it: `container` terminated with `exit_code`, and a
    DisruptionTarget condition when the pod was preempted or evicted."""
    conditions = [{"type": DISRUPTION_TARGET, "status": "True", "reason": "PreemptionByScheduler"}] if disrupted else []
    return {"status": {"phase": "Failed", "conditions": conditions, "containerStatuses": [
        {"name": container, "state": {"terminated": {"exitCode": exit_code}}}]}}
