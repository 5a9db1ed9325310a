"""`elxpk workload events` (incidents, --record locally and on gs://, --watch), `status` (restarts by cause)
and `list` on the real Job, JobSet and Kueue controllers, run as the user runs them, over the one story of
tests/realcluster/incident_story.py (its docstring tells it; each test reads one stage)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import pytest

from elxpk.cluster.records.incident_log import read_recorded
from elxpk.cluster.records.status import parse_time
from tests.realcluster.incident_story import GAVE_UP, NAME, PLAIN, Story, run_story
from tools.testcluster.kubeapi import LocalCluster


@pytest.fixture(scope="module")
def story(testcluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Story]:
    with run_story(testcluster, tmp_path_factory) as played:
        yield played


def test_events_show_exits_and_warning_events(story: Story) -> None:
    stage = story.stages["ignored"]
    assert stage.out["events"].returncode == 0, stage.out["events"].stderr
    lines = stage.out["events"].stdout.splitlines()
    exit_line = next(line for line in lines if "exit 77/Error" in line and f"pod {story.first_pod} " in line)
    assert exit_line.split()[1:3] == ["exit", "infra"] and "preempted" in exit_line
    assert f"slice 0 pod {story.first_pod} node gke-testcluster-v5p-8-np-" in exit_line
    assert any("FailedMount" in line and "gcs-fuse" in line for line in lines)
    assert not any("other-pod" in line for line in lines)
    records = stage.json_lines("events.json")
    exit_record = next(r for r in records if r["kind"] == "exit" and r["pod"] == story.first_pod)
    assert (exit_record["exit_code"], exit_record["slice"], exit_record["pod"]) == (77, 0, story.first_pod)
    assert (exit_record["cause"], exit_record["message"]) == ("infra", "preempted")
    times = [parse_time(r["time"]) or 0.0 for r in records if r["time"]]
    assert times == sorted(times)  # oldest first (the API writes seconds, and microseconds in an eventTime)


def test_jobset_restart_is_an_incident_with_its_time(story: Story) -> None:
    records = story.stages["restarted"].json_lines("events.json")
    restart = next(r for r in records if r["kind"] == "jobset_restart")
    assert restart["message"].startswith(f"JobSet restart 1 of {NAME} (1 of 1 counted towards maxRestarts)")
    assert restart["time"] is not None
    # the failed Job of attempt 0 went with the restart (its pods too): the exit-77 pod is no longer seen
    assert not any(r["pod"] == story.first_pod for r in records)


def test_user_error_fails_and_the_first_failed_job_is_marked(story: Story) -> None:
    stage = story.stages["failed"]
    failed = [line for line in stage.out["events"].stdout.splitlines() if "job_failed" in line]
    assert len(failed) == 1 and "first failed Job" in failed[0] and f"{NAME}-slice-job-0" in failed[0], failed
    records = stage.json_lines("events.json")
    causes = {r["exit_code"]: (r["cause"], r["message"]) for r in records if r["kind"] == "exit"}
    assert causes[70] == ("user", "user_error"), causes
    job = next(r for r in records if r["kind"] == "job_failed")
    assert (job["cause"], job["reason"], job["slice"]) == ("user", "PodFailurePolicy", 0), job


def appended(first: subprocess.CompletedProcess, second: subprocess.CompletedProcess) -> int:
    """How many incidents two `events --record` runs showed, each counted once (a line per incident)."""
    for done in (first, second):
        assert done.returncode == 0, done.stderr
    return len(set(first.stdout.splitlines()) | set(second.stdout.splitlines()))


def test_record_appends_each_incident_once_and_keeps_what_went(story: Story) -> None:
    first = story.record_first.splitlines()
    assert len(first) == len(story.stages["ignored"].out["record"].stdout.splitlines()) >= 2  # exit, Event
    second = story.record.read_text().splitlines()
    assert second[: len(first)] == first  # what the first run wrote stays, in order
    assert len(second) == appended(story.stages["ignored"].out["record"], story.stages["restarted"].out["record"])
    assert [json.loads(line)["kind"] for line in second[len(first):]].count("jobset_restart") == 1
    ids = [json.loads(line)["id"] for line in second]
    assert len(set(ids)) == len(ids)
    assert any(json.loads(line)["pod"] == story.first_pod for line in second)  # gone from the cluster, recorded
    assert [r["id"] for r in read_recorded(str(story.record))] == ids


def test_record_on_gcs_through_the_cli(story: Story) -> None:
    recorded = [json.loads(line)["id"] for line in story.gcs_object.decode().splitlines()]
    assert len(set(recorded)) == len(recorded) == appended(
        story.stages["ignored"].out["record.gcs"], story.stages["restarted"].out["record.gcs"])


def test_unreachable_gcs_is_one_line(story: Story) -> None:
    done = story.stages["restarted"].out["record.unreachable"]
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert done.returncode == 1 and len(errors) == 1 and "cannot reach Cloud Storage" in errors[0], done.stderr
    assert "Traceback" not in done.stderr


def test_watch_on_a_finished_workload_prints_its_history_and_returns(story: Story) -> None:
    stage = story.stages["failed"]
    assert stage.out["watch"].returncode == 0, stage.out["watch"].stderr
    assert stage.out["watch"].stdout.splitlines() == stage.out["events"].stdout.splitlines()
    assert any("exit 70/Error" in line and "user_error" in line for line in stage.out["watch"].stdout.splitlines())


def test_status_splits_restarts_by_cause(story: Story) -> None:
    ignored = story.stages["ignored"]
    assert ignored.json("status.json")["restart_causes"] == {"infra": 2, "user": 0, "unknown": 0}
    assert "Restart causes   2 infra  (infra: disruption" in ignored.out["status"].stdout
    failed = story.stages["failed"]
    causes = failed.json("status.json")["restart_causes"]
    assert causes["user"] == 1, causes
    assert f"{causes['user']} user" in failed.out["status"].stdout


def test_kueue_eviction_is_an_incident(story: Story) -> None:
    records = story.stages["evicted"].json_lines("events.json")
    evictions = [r for r in records if r["kind"] == "kueue_eviction"]
    assert evictions and all(r["cause"] == "infra" for r in evictions), records
    assert evictions[0]["message"].startswith("Kueue Workload "), evictions


def test_list_marks_xpk_and_a_workload_outside_kueue(story: Story) -> None:
    plain = story.stages["plain"].json("status.json")
    assert (plain["state"], plain["worker_job"], plain["slices_total"], plain["head"], plain["admission"]) == (
        "Running", "slice-job", 2, None, None), plain
    listed = story.stages["plain"].out["list.json"]
    assert listed.returncode == 0, listed.stderr
    rows = {r["name"]: r for r in json.loads(listed.stdout)}
    assert rows[PLAIN]["created_by"] is None and rows[PLAIN]["state"] == "Running", rows[PLAIN]
    assert rows[NAME]["created_by"] == "elxpk", rows[NAME]  # xpk's labels, and elxpk's submission id


def test_status_names_jobset_restarts_a_failure_policy_rule_did_not_count(story: Story) -> None:
    done = story.stages["plain"].out["status.restarted"]
    assert done.returncode == 0, done.stderr
    assert "1 (maxRestarts 0: 0 counted, 0 left); 1 not counted (a failurePolicy rule" in done.stdout, done.stdout


def test_failures_after_the_last_step_are_failures_with_no_progress(story: Story) -> None:
    """`events`' closing lines: failures by cause, and "no progress since step S" from the trainer's record."""
    stage = story.stages["ignored"]
    # One incident per line. The two reads are moments apart on a live cluster, so the later -o json read
    # may hold an Event the table's read had not seen yet, never fewer.
    table = stage.out["events"].stdout.splitlines()
    assert table and all(line[:4].isascii() and line[:4].isdigit() for line in table), table
    assert len(table) <= len(stage.json_lines("events.json"))
    lines = stage.out["events"].stderr.splitlines()  # the summary is a note on stderr
    assert "# failures by cause: preempted 2" in lines, lines
    assert "# no progress since step 130: 2 preempted failures since the trainer's last completed step" in lines
    assert "failures by cause" not in stage.out["events.json"].stdout + stage.out["events.json"].stderr


def test_a_slice_spending_its_budget_is_degraded(story: Story) -> None:
    """backoffLimit 1 and one pod failed, its replacement Pending: the slice is restarting a pod."""
    status = story.stages["plain"].json("status.degraded")
    slice_0 = status["slices"][0]
    assert (status["state"], status["slices_healthy"], status["slices"][1]["state"]) == ("Degraded", 1, "Running")
    assert (slice_0["state"], slice_0["budget_used"], slice_0["budget_left"]) == ("Restarting", 1, 0), slice_0
    assert "slice 0 restarting (budget 1/1 used)" in status["message"], status


def test_why_says_recovering_and_gives_up_only_on_the_trainers_final_word(story: Story) -> None:
    """#43: a slice whose Job replaces its pod is recovering, named with its exit and no fix; a trainer record of
    a retryable stop (75) is never `trainer-stopped` nor "trainer failed"; one of 70 is, with the failed pod's
    own log as the command, runnable as printed."""
    degraded = story.stages["plain"].json("why.degraded")["why"]
    assert degraded[0]["cause"] == "recovering", degraded
    assert ("slice 0's Job replaces its failed pod (backoffLimit 1/1 used), after slice 0 lost (pod "
            f"{PLAIN}-slice-job-0-0-") in degraded[0]["text"] and "exit 75 slice_lost)" in degraded[0]["text"]
    assert degraded[0]["fix"].startswith("nothing to do")
    restarted = story.stages["restarted"].out["status"]
    assert "trainer stopped (failed, exit 75), the JobSet restarts it" in restarted.stdout, restarted.stdout
    assert "trainer failed" not in restarted.stdout
    why = story.stages["failed"].json("why")["why"]
    assert why[0]["cause"] == "trainer-stopped", why
    assert why[0]["text"] == f"the trainer gave up for good (exit 70 user_error): {GAVE_UP}"
    assert f"`elxpk workload logs {NAME} --slice 0 --vm 0`" in why[0]["fix"]
    assert not any("NAME" in r["fix"] or "--previous" in r["fix"] for r in degraded + why)


def test_restart_arithmetic_and_the_end(story: Story) -> None:
    restarted = story.stages["restarted"].json("status.json")
    assert (restarted["state"], restarted["restarts"], restarted["max_restarts"], restarted["restarts_left"]) == (
        "Running", 1, 2, 1), restarted
    assert all(s["pod_restarts"] == 0 and s["budget_used"] == 0 for s in restarted["slices"])  # fresh Jobs
    failed = story.stages["failed"].json("status.json")
    assert (failed["state"], failed["admission"]) == ("Failed", "Finished"), failed
