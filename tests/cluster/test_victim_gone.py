"""#52 M3: never name a survivor. A force-deleted pod leaves the API at once; its group's other slices stop
with 75, the trainer's word for a peer's loss. For a sample or two the API then shows only the survivors'
75s, and --why named slice 0, a survivor, as the slice lost. A 75 is never the victim of a stopped group:
the victim is said to be gone from the API (elxpk/cluster/records/lost_slice.py VICTIM_GONE) unless a
source that saw it (a watch's memory of its pod) names it.

The pods are the incident story's (tests/cluster/incidents_corpus/plain_degraded.json, the real controllers'
objects: slice 0's pod 0 exited 75, its other VMs and slice 1 running). The group stop is that stage's next
step as the story plays it (slice 0's other VMs exit 75 in turn: their recorded 75 copied to them), and slice
1's pods force-deleted: gone from the list, as from the API.
"""

from __future__ import annotations

import copy
import json

import pytest

from elxpk.cluster.records.lost_slice import DELETED, FAILED, LOST_VM, SLICE_GONE, VICTIM_GONE, lost_slice
from elxpk_contract.exit_codes import SLICE_LOST, TrainerStopped
from tests.cluster.captured import load, seed_stage
from tests.cluster.conftest import run_cli
from tests.cluster.test_why_recovery import LOST, trainer_ended

SLICE = "jobset.sigs.k8s.io/job-index"
VM = "batch.kubernetes.io/job-completion-index"


