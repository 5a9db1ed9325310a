"""The batch/v1 Job rules for each replicatedJob's template: JobSet admits a JobSet whose Job templates the
Job API refuses later, and then no pod is ever created (kubernetes-sigs/jobset#422 and #1024;
GoogleCloudPlatform/ml-auto-solutions#1369, a podFailurePolicy on a restartPolicy OnFailure worker).

From kubernetes/kubernetes `pkg/apis/batch/validation/validation.go` (`validateJobSpec`,
`validatePodFailurePolicy`, `validatePodReplacementPolicy`) and, for the pod template, the parts of
`pkg/apis/core/validation/validation.go` (`ValidatePodTemplateSpec`, `validateContainers`,
`validateInitContainers`, `ValidateVolumes`, `validateVolumeMounts`) that a launcher's manifest can get
wrong. The core pod schema itself (field types, unknown fields) is checked by `workload validate` with
kubernetes-validate. Run on the defaulted JobSet (restartPolicy OnFailure when unset).
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet

from elxpk.admission import identifiers
from elxpk.admission.objectmeta import annotation_problems, label_problems
from elxpk.admission.violation import Violation, as_dict, as_int, as_list, join

MAX_PARALLELISM_INDEXED = 100_000  # `maxParallelismForIndexedJob`
MAX_FAILED_INDEXES = 100_000  # `maxFailedIndexesForIndexedJob`
MAX_POD_FAILURE_RULES = 20  # `maxPodFailurePolicyRules`
MAX_EXIT_CODE_VALUES = 255  # `maxPodFailurePolicyOnExitCodesValues`
POD_FAILURE_ACTIONS = ("Count", "FailIndex", "FailJob", "Ignore")
POD_REPLACEMENT_POLICIES = ("Failed", "TerminatingOrFailed")
MAX_ON_POD_CONDITIONS = 20  # `maxPodFailurePolicyOnPodConditionsPatterns`
POD_CONDITION_STATUSES = ("False", "True", "Unknown")  # `supportedPodFailurePolicyOnPodConditionsStatus`
MAX_SUCCESS_RULES = 20  # `maxSuccessPolicyRule`
MAX_SUCCEEDED_INDEXES_CHARS = 64 * 1024  # `maxJobSuccessPolicySucceededIndexesLimit`
MAX_MANAGED_BY = 63  # `maxManagedByLength`
COMPLETIONS_SOFT_LIMIT = 100_000  # `completionsSoftLimit`: above it, with backoffLimitPerIndex, tighter limits
HIGH_COMPLETIONS_LIMIT = 10_000  # `parallelismLimitForHighCompletions`, `maxFailedIndexesLimitForHighCompletions`


def job_template_problems(jobset: dict) -> list[Violation]:
    """Every replicatedJob's `template.spec` as a batch/v1 JobSpec, and its pod template."""
    found = []
    spec = as_dict(jobset.get("spec"))
    # JobSet adds a volume for each volumeClaimPolicies template (`addVolumes`): mounts may name them.
    claims = {str(as_dict(as_dict(t).get("metadata")).get("name")) for policy in as_list(spec.get("volumeClaimPolicies"))
              for t in as_list(as_dict(policy).get("templates"))}
    for i, rjob in enumerate(as_list(spec.get("replicatedJobs"))):
        path = join(join("spec.replicatedJobs", i), "template")
        template = as_dict(as_dict(rjob).get("template"))
        found += label_problems(as_dict(template.get("metadata")).get("labels"), join(path, "metadata.labels"))
        found += annotation_problems(as_dict(template.get("metadata")).get("annotations"),
                                     join(path, "metadata.annotations"))
        found += job_spec_problems(as_dict(template.get("spec")), join(path, "spec"), claims)
    return found


