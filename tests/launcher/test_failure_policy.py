"""Failure classification rendered from the exit-code table, and what the cluster does with it.

The cluster side is the policy evaluator (elxpk/create/failure_policy.py: the Job controller's matchPodFailurePolicy
and backoffLimit, JobSet's failure policy) applied to the rendered manifest, never to a hand-written policy.
"""

from __future__ import annotations

import copy

import pytest

from elxpk.admission import check_jobset
from elxpk.create.checks import parse_create
from elxpk.create.failure_policy import (
    XPK_RESTART_CODES,
    failed_pod,
    job_outcome,
    jobset_action,
    match_pod_failure_policy,
)
from elxpk.create.render import render
from elxpk.errors import UsageError
from elxpk_contract.exit_codes import (
    EXIT_CODES,
    PREEMPTED,
    SLICE_LOST,
    STALLED,
    UNCLASSIFIED,
    user_error_codes,
)

BASE = dict(workload="run-1", tpu_type="v5litepod-16", num_slices="3", command="python3 train.py")


def jobset(**flags) -> dict:
    spec = parse_create(**{**BASE, **flags})[0]
    (obj,) = render(spec).objects
    return obj


def job(obj: dict, name: str) -> dict:
    return next(r for r in obj["spec"]["replicatedJobs"] if r["name"] == name)["template"]["spec"]


def run_group(obj: dict, name: str, container: str, failures: list[tuple[int, bool]]) -> tuple[str, int]:
    """Feed `failures` (exit code, disrupted) to one replicatedJob's Job, restarting the group as the JobSet
    decides: ("Running"|"Failed", JobSet restarts spent)."""
    spec, policy, restarts, pending = job(obj, name), obj["spec"]["failurePolicy"], 0, []
    for code, disrupted in failures:
        pending.append(failed_pod(container, code, disrupted=disrupted))
        outcome = job_outcome(spec, pending)
        if not outcome.failed:
            continue
        action = jobset_action(policy, name, outcome.reason, restarts)
        if action == "FailJobSet":
            return "Failed", restarts
        restarts, pending = restarts + 1, []  # Recreate: every Job anew, the counts with them
    return "Running", restarts


class TestNoPathways:
    def test_user_error_fails_the_workload_in_one_attempt(self):
        obj = jobset(no_pathways=True, max_restarts="5")
        for code in user_error_codes():
            assert run_group(obj, "slice-job", "jax-tpu", [(code, False)]) == ("Failed", 0)

    def test_a_disruption_does_not_consume_the_budget(self):
        obj = jobset(no_pathways=True, max_restarts="1")
        # Preemptions and evictions, whatever the container's code, and the trainer's own 77 after SIGTERM.
        failures = [(143, True), (137, True), (PREEMPTED.code, False), (PREEMPTED.code, True)] * 5
        assert run_group(obj, "slice-job", "jax-tpu", failures) == ("Running", 0)
        outcome = job_outcome(job(obj, "slice-job"), [failed_pod("jax-tpu", c, disrupted=d) for c, d in failures])
        assert (outcome.failed, outcome.counted, outcome.ignored) == (False, 0, len(failures))

    def test_infrastructure_failures_restart_until_the_budget_is_spent(self):
        obj = jobset(no_pathways=True, max_restarts="2")
        failures = [(SLICE_LOST.code, False), (STALLED.code, False), (UNCLASSIFIED.code, False)]
        assert run_group(obj, "slice-job", "jax-tpu", failures) == ("Failed", 2)
        assert run_group(obj, "slice-job", "jax-tpu", failures[:2]) == ("Running", 2)

    def test_every_code_of_the_table_gets_its_action(self):
        policy = job(jobset(no_pathways=True), "slice-job")["podFailurePolicy"]
        for code in (c for c in EXIT_CODES if c.code):
            assert match_pod_failure_policy(policy, failed_pod("jax-tpu", code.code)) == code.action, code.name
        assert match_pod_failure_policy(policy, failed_pod("sidecar", 70)) == "Count"  # only the user container

    def test_restart_policy_never_and_admission_pass(self):
        obj = jobset(no_pathways=True)
        assert job(obj, "slice-job")["template"]["spec"]["restartPolicy"] == "Never"
        assert check_jobset(obj) == []
        broken = copy.deepcopy(obj)
        job(broken, "slice-job")["template"]["spec"]["restartPolicy"] = "OnFailure"
        assert any("only \"Never\" is supported when podFailurePolicy" in v.message for v in check_jobset(broken))

    def test_jobset_rule_names_pass_the_webhook(self):
        obj = jobset(no_pathways=True)
        names = [r["name"] for r in obj["spec"]["failurePolicy"]["rules"]]
        assert names == ["failOnUserError", "restartOnInfrastructure"] and check_jobset(obj) == []
        bad = copy.deepcopy(obj)
        bad["spec"]["failurePolicy"]["rules"][0]["name"] = "fail-on-user-error"
        assert any("invalid failure policy rule name" in v.message for v in check_jobset(bad))


