"""The JobSet admission webhook's create-time rules, from kubernetes-sigs/jobset at 08dfbdf
(`pkg/webhooks/jobset_webhook.go`), plus the CEL rule of the CRD (rule 16).

Run on the object after `defaulted()`: the API server applies the CRD's defaults, then the mutating
webhook its own, before any validation. Feature gates at their defaults (InPlaceRestart, RestartJob and
ElasticJobSet off, `pkg/features/features.go`). The webhook's lookup of an existing PVC needs a cluster and
is left to the server. Rule numbers are those of docs/launcher.md.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from elxpk.admission import identifiers
from elxpk.admission.names import MAX_INT32, coordinator_endpoint, gen_job_name, gen_pod_name
from elxpk.admission.violation import Violation, as_dict, as_int, as_list, join

MAX_MANAGED_BY = 63  # `maxManagedByLength`
MAX_VOLUME_CLAIM = 63  # `maxVolumeClaimLength`
RULE_NAME = re.compile(r"[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?")  # `ruleNameFmt`
# `validOnJobFailureReasons`: the batch/v1 Job failure reasons.
JOB_FAILURE_REASONS = ("BackoffLimitExceeded", "DeadlineExceeded", "FailedIndexes", "MaxFailedIndexesExceeded",
                       "PodFailurePolicy")
RESTART_JOB_ACTIONS = ("RestartJob", "RestartJobAndIgnoreMaxRestarts")


def defaulted(jobset: dict) -> dict:
    """A copy with the CRD's defaults (`api/jobset/v1alpha2/jobset_types.go` markers: replicas 1, groupName
    "default", failurePolicy.restartStrategy Recreate) and the webhook's `Default`: successPolicy All,
    startupPolicy AnyOrder, completionMode Indexed, restartPolicy OnFailure, DNS hostnames and
    publishNotReadyAddresses on, failure-rule names `failurePolicyRule<i>`."""
    obj = copy.deepcopy(jobset)
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return obj
    for rjob in as_list(spec.get("replicatedJobs")):
        if not isinstance(rjob, dict):
            continue
        rjob.setdefault("replicas", 1)
        rjob.setdefault("groupName", "default")
        job_spec = as_dict(as_dict(rjob.get("template")).get("spec"))
        if job_spec:
            job_spec.setdefault("completionMode", "Indexed")
            pod_spec = as_dict(as_dict(job_spec.get("template")).get("spec"))
            if pod_spec and not pod_spec.get("restartPolicy"):
                pod_spec["restartPolicy"] = "OnFailure"
    if isinstance(spec.get("failurePolicy"), dict):
        policy = spec["failurePolicy"]
        policy.setdefault("restartStrategy", "Recreate")
        for i, rule in enumerate(as_list(policy.get("rules"))):
            if isinstance(rule, dict) and not rule.get("name"):
                rule["name"] = f"failurePolicyRule{i}"
    if spec.get("successPolicy") is None:
        spec["successPolicy"] = {"operator": "All"}
    if spec.get("startupPolicy") is None:
        spec["startupPolicy"] = {"startupPolicyOrder": "AnyOrder"}
    network = spec.setdefault("network", {}) if spec.get("network") is None else spec["network"]
    if isinstance(network, dict):
        network.setdefault("enableDNSHostnames", True)
        network.setdefault("publishNotReadyAddresses", True)
    return obj


def webhook_problems(jobset: dict) -> list[Violation]:
    """`ValidateCreate` on a defaulted JobSet."""
    spec = as_dict(jobset.get("spec"))
    name = str(as_dict(jobset.get("metadata")).get("name") or "")
    # `getJobSetNameForValidation`: a generateName gets 5 random characters.
    if not name and as_dict(jobset.get("metadata")).get("generateName"):
        name = str(jobset["metadata"]["generateName"]) + "xxxxx"
    found: list[Violation] = []
    policy = as_dict(spec.get("failurePolicy"))
    if policy.get("restartStrategy") == "InPlaceRestart":
        found.append(Violation("spec.failurePolicy.restartStrategy", "InPlaceRestart restart strategy cannot be "
                                                                     "set when InPlaceRestart feature gate is disabled"))
    rjobs = [r for r in as_list(spec.get("replicatedJobs")) if isinstance(r, dict)]
    # Rule 1: the first replicatedJob has no dependsOn.
    if rjobs and rjobs[0].get("dependsOn") is not None:
        found.append(Violation("spec.replicatedJobs[0].dependsOn", "DependsOn can't be set for the first "
                                                                   "ReplicatedJob"))
    found += _subdomain_problems(as_dict(spec.get("network")).get("subdomain"))  # rule 2
    if spec.get("managedBy") is not None:  # rule 3
        manager = str(spec["managedBy"])
        found += [Violation("spec.managedBy", f"Invalid value: {manager!r}: {p}")
                  for p in identifiers.domain_prefixed_path(manager)]
        if len(manager) > MAX_MANAGED_BY:
            found.append(Violation("spec.managedBy", f"Too long: may not be more than {MAX_MANAGED_BY} bytes"))
    names: set[str] = set()
    for i, rjob in enumerate(rjobs):
        names.add(str(rjob.get("name")))
        found += _replicated_job_problems(name, rjob, join("spec.replicatedJobs", i), names)
    for target in as_list(as_dict(spec.get("successPolicy")).get("targetReplicatedJobs")):  # rule 8
        if str(target) not in names:
            found.append(Violation("spec.successPolicy.targetReplicatedJobs",
                                   f"invalid replicatedJob name '{target}' does not appear in .spec.ReplicatedJobs"))
    if policy:
        found += _failure_policy_problems(policy, rjobs, names)  # rule 9
    if spec.get("coordinator") is not None:
        found += _coordinator_problems(name, spec, rjobs)  # rules 10 and 11
    if spec.get("volumeClaimPolicies"):
        found += _volume_claim_problems(name, spec, rjobs)  # rule 12
    found += cel_problems(spec)  # rule 16
    return found


def _subdomain_problems(subdomain: Any) -> list[Violation]:
    """Rule 2: a DNS-1123 subdomain and, being the headless Service's name too, a DNS-1035 label."""
    if not subdomain:
        return []
    value = str(subdomain)
    path = "spec.network.subdomain"
    found = [Violation(path, f"Invalid value: {value!r}: {p}") for p in identifiers.dns1123_subdomain(value)]
    for problem in identifiers.dns1035_label(value):
        if "no more than" in problem:
            problem = ".spec.network.subdomain is too long, must be less than 63 characters"
        found.append(Violation(path, f"Invalid value: {value!r}: {problem}"))
    return found