def job_spec_problems(spec: dict, path: str, claims: AbstractSet[str] = frozenset()) -> list[Violation]:
    """`validateJobSpec`."""
    found = []
    for key in ("parallelism", "completions", "activeDeadlineSeconds", "backoffLimit", "ttlSecondsAfterFinished",
                "backoffLimitPerIndex", "maxFailedIndexes"):
        value = as_int(spec.get(key))
        if value is not None and value < 0:  # `ValidateNonnegativeField`
            found.append(Violation(join(path, key), f"Invalid value: {value}: must be greater than or equal to 0"))
    parallelism, completions = as_int(spec.get("parallelism")), as_int(spec.get("completions"))
    if spec.get("completions") is None and spec.get("parallelism") is None:
        # The Job API's defaults, set before its validation (pkg/apis/batch/v1/defaults.go SetDefaults_Job):
        # neither given, both are 1; parallelism alone is given a value, completions then stays unset.
        parallelism = completions = 1
    per_index, max_failed = spec.get("backoffLimitPerIndex"), as_int(spec.get("maxFailedIndexes"))
    if max_failed is not None and per_index is None:
        found.append(Violation(join(path, "backoffLimitPerIndex"), "Required value: when maxFailedIndexes is specified"))
    mode = spec.get("completionMode")
    if mode is not None and mode not in ("NonIndexed", "Indexed"):
        found.append(Violation(join(path, "completionMode"), f"Unsupported value: {mode!r}: supported values: "
                                                             f"\"NonIndexed\", \"Indexed\""))
    if mode == "Indexed":
        if completions is None:
            found.append(Violation(join(path, "completions"), "Required value: when completion mode is Indexed"))
        if parallelism is not None and parallelism > MAX_PARALLELISM_INDEXED:
            found.append(Violation(join(path, "parallelism"), f"Invalid value: {parallelism}: must be less than or "
                                   f"equal to {MAX_PARALLELISM_INDEXED} when completion mode is Indexed"))
        if completions is not None and max_failed is not None and max_failed > completions:
            found.append(Violation(join(path, "maxFailedIndexes"), f"Invalid value: {max_failed}: must be less "
                                                                   f"than or equal to completions"))
        if max_failed is not None and max_failed > MAX_FAILED_INDEXES:
            found.append(Violation(join(path, "maxFailedIndexes"), f"Invalid value: {max_failed}: must be less "
                                                                   f"than or equal to {MAX_FAILED_INDEXES}"))
        if completions is not None and completions > COMPLETIONS_SOFT_LIMIT and per_index is not None:
            found += _high_completions(parallelism, max_failed, path)
    else:
        for key in ("backoffLimitPerIndex", "maxFailedIndexes"):
            if spec.get(key) is not None:
                found.append(Violation(join(path, key), f"Invalid value: {spec[key]}: requires indexed completion "
                                                        f"mode"))
    failure_policy = spec.get("podFailurePolicy")
    pod = as_dict(as_dict(spec.get("template")).get("spec"))
    if failure_policy is not None:
        found += _pod_failure_policy_problems(as_dict(failure_policy), spec, pod, join(path, "podFailurePolicy"))
    if spec.get("successPolicy") is not None and mode != "Indexed":
        found.append(Violation(join(path, "successPolicy"), "Invalid value: requires indexed completion mode"))
    elif spec.get("successPolicy") is not None:
        found += _success_policy_problems(as_dict(spec["successPolicy"]), completions or 0, join(path, "successPolicy"))
    found += _managed_by_problems(spec.get("managedBy"), join(path, "managedBy"))
    if spec.get("selector") is not None and spec.get("manualSelector") is not True:
        # `validateGeneratedSelector`: the selector must match the controller-uid the API server gives the Job
        found.append(Violation(join(path, "selector"), "Invalid value: `selector` not auto-generated (set "
                                                       "manualSelector: true, or leave the selector out)"))
    replacement = spec.get("podReplacementPolicy")
    if replacement is not None:
        allowed = ("Failed",) if failure_policy is not None else POD_REPLACEMENT_POLICIES
        if replacement not in allowed:
            found.append(Violation(join(path, "podReplacementPolicy"), f"Unsupported value: {replacement!r}: "
                                   f"supported values: {', '.join(repr(a) for a in allowed)}"))
    found += pod_spec_problems(pod, join(path, "template.spec"), claims)
    restart = pod.get("restartPolicy")
    restart_path = join(path, "template.spec.restartPolicy")
    if restart in (None, "", "Always"):
        found.append(Violation(restart_path, f"Required value: valid values: \"OnFailure\", \"Never\" "
                                             f"({restart!r} given)"))
    elif restart not in ("OnFailure", "Never"):
        found.append(Violation(restart_path, f"Unsupported value: {restart!r}: supported values: \"OnFailure\", "
                                             f"\"Never\""))
    elif failure_policy is not None and restart != "Never":
        found.append(Violation(restart_path, f"Invalid value: {restart!r}: only \"Never\" is supported when "
                                             f"podFailurePolicy is specified"))
    return found