class TestPathways:
    def test_head_fails_at_once_on_a_user_error(self):
        obj = jobset(max_restarts="3")
        head = job(obj, "pathways-head")
        assert head["template"]["spec"]["restartPolicy"] == "Never" and "podFailurePolicy" in head
        assert run_group(obj, "pathways-head", "jax-tpu", [(70, False)]) == ("Failed", 0)
        assert run_group(obj, "pathways-head", "jax-tpu", [(75, False), (143, True)]) == ("Running", 1)
        assert check_jobset(obj) == []

    def test_workers_restart_in_place_without_a_policy(self):
        obj = jobset(elastic_slices="1", max_slice_restarts="2")
        worker = job(obj, "worker")
        assert worker["template"]["spec"]["restartPolicy"] == "OnFailure" and "podFailurePolicy" not in worker
        assert worker["backoffLimit"] == 2 * 4  # every restart counts, disruption or not
        # The JobSet's user-error rule targets the head only: a worker's Job failing restarts the group.
        assert jobset_action(obj["spec"]["failurePolicy"], "worker", "BackoffLimitExceeded", 0) == "FailJobSet"
        assert jobset_action({**obj["spec"]["failurePolicy"], "maxRestarts": 1}, "worker",
                             "BackoffLimitExceeded", 0) == "RestartJobSet"

    def test_headless_has_no_classification(self):
        obj = jobset(command=None, headless=True)
        assert "rules" not in obj["spec"]["failurePolicy"]
        assert "podFailurePolicy" not in job(obj, "pathways-head")


class TestRestartOnExitCodes:
    def test_xpk_rule_restarts_the_listed_codes_and_fails_the_rest(self):
        obj = jobset(no_pathways=True, max_restarts="5", restart_on_exit_codes="3, 70,9-10")
        policy = job(obj, "slice-job")["podFailurePolicy"]
        last = policy["rules"][-1]["onExitCodes"]
        assert last["operator"] == "NotIn" and {3, 9, 10, 70, 42, 137, 255} <= set(last["values"])
        assert last["values"] == sorted(set(last["values"])) and set(XPK_RESTART_CODES) <= set(last["values"])
        assert match_pod_failure_policy(policy, failed_pod("jax-tpu", 70)) == "Count"  # listed: restarted
        assert match_pod_failure_policy(policy, failed_pod("jax-tpu", 2)) == "FailJob"
        assert match_pod_failure_policy(policy, failed_pod("jax-tpu", 5)) == "FailJob"  # not listed
        assert match_pod_failure_policy(policy, failed_pod("jax-tpu", 77)) == "Ignore"
        assert match_pod_failure_policy(policy, failed_pod("jax-tpu", 75)) == "Count"
        assert check_jobset(obj) == []

    @pytest.mark.parametrize("raw", ["x", "0", "256", "5-3", "1,,2", "-4"])
    def test_bad_codes_are_refused(self, raw):
        with pytest.raises(UsageError) as info:
            jobset(restart_on_exit_codes=raw)
        (line,) = info.value.messages
        assert line.startswith(f"--restart-on-exit-codes {raw!r}") and "e.g. 1,75-77" in line

    def test_headless_refuses_it(self):
        with pytest.raises(UsageError) as info:
            jobset(command=None, headless=True, restart_on_exit_codes="3")
        assert info.value.messages == ["--restart-on-exit-codes: a --headless workload has no user container "
                                       "whose exit code it could classify; drop it"]