def _replicated_job_problems(jobset: str, rjob: dict, path: str, earlier: set[str]) -> list[Violation]:
    found = []
    rname = str(rjob.get("name", ""))
    replicas = as_int(rjob.get("replicas"))
    job_spec = as_dict(as_dict(rjob.get("template")).get("spec"))
    parallelism = as_int(job_spec.get("parallelism"))
    parallelism = 1 if parallelism is None else parallelism
    if replicas is not None and parallelism * replicas > MAX_INT32:  # rule 4
        found.append(Violation(path, f"the product of replicas and parallelism must not exceed {MAX_INT32} "
                                     f"for replicatedJob '{rname}'"))
    group = str(rjob.get("groupName", ""))  # rule 5
    for problem in identifiers.dns1035_label(group):
        if "no more than" in problem:
            problem = ".spec.replicatedJob[].groupName is too long, must be less than 63 characters"
        found.append(Violation(join(path, "groupName"), f"Invalid value: {group!r}: {problem}"))
    if replicas is None:
        return found + _depends_on_problems(rjob, rname, earlier, path)
    longest_job = gen_job_name(jobset, rname, replicas - 1)  # rule 6
    for problem in identifiers.dns1035_label(longest_job):
        if "no more than" in problem:
            problem = ("JobSet name is too long, job names generated for this JobSet will exceed 63 characters "
                       f"({longest_job}: {len(longest_job)})")
        found.append(Violation(join(path, "name"), f"Invalid value: {longest_job!r}: {problem}"))
    completions = as_int(job_spec.get("completions"))
    if job_spec.get("completionMode") == "Indexed" and completions is not None:  # rule 7
        pod = gen_pod_name(jobset, rname, replicas - 1, completions - 1) + "-abcde"
        for problem in identifiers.dns1035_label(pod):
            if "no more than" in problem:
                problem = ("JobSet name is too long, pod names generated for this JobSet will exceed 63 characters "
                           f"({pod[:-6]}-xxxxx: {len(pod)})")
            found.append(Violation(join(path, "name"), f"Invalid value: {longest_job!r}: {problem}"))
    return found + _depends_on_problems(rjob, rname, earlier, path)