def _pod_failure_policy_problems(policy: dict, spec: dict, pod: dict, path: str) -> list[Violation]:
    """`validatePodFailurePolicy` and `validatePodFailurePolicyRule(OnExitCodes)`."""
    rules = as_list(policy.get("rules"))
    found = []
    if len(rules) > MAX_POD_FAILURE_RULES:
        found.append(Violation(join(path, "rules"), f"Too many: {len(rules)}: must have at most "
                                                    f"{MAX_POD_FAILURE_RULES} items"))
    names = {str(as_dict(c).get("name")) for c in as_list(pod.get("containers")) + as_list(pod.get("initContainers"))}
    for i, rule in enumerate(rules):
        rule, rule_path = as_dict(rule), join(join(path, "rules"), i)
        action = rule.get("action")
        if not action:
            found.append(Violation(join(rule_path, "action"), f"Required value: valid values: {POD_FAILURE_ACTIONS}"))
        elif action == "FailIndex" and spec.get("backoffLimitPerIndex") is None:
            found.append(Violation(join(rule_path, "action"), "Invalid value: \"FailIndex\": requires the "
                                                              "backoffLimitPerIndex to be set"))
        elif action not in POD_FAILURE_ACTIONS:
            found.append(Violation(join(rule_path, "action"), f"Unsupported value: {action!r}"))
        exit_codes, conditions = rule.get("onExitCodes"), as_list(rule.get("onPodConditions"))
        if exit_codes is not None and conditions:
            found.append(Violation(rule_path, "specifying both OnExitCodes and OnPodConditions is not supported"))
        if exit_codes is None and not conditions:
            found.append(Violation(rule_path, "specifying one of OnExitCodes and OnPodConditions is required"))
        if exit_codes is not None:
            found += _exit_code_problems(as_dict(exit_codes), names, join(rule_path, "onExitCodes"))
        found += _pod_condition_problems(conditions, join(rule_path, "onPodConditions"))
    return found


def _pod_condition_problems(patterns: list, path: str) -> list[Violation]:
    """`validatePodFailurePolicyRuleOnPodConditions`."""
    found = []
    if len(patterns) > MAX_ON_POD_CONDITIONS:
        found.append(Violation(path, f"Too many: {len(patterns)}: must have at most {MAX_ON_POD_CONDITIONS} items"))
    for j, pattern in enumerate(patterns):
        pattern, pattern_path = as_dict(pattern), join(path, j)
        kind = str(pattern.get("type") or "")
        found += [Violation(join(pattern_path, "type"), f"Invalid value: {kind!r}: {p}")
                  for p in identifiers.qualified_name(kind)]
        status = pattern.get("status")
        if not status:
            found.append(Violation(join(pattern_path, "status"), f"Required value: valid values: {POD_CONDITION_STATUSES}"))
        elif status not in POD_CONDITION_STATUSES:
            found.append(Violation(join(pattern_path, "status"), f"Unsupported value: {status!r}: supported values: "
                                                                 f"{', '.join(repr(s) for s in POD_CONDITION_STATUSES)}"))
    return found