@pytest.fixture(autouse=True)
def wide_terminal(monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")


def _slice(pod: dict) -> str:
    return pod["metadata"]["labels"][SLICE]


def group_stopped() -> tuple[list[dict], list[dict]]:
    """(the pods the API lists, slice 1's pods as a watch last saw them): slice 0's four VMs stopped with 75
    (its Pending replacement of VM 0 stays), slice 1's pods force-deleted."""
    pods = copy.deepcopy(load("plain_degraded")["pods"])
    stopped = next(p for p in pods if p["status"].get("phase") == "Failed")
    assert _slice(stopped) == "0" and stopped["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 75
    for pod in pods:
        if _slice(pod) == "0" and pod["status"].get("phase") == "Running":
            pod["status"] = copy.deepcopy(stopped["status"])
    victims = [p for p in pods if _slice(p) == "1"]
    for pod in victims:  # the last the watch saw of them: being force-deleted
        pod["metadata"].update(deletionTimestamp="2026-12-01T21:56:02Z", deletionGracePeriodSeconds=0)
    return [p for p in pods if _slice(p) != "1"], victims


def test_a_lone_75_of_a_slice_that_runs_on_is_that_slices_loss():
    """As recorded: one VM's 75, the rest of its slice running: the only trace of slice 0's loss."""
    fault = lost_slice(load("plain_degraded")["pods"])
    assert fault is not None and (fault.slice, fault.cause, fault.victim_known) == (0, SLICE_GONE, True)


def test_a_stopped_groups_75s_never_name_a_survivor():
    listed, _ = group_stopped()
    fault = lost_slice(listed)
    assert fault is not None
    assert (fault.cause, fault.slice, fault.survivors) == (VICTIM_GONE, None, (0,))
    assert not fault.victim_known and not fault.whole_workload  # not Kueue's whole-workload fault either
    assert fault.text() == f"a slice {VICTIM_GONE} (the rest of its group stopped with it, exit 75)"
    assert fault.time is not None  # dated by the first survivor's stop


def test_a_slices_75s_while_another_slice_ran_on_are_its_own_loss():
    """A group stops together, every survivor with 75: slice 0 stopping with 75 while slice 1 still ran (its
    pods deleted only later, by the JobSet restart, a graceful delete) is slice 0's own failure, not a group's
    stop. The restart's deletes of slice 1 come after it: slice 1 is no victim (the real cluster's notify
    test: slice-lost named the restart's casualty before this)."""
    listed, victims = group_stopped()
    from datetime import datetime, timedelta

    stopped_at = max(datetime.fromisoformat(p["status"]["containerStatuses"][0]["state"]["terminated"]["finishedAt"]
                                            .replace("Z", "+00:00")) for p in listed if p["status"].get("phase") == "Failed")
    for pod in victims:  # asked 5 s after the last 75, with a grace of 30 s: gone by 35 s after it
        gone_by = stopped_at + timedelta(seconds=35)
        pod["metadata"].update(deletionTimestamp=gone_by.strftime("%Y-%m-%dT%H:%M:%SZ"), deletionGracePeriodSeconds=30)
    fault = lost_slice(listed + victims)
    assert fault is not None and (fault.slice, fault.cause) == (0, SLICE_GONE), fault
    # the same deletes asked before the 75s: slice 1 went first, and slice 0's 75s are its survivors'
    for pod in victims:
        pod["metadata"].update(deletionTimestamp="2026-12-01T00:00:30Z", deletionGracePeriodSeconds=30)
    before = lost_slice(listed + victims)
    assert before is not None and (before.slice, before.cause) == (1, DELETED), before


def test_the_watchs_memory_of_the_victims_pod_names_it():
    listed, victims = group_stopped()
    fault = lost_slice(listed, remembered=victims)
    assert fault is not None and (fault.slice, fault.cause) == (1, LOST_VM)
    # a remembered pod the API still lists is the API's, as it is now
    assert lost_slice(listed, remembered=[p for p in listed if _slice(p) == "0"]).cause == VICTIM_GONE


def test_why_says_the_victim_is_gone_not_that_slice_0_was_lost(fake, capsys, k, tmp_path):
    """`status --why` as the operator ran it right after the force delete: recovering, from a slice whose pod
    is gone; slice 0, which stopped with its group, is never the slice lost."""
    name = seed_stage(fake, "plain_degraded", tmp_path)
    listed, victims = group_stopped()
    for pod in victims:
        fake.store.delete(("", "pods"), "default", pod["metadata"]["name"])
    for pod in listed:
        fake.store.put(("", "pods"), pod)
    trainer_ended(tmp_path, TrainerStopped(SLICE_LOST, LOST))
    code, out, err = run_cli(capsys, "workload", "status", name, "--why", "-o", "json", *k)
    assert code == 0, err
    reasons = json.loads(out)["why"]
    assert reasons[0]["cause"] == "recovering", reasons
    assert f"after a slice {VICTIM_GONE}" in reasons[0]["text"], reasons[0]["text"]
    assert "slice 0 lost" not in reasons[0]["text"] and "after slice 0" not in reasons[0]["text"]


RESTART_AT = "2026-12-01T21:56:05Z"  # when the JobSet deleted the attempt's Jobs, after slice 1's force delete


def restarted_after_a_force_delete() -> tuple[list[dict], list[dict]]:
    """(the pods the API lists, the Jobs) of the plain story once slice 1's pods were force-deleted (gone at
    once) and the JobSet's restart deleted the attempt's Jobs: in the foreground, so they stay listed, deleting,
    and the garbage collector then deleted slice 0's pods with their grace. Two of slice 0's VMs exited 77 from
    that delete's SIGTERM, two still run; none heard of slice 1's loss first (no 75). CI's replay sampled this."""
    objects = copy.deepcopy(load("plain"))
    jobs = objects["jobs"]
    for job in jobs:
        job["metadata"].update(deletionTimestamp=RESTART_AT, deletionGracePeriodSeconds=0,
                               finalizers=["foregroundDeletion"])
    pods = [p for p in objects["pods"] if _slice(p) == "0"]
    for n, pod in enumerate(pods):
        pod["metadata"].update(deletionTimestamp="2026-12-01T21:56:35Z", deletionGracePeriodSeconds=30)
        if n < 2:
            pod["status"]["phase"] = "Failed"
            pod["status"]["containerStatuses"][0]["state"] = {"terminated": {
                "exitCode": 77, "reason": "Error", "startedAt": "2026-12-01T21:50:00Z",
                "finishedAt": "2026-12-01T21:56:07Z"}}
    return pods, jobs


def test_pods_the_jobset_restart_deleted_are_no_victim():
    """CI's operator replay: right after slice 1's force delete, one `--why` sample said "after slice 0
    deleted": slice 1's pod was gone, and the restart's graceful deletes of slice 0 were all that was left.
    A pod deleted by its Job's deletion has no fault of its own."""
    pods, jobs = restarted_after_a_force_delete()
    fault = lost_slice(pods)  # without the Jobs, the restart's delete looks like a victim's
    assert fault is not None and (fault.slice, fault.cause) == (0, DELETED)
    assert lost_slice(pods, jobs=jobs) is None
    # what a pod did before its Job was deleted still counts: an exit of its own, and a 75 stays a survivor's
    failed = copy.deepcopy(pods)
    failed[2]["status"]["containerStatuses"][0]["state"] = {"terminated": {
        "exitCode": 137, "reason": "Error", "startedAt": "2026-12-01T21:50:00Z", "finishedAt": "2026-12-01T21:56:01Z"}}
    fault = lost_slice(failed, jobs=jobs)
    assert fault is not None and (fault.slice, fault.cause) == (0, FAILED), fault
    stopped = copy.deepcopy(pods)
    for pod in stopped:
        pod["status"]["containerStatuses"][0]["state"] = {"terminated": {
            "exitCode": 75, "reason": "Error", "startedAt": "2026-12-01T21:50:00Z", "finishedAt": "2026-12-01T21:56:03Z"}}
    fault = lost_slice(stopped, jobs=jobs)
    assert fault is not None and (fault.cause, fault.survivors) == (VICTIM_GONE, (0,)), fault
    # the victim's own delete, asked before its Job's, is still the fault whatever the restart deleted after
    _, victims = group_stopped()
    for pod in victims:
        pod["metadata"].update(deletionTimestamp="2026-12-01T21:56:30Z", deletionGracePeriodSeconds=30)
    fault = lost_slice(pods + victims, jobs=jobs)
    assert fault is not None and (fault.slice, fault.cause) == (1, DELETED), fault
    # the watch's memory of the force-deleted pod names it
    _, remembered = group_stopped()
    fault = lost_slice(pods, remembered=remembered, jobs=jobs)
    assert fault is not None and (fault.slice, fault.cause) == (1, LOST_VM), fault


def test_why_after_the_restarts_deletes_quotes_the_trainer_not_slice_0(fake, capsys, k, tmp_path):
    """`status --why` on those objects: recovering, in the trainer's words (which name slice 1), slice 0
    never named as lost."""
    name = seed_stage(fake, "plain", tmp_path)
    pods, jobs = restarted_after_a_force_delete()
    for pod in load("plain")["pods"]:
        fake.store.delete(("", "pods"), "default", pod["metadata"]["name"])
    for obj, kind in [*((p, ("", "pods")) for p in pods), *((j, ("batch", "jobs")) for j in jobs)]:
        fake.store.put(kind, obj)
    trainer_ended(tmp_path, TrainerStopped(SLICE_LOST, LOST))
    code, out, err = run_cli(capsys, "workload", "status", name, "--why", "-o", "json", *k)
    assert code == 0, err
    reasons = json.loads(out)["why"]
    assert reasons[0]["cause"] == "recovering", reasons
    assert LOST in reasons[0]["text"], reasons[0]["text"]
    assert "slice 0 deleted" not in reasons[0]["text"] and "after slice 0" not in reasons[0]["text"]