def _depends_on_problems(rjob: dict, rname: str, earlier: set[str], path: str) -> list[Violation]:
    """Rule 1, second half: dependsOn names an earlier replicatedJob (`earlier` includes this one, as upstream)."""
    found = []
    for j, item in enumerate(as_list(rjob.get("dependsOn"))):
        target = as_dict(item).get("name")
        if str(target) not in earlier:
            found.append(Violation(join(join(path, "dependsOn"), j),
                                   f"replicatedJob: {rname} cannot depend on replicatedJob: {target}"))
    return found


def _failure_policy_problems(policy: dict, rjobs: list[dict], names: set[str]) -> list[Violation]:
    """`validateFailurePolicy`."""
    path = "spec.failurePolicy.rules"
    rules = [r for r in as_list(policy.get("rules")) if isinstance(r, dict)]
    if any(str(r.get("action")) in RESTART_JOB_ACTIONS for r in rules):
        return [Violation(path, "RestartJob and RestartJobAndIgnoreMaxRestarts failure policy actions are not "
                                "allowed when RestartJob feature gate is disabled")]
    found: list[Violation] = []
    seen: dict[str, list[int]] = {}
    for i, rule in enumerate(rules):
        rule_path = join(path, i)
        name = str(rule.get("name", ""))
        if not 1 <= len(name) <= 128:
            found.append(Violation(join(rule_path, "name"), f"invalid failure policy rule name of length "
                                                            f"{len(name)}, the rule name must be at least 1 "
                                                            f"characters long and at most 128 characters long"))
        if not RULE_NAME.fullmatch(name):
            found.append(Violation(join(rule_path, "name"), f"invalid failure policy rule name '{name}', a failure "
                                   f"policy rule name must start with an alphabetic character, optionally followed "
                                   f"by a string of alphanumeric characters or '_,:', and must end with an "
                                   f"alphanumeric character or '_'"))
        seen.setdefault(name, []).append(i)
        for target in as_list(rule.get("targetReplicatedJobs")):
            if str(target) not in names:
                found.append(Violation(join(rule_path, "targetReplicatedJobs"), f"invalid replicatedJob name "
                                       f"'{target}' in failure policy does not appear in .spec.ReplicatedJobs"))
        for reason in as_list(rule.get("onJobFailureReasons")):
            if str(reason) not in JOB_FAILURE_REASONS:
                found.append(Violation(join(rule_path, "onJobFailureReasons"), f"invalid job failure reason "
                                       f"'{reason}' in failure policy is not a recognized job failure reason"))
    for name, indices in seen.items():
        if len(indices) > 1:
            found.append(Violation(path, f"rule names are not unique, rules with indices {indices} all have the "
                                         f"same name '{name}'"))
    return found