def _success_policy_problems(policy: dict, completions: int, path: str) -> list[Violation]:
    """`validateSuccessPolicy` and `validateSuccessPolicyRule` (an Indexed Job's)."""
    rules, rules_path = as_list(policy.get("rules")), join(path, "rules")
    found = []
    if not rules:
        found.append(Violation(rules_path, "Required value: at least one rules must be specified when the "
                                           "successPolicy is specified"))
    if len(rules) > MAX_SUCCESS_RULES:
        found.append(Violation(rules_path, f"Too many: {len(rules)}: must have at most {MAX_SUCCESS_RULES} items"))
    for i, rule in enumerate(rules):
        rule, rule_path = as_dict(rule), join(rules_path, i)
        indexes, count = rule.get("succeededIndexes"), as_int(rule.get("succeededCount"))
        if indexes is None and rule.get("succeededCount") is None:
            found.append(Violation(rule_path, "Required value: at least one of succeededCount or succeededIndexes "
                                              "must be specified"))
        total = None
        if indexes is not None:
            if len(str(indexes)) > MAX_SUCCEEDED_INDEXES_CHARS:
                found.append(Violation(join(rule_path, "succeededIndexes"), f"Too long: may not be more than "
                                                                            f"{MAX_SUCCEEDED_INDEXES_CHARS} bytes"))
            total, problem = _indexes_total(str(indexes), completions)
            if problem:
                found.append(Violation(join(rule_path, "succeededIndexes"), f"Invalid value: {indexes!r}: error "
                                                                            f"parsing succeededIndexes: {problem}"))
        if count is not None:
            count_path = join(rule_path, "succeededCount")
            if count < 0:
                found.append(Violation(count_path, f"Invalid value: {count}: must be greater than or equal to 0"))
            if count > completions:
                found.append(Violation(count_path, f"Invalid value: {count}: must be less than or equal to "
                                                   f"{completions} (the number of specified completions)"))
            if total is not None and indexes is not None and count > total:
                found.append(Violation(count_path, f"Invalid value: {count}: must be less than or equal to {total} "
                                                   "(the number of indexes in the specified succeededIndexes field)"))
    return found


def _indexes_total(text: str, completions: int) -> tuple[int, str | None]:
    """`validateIndexesFormat`: "0,2-5" -> how many indexes, or the parse problem."""
    if not text:
        return 0, None
    total, last = 0, None
    for interval in text.split(","):
        parts = interval.split("-")
        if len(parts) > 2:
            return 0, f"the fragment {interval!r} violates the requirement that an index interval can have at most two parts"
        bounds = []
        for part in parts:
            if not part.strip().lstrip("+").isdigit():
                return 0, f"cannot convert string to integer for index: {part!r}"
            if int(part) >= completions:
                return 0, f"too large index: {part!r}"
            bounds.append(int(part))
        low, high = bounds[0], bounds[-1]
        if high < low:
            return 0, f"non-increasing order, previous: {low}, current: {high}"
        if last is not None and last >= low:
            return 0, f"non-increasing order, previous: {last}, current: {low}"
        total, last = total + high - low + 1, high
    return total, None


def _managed_by_problems(manager: object, path: str) -> list[Violation]:
    if manager is None:
        return []
    text = str(manager)
    found = [Violation(path, f"Invalid value: {text!r}: {p}") for p in identifiers.domain_prefixed_path(text)]
    if len(text) > MAX_MANAGED_BY:
        found.append(Violation(path, f"Too long: may not be more than {MAX_MANAGED_BY} bytes"))
    return found


def _high_completions(parallelism: int | None, max_failed: int | None, path: str) -> list[Violation]:
    """Above `completionsSoftLimit` completions with backoffLimitPerIndex."""
    why = f"when completions are above {COMPLETIONS_SOFT_LIMIT} and used with backoff limit per index"
    found = []
    if max_failed is None:
        found.append(Violation(join(path, "maxFailedIndexes"), f"Required value: must be specified when completions "
                                                               f"is above {COMPLETIONS_SOFT_LIMIT}"))
    for key, value in (("parallelism", parallelism), ("maxFailedIndexes", max_failed)):
        if value is not None and value > HIGH_COMPLETIONS_LIMIT:
            found.append(Violation(join(path, key), f"Invalid value: {value}: must be less than or equal to "
                                                    f"{HIGH_COMPLETIONS_LIMIT} {why}"))
    return found


def _exit_code_problems(codes: dict, names: set, path: str) -> list[Violation]:
    found = []
    operator = codes.get("operator")
    if operator not in ("In", "NotIn"):
        found.append(Violation(join(path, "operator"), f"Unsupported value: {operator!r}: supported values: "
                                                       f"\"In\", \"NotIn\""))
    container = codes.get("containerName")
    if container is not None and str(container) not in names:
        found.append(Violation(join(path, "containerName"), f"Invalid value: {container!r}: must be one of the "
                                                            f"container or initContainer names in the pod template"))
    values = [v for v in as_list(codes.get("values")) if as_int(v) is not None]
    if not values:
        found.append(Violation(join(path, "values"), "Invalid value: at least one value is required"))
    elif len(values) > MAX_EXIT_CODE_VALUES:
        found.append(Violation(join(path, "values"), f"Too many: {len(values)}: must have at most "
                                                     f"{MAX_EXIT_CODE_VALUES} items"))
    if operator == "In" and 0 in values:
        found.append(Violation(join(path, "values"), "Invalid value: 0: must not be 0 for the In operator"))
    if len(set(values)) != len(values):
        found.append(Violation(join(path, "values"), "Duplicate value"))
    if values != sorted(values):
        found.append(Violation(join(path, "values"), "Invalid value: must be ordered"))
    return found


