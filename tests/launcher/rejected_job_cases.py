"""JobSets the API server and the JobSet webhook admit whose child Job the Job API refuses (the class of
GoogleCloudPlatform/ml-auto-solutions#1369), each as a change to a Pathways render's worker replicatedJob
(index 1), with the field the Job API names. `workload validate` refuses each offline
(tests/launcher/test_rejected_jobs.py); tests/realcluster/test_job_rejected_real.py creates each raw on the
real control plane and reads the JobSet controller's JobCreationFailed event through `status --why`.
Rules from kubernetes v1.34.4 pkg/apis/batch/validation/validation.go.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple


class Case(NamedTuple):
    name: str
    breaks: Callable[[dict], None]
    field: str  # the refused field, as the Job API names it in the Job (spec....)
    on_real_cluster: bool = True  # also created on the real control plane


def worker(jobset: dict) -> dict:
    return jobset["spec"]["replicatedJobs"][1]["template"]["spec"]


def _failure_policy_on_restarting_pods(jobset: dict) -> None:  # ml-auto-solutions#1369: gcluster's render
    worker(jobset)["podFailurePolicy"] = {"rules": [{"action": "FailJob", "onExitCodes": {"operator": "In",
                                                                                          "values": [42]}}]}
    worker(jobset)["template"]["spec"]["restartPolicy"] = "OnFailure"


def _pod_condition_status(jobset: dict) -> None:
    worker(jobset)["podFailurePolicy"] = {"rules": [{"action": "Ignore", "onPodConditions": [
        {"type": "DisruptionTarget", "status": "Maybe"}]}]}
    worker(jobset)["template"]["spec"]["restartPolicy"] = "Never"


def _empty_success_rule(jobset: dict) -> None:
    worker(jobset)["successPolicy"] = {"rules": [{}]}


def _success_count_above_completions(jobset: dict) -> None:
    worker(jobset)["successPolicy"] = {"rules": [{"succeededCount": 5}]}


def _managed_by(jobset: dict) -> None:
    worker(jobset)["managedBy"] = "not a path"


def _selector(jobset: dict) -> None:
    worker(jobset)["selector"] = {"matchLabels": {"team": "a"}}


CASES = (
    Case("failure-policy-on-restarting-pods", _failure_policy_on_restarting_pods, "spec.template.spec.restartPolicy"),
    Case("pod-condition-status", _pod_condition_status, "spec.podFailurePolicy.rules[0].onPodConditions[0].status"),
    Case("empty-success-rule", _empty_success_rule, "spec.successPolicy.rules[0]"),
    Case("success-count-above-completions", _success_count_above_completions,
         "spec.successPolicy.rules[0].succeededCount"),
    Case("managed-by", _managed_by, "spec.managedBy"),
    # In-order startup holds the workers until the head is ready, which the shared control plane does not
    # always reach in time: offline only (the rule is `validateGeneratedSelector`).
    Case("selector-not-generated", _selector, "spec.selector", on_real_cluster=False),
)