def _coordinator_problems(jobset: str, spec: dict, rjobs: list[dict]) -> list[Violation]:
    """`validateCoordinator`, then `validateCoordinatorLabelValue` (`CoordinatorEndpoint`)."""
    path = "spec.coordinator"
    coordinator = as_dict(spec.get("coordinator"))
    target = coordinator.get("replicatedJob")
    job_index, pod_index = as_int(coordinator.get("jobIndex")) or 0, as_int(coordinator.get("podIndex")) or 0
    rjob = next((r for r in rjobs if r.get("name") == target), None)
    found = []
    if rjob is None:
        found.append(Violation(path, f"coordinator replicatedJob {target} does not exist"))
    else:
        job_spec = as_dict(as_dict(rjob.get("template")).get("spec"))
        completions = as_int(job_spec.get("completions"))
        if not 0 <= job_index < (as_int(rjob.get("replicas")) or 0):
            found.append(Violation(path, f"coordinator job index {job_index} is invalid for replicatedJob {target}"))
        elif job_spec.get("completionMode") != "Indexed" or completions is None:
            found.append(Violation(path, "job for coordinator pod must be indexed completion mode, and completions "
                                         "number must be set"))
        elif not 0 <= pod_index < completions:
            found.append(Violation(path, f"coordinator pod index {pod_index} is invalid for replicatedJob {target} "
                                         f"job index {job_index}"))
    subdomain = as_dict(spec.get("network")).get("subdomain")
    endpoint = coordinator_endpoint(jobset, str(target), job_index, pod_index, str(subdomain) if subdomain else None)
    problems = identifiers.label_value(endpoint)
    if problems:
        found.append(Violation(path, f"spec will lead to invalid label value {endpoint!r} ({len(endpoint)} "
                                     f"characters) for coordinator label 'jobset.sigs.k8s.io/coordinator' (long "
                                     f"JobSet / ReplicatedJob / SubDomain name?): {', '.join(problems)}"))
    return found


def _volume_claim_problems(jobset: str, spec: dict, rjobs: list[dict]) -> list[Violation]:
    """`validateVolumeClaimPolicies` and `validateReplicatedJobsVolumeClaims` (`GeneratePVCName` is
    `<template>-<jobset>`), without the existing-PVC lookup."""
    found: list[Violation] = []
    claimed: set[str] = set()
    for p, policy in enumerate(as_list(spec.get("volumeClaimPolicies"))):
        for t, template in enumerate(as_list(as_dict(policy).get("templates"))):
            path = f"spec.volumeClaimPolicies[{p}].template[{t}].name"
            name = str(as_dict(as_dict(template).get("metadata")).get("name", ""))
            if name in claimed:
                found.append(Violation(path, f"Invalid value: {name!r}: names must be unique for "
                                             f"VolumeClaimPolicies template"))
            found += [Violation(path, f"Invalid value: {name!r}: {x}") for x in identifiers.dns1123_subdomain(name)]
            if len(f"{name}-{jobset}") > MAX_VOLUME_CLAIM:
                found.append(Violation(path, f"Invalid value: {name!r}: VolumeClaimPolicies template name is too "
                                             f"long"))
            found += _claim_mount_problems(rjobs, name)
            claimed.add(name)
    return found


def _claim_mount_problems(rjobs: list[dict], claim: str) -> list[Violation]:
    found, mounted = [], False
    for i, rjob in enumerate(rjobs):
        pod = as_dict(as_dict(as_dict(as_dict(rjob.get("template")).get("spec")).get("template")).get("spec"))
        for v, volume in enumerate(as_list(pod.get("volumes"))):
            if as_dict(volume).get("name") == claim:
                found.append(Violation(f"spec.replicatedJobs[{i}].template.spec.template.spec.volumes[{v}].name",
                                       f"volume name conflicts with VolumeClaimPolicy template name: {claim}"))
        for box in as_list(pod.get("initContainers")) + as_list(pod.get("containers")):
            if any(as_dict(m).get("name") == claim for m in as_list(as_dict(box).get("volumeMounts"))):
                mounted = True
    if not mounted:
        found.append(Violation("spec.replicatedJobs", f"replicatedJob containers don't have a matching volumeMount: "
                                                      f"{claim} from VolumeClaimPolicies"))
    return found


def cel_problems(spec: dict) -> list[Violation]:
    """Rule 16, the CRD's `x-kubernetes-validations` on JobSetSpec: `!(has(self.startupPolicy) &&
    self.startupPolicy.startupPolicyOrder == 'InOrder' && self.replicatedJobs.exists(x, has(x.dependsOn)))`."""
    in_order = as_dict(spec.get("startupPolicy")).get("startupPolicyOrder") == "InOrder"
    if in_order and any(isinstance(r, dict) and "dependsOn" in r for r in as_list(spec.get("replicatedJobs"))):
        return [Violation("spec", "Invalid value: StartupPolicy and DependsOn APIs are mutually exclusive")]
    return []