def pod_spec_problems(pod: dict, path: str, claims: AbstractSet[str] = frozenset()) -> list[Violation]:
    """Container names (required, DNS-1123 labels, unique across init and regular containers: two
    containers of one name pass the JobSet webhook and fail every Job creation), images, env names,
    init-container restart policies, volume names, and mounts of volumes that exist."""
    found = []
    seen: dict[str, str] = {}
    volumes = set(claims)
    for v, volume in enumerate(as_list(pod.get("volumes"))):
        name = str(as_dict(volume).get("name", ""))
        found += [Violation(join(join(join(path, "volumes"), v), "name"), f"Invalid value: {name!r}: {p}")
                  for p in identifiers.dns1123_label(name)]
        volumes.add(name)
    if not as_list(pod.get("containers")):
        found.append(Violation(join(path, "containers"), "Required value"))
    for kind in ("initContainers", "containers"):
        for c, box in enumerate(as_list(pod.get(kind))):
            box, box_path = as_dict(box), join(join(path, kind), c)
            name = str(box.get("name", ""))
            if not name:
                found.append(Violation(join(box_path, "name"), "Required value"))
            else:
                found += [Violation(join(box_path, "name"), f"Invalid value: {name!r}: {p}")
                          for p in identifiers.dns1123_label(name)]
            if name and name in seen:
                found.append(Violation(join(box_path, "name"), f"Duplicate value: {name!r} (also {seen[name]})"))
            seen.setdefault(name, box_path)
            found += _image_and_env_problems(box, box_path)
            restart = box.get("restartPolicy")
            if restart is not None and kind == "initContainers" and restart != "Always":
                found.append(Violation(join(box_path, "restartPolicy"), f"Unsupported value: {restart!r}: "
                                                                        f"supported values: \"Always\""))
            for m, mount in enumerate(as_list(box.get("volumeMounts"))):
                mount_name = as_dict(mount).get("name")
                if str(mount_name) not in volumes:
                    found.append(Violation(join(join(join(box_path, "volumeMounts"), m), "name"),
                                           f"Not found: {mount_name!r}"))
    return found


ENV_NAME_MESSAGE = "a valid environment variable name must consist only of printable ASCII characters other than '='"


def _image_and_env_problems(box: dict, path: str) -> list[Violation]:
    """`validateContainerCommon` (image required), `validateContainerOnlyForPod` (no whitespace around the
    image: the Job admits it, its pods are refused) and `ValidateEnv`/`validateEnvFrom` with
    RelaxedEnvironmentVariableValidation, GA and locked on since Kubernetes 1.34 (`IsRelaxedEnvVarName`)."""
    found = []
    image = box.get("image")
    if not image:
        found.append(Violation(join(path, "image"), "Required value"))
    elif str(image) != str(image).strip():
        found.append(Violation(join(path, "image"), f"Invalid value: {image!r}: must not have leading or trailing "
                                                    "whitespace"))
    for e, env in enumerate(as_list(box.get("env"))):
        name, name_path = str(as_dict(env).get("name") or ""), join(join(join(path, "env"), e), "name")
        if not name:
            found.append(Violation(name_path, "Required value"))
        elif not _relaxed_env_name(name):
            found.append(Violation(name_path, f"Invalid value: {name!r}: {ENV_NAME_MESSAGE}"))
    for e, source in enumerate(as_list(box.get("envFrom"))):
        prefix = str(as_dict(source).get("prefix") or "")
        if prefix and not _relaxed_env_name(prefix):
            found.append(Violation(join(join(join(path, "envFrom"), e), "prefix"),
                                   f"Invalid value: {prefix!r}: {ENV_NAME_MESSAGE}"))
    return found


def _relaxed_env_name(name: str) -> bool:
    return all(" " <= ch <= "~" and ch != "=" for ch in name)
