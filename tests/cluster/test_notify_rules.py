"""The alert rules (elxpk/notify/rules.py) on sequences of observations and incidents: each alert once per
occurrence, recovery timed from the first loss, lateness against the workload's own expected time."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from elxpk.cluster.records.incidents import Incident
from elxpk.notify.rules import Observation, Watchman


def _watchman(**kwargs) -> Watchman:
    return Watchman("train", "default", stuck_after_s=kwargs.pop("stuck_after_s", 600.0), **kwargs)


def _seen(*healthy: bool, state: str = "Running", **kwargs) -> Observation:
    return Observation(state=state, healthy=tuple(healthy), **kwargs)


def _loss(slice_index: int, kind: str = "exit", pod: str = "p") -> Incident:
    return Incident(f"{kind}-{slice_index}-{pod}", "2026-01-01T00:00:00Z", kind, "unknown", "Error",
                    slice=slice_index, pod=pod, exit_code=137 if kind == "exit" else None)


def kinds(alerts) -> list[str]:
    return [a.kind for a in alerts]


def test_one_loss_is_one_alert_however_many_incidents_and_recovery_is_timed_from_it():
    w = _watchman()
    assert kinds(w.observe(_seen(True, True), 0.0)) == []
    first = w.incident(_loss(1, "disruption"), 10.0)
    assert kinds(first) == ["slice-lost"] and first[0].incident["kind"] == "disruption"
    assert w.incident(_loss(1, "exit"), 11.0) == [] and w.incident(_loss(1, "exit", "p2"), 12.0) == []
    assert kinds(w.observe(_seen(True, False, state="Degraded"), 60.0)) == []
    done = w.observe(_seen(True, True), 130.0)
    assert kinds(done) == ["recovered"] and done[0].details["recovery_s"] == 120.0
    assert "2m00s after slice 1's loss" in done[0].summary and done[0].details["slice"] == 1
    assert kinds(w.incident(_loss(1), 200.0)) == ["slice-lost"]  # a new outage


def test_a_slice_seen_healthy_then_down_is_lost_without_an_incident():
    w = _watchman()
    w.observe(_seen(True, True), 0.0)
    assert kinds(w.observe(_seen(False, True, state="Degraded"), 60.0)) == ["slice-lost"]
    assert w.observe(_seen(False, True, state="Degraded"), 120.0) == []


def test_history_and_slices_never_healthy_raise_no_loss():
    w = _watchman()
    assert w.observe(_seen(False, False, state="Admitted"), 0.0) == []
    assert w.incident(_loss(0, "job_failed"), 1.0) == []  # not a loss kind
    assert w.incident(Incident("x", None, "exit", "user", "Error", exit_code=70), 1.0) == []  # the head


def test_recovery_late_against_the_workload_timeout_once_per_outage():
    w = _watchman()
    w.observe(_seen(True, True, elastic_timeout_s=300.0), 0.0)
    w.incident(_loss(0), 0.0)
    assert w.observe(_seen(False, True, state="Degraded", elastic_timeout_s=300.0), 299.0) == []
    late = w.observe(_seen(False, True, state="Degraded", elastic_timeout_s=300.0), 300.0)
    assert kinds(late) == ["recovery-late"] and late[0].details["slices"] == [0]
    assert w.observe(_seen(False, True, state="Degraded", elastic_timeout_s=300.0), 900.0) == []
    assert kinds(w.observe(_seen(True, True), 950.0)) == ["recovered"]
    flag = _watchman(recovery_within_s=30.0)  # --recovery-within wins over the workload's
    flag.observe(_seen(True, elastic_timeout_s=300.0), 0.0)
    flag.incident(_loss(0), 0.0)
    assert kinds(flag.observe(_seen(False, state="Restarting", elastic_timeout_s=300.0), 31.0)) == ["recovery-late"]


def test_budgets_at_80_percent_and_spent_once_each():
    w = _watchman()
    assert w.observe(_seen(True, restarts_counted=3, max_restarts=5), 0.0) == []
    at80 = w.observe(_seen(True, restarts_counted=4, max_restarts=5), 1.0)
    assert kinds(at80) == ["budget-80"] and "4 of 5 used, 1 left" in at80[0].summary
    assert w.observe(_seen(True, restarts_counted=4, max_restarts=5), 2.0) == []
    spent = w.observe(_seen(True, True, restarts_counted=5, max_restarts=5, slice_budgets=((4, 4), (0, 4))), 3.0)
    assert kinds(spent) == ["budget-spent", "budget-spent"]
    assert [a.details["budget"] for a in spent] == ["the JobSet's restarts", "slice 0's pod restarts"]
    assert w.observe(_seen(True, slice_budgets=((0, None),), max_restarts=0), 4.0) == []  # no budget: no alert


def test_the_end_is_one_alert_with_the_why_line():
    w = _watchman()
    end = w.observe(_seen(False, state="Failed", why="applying FailJobSet failure policy action"), 0.0)
    assert kinds(end) == ["failed"] and end[0].summary == "train: workload failed: applying FailJobSet failure policy action"
    assert w.observe(_seen(False, state="Failed"), 60.0) == []
    assert kinds(_watchman().observe(_seen(True, state="Succeeded"), 0.0)) == ["succeeded"]


def test_checkpoint_stale_once_per_last_saved_step():
    w = _watchman()
    stale = dict(saves_stopped=True, steps_done=400, checkpoint_step=100, checkpoint_period=100,
                 checkpoint_age_s=1800.0)
    alert = w.observe(_seen(True, **stale), 0.0)
    assert kinds(alert) == ["checkpoint-stale"] and "last checkpoint at step 100, 30m00s old" in alert[0].summary
    assert w.observe(_seen(True, **{**stale, "steps_done": 500}), 60.0) == []
    assert kinds(w.observe(_seen(True, **{**stale, "checkpoint_step": 200, "steps_done": 600}), 120.0)) == [
        "checkpoint-stale"]


def test_stuck_past_stuck_after_with_the_why_line_once_per_episode():
    w = _watchman(stuck_after_s=600.0)
    queued = dict(state="Queued", state_since=0.0, why="ClusterQueue cluster-queue: 0 of 4 TPU chips free")
    assert w.observe(_seen(False, **queued), 599.0) == []
    alert = w.observe(_seen(False, **queued), 600.0)
    assert kinds(alert) == ["stuck"] and alert[0].summary == (
        "train: Queued for 10m00s: ClusterQueue cluster-queue: 0 of 4 TPU chips free")
    assert w.observe(_seen(False, **queued), 1200.0) == []
    assert kinds(w.observe(_seen(False, **{**queued, "state": "Restarting", "state_since": 1300.0}), 2000.0)) == ["stuck"]


STATES = ("Queued", "Admitted", "Running", "Degraded", "Restarting", "Succeeded", "Failed")
steps = st.lists(st.one_of(
    st.tuples(st.just("incident"), st.integers(0, 2), st.sampled_from(["exit", "disruption", "evicted"])),
    st.tuples(st.just("observe"), st.lists(st.booleans(), min_size=3, max_size=3), st.sampled_from(STATES),
              st.integers(0, 6), st.integers(0, 3), st.booleans(), st.integers(0, 3))), max_size=40)


@settings(max_examples=200, deadline=None)
@given(steps)
def test_any_sequence_raises_each_once_only_alert_at_most_once_and_recoveries_follow_losses(sequence):
    w = _watchman(stuck_after_s=100.0, recovery_within_s=50.0)
    alerts = []
    for n, step in enumerate(sequence):
        now = n * 30.0
        if step[0] == "incident":
            alerts += w.incident(_loss(step[1], step[2], f"p{n}"), now)
        else:
            _, healthy, state, used, saved, stopped, since = step
            alerts += w.observe(_seen(*healthy, state=state, restarts_counted=used, max_restarts=5,
                                      saves_stopped=stopped, steps_done=1000, checkpoint_step=saved * 100,
                                      checkpoint_period=100, state_since=since * 100.0), now)
    once = [(a.kind, a.details.get("budget"), a.details.get("checkpoint_step"), a.details.get("state"))
            for a in alerts if a.kind in ("budget-80", "budget-spent", "failed", "succeeded", "checkpoint-stale")]
    assert len(once) == len(set(once))
    lost = recovered = late = 0
    for a in alerts:  # outages alternate: every recovered (and at most one late) follows a loss
        lost += a.kind == "slice-lost"
        recovered += a.kind == "recovered"
        late += a.kind == "recovery-late"
        assert recovered <= lost and late <= lost
    assert all(a.summary.startswith("train: ") and a.workload == "train" for a in alerts)


def _exit(slice_index: int, code: int, pod: str) -> Incident:
    return Incident(f"exit-{slice_index}-{pod}", "2026-01-01T00:00:00Z", "exit", "infra", "Error",
                    slice=slice_index, pod=pod, exit_code=code)


def test_one_kill_is_one_alert_naming_the_victim_not_its_casualties():
    """#43: slice 1 evicted, slice 0 stopped with its group (75), then the JobSet restarts every slice."""
    w = _watchman()
    w.observe(_seen(True, True), 0.0)
    assert w.incident(_exit(0, 75, "survivor"), 5.0) == []  # a casualty: no alert of its own
    lost = w.incident(_loss(1, "disruption", "victim"), 6.0)
    assert kinds(lost) == ["slice-lost"] and lost[0].details == {"slice": 1}
    assert w.observe(_seen(False, False, state="Restarting", fault="evicted: pod victim", fault_slice=1), 7.0) == []
    assert kinds(w.observe(_seen(True, True), 30.0)) == ["recovered"]


def test_a_group_restart_seen_only_in_a_snapshot_is_one_alert_for_the_pods_victim():
    """A force delete leaves no exit of the victim: both slices go down at once, and the pods name slice 1."""
    w = _watchman()
    w.observe(_seen(True, True), 0.0)
    assert w.incident(_exit(0, 75, "survivor"), 5.0) == []
    down = w.observe(_seen(False, False, state="Restarting", fault="lost its VM: pod v: force-deleted",
                           fault_slice=1), 6.0)
    assert kinds(down) == ["slice-lost"] and down[0].details == {"slice": 1}
    assert "slice 1 lost (lost its VM: pod v: force-deleted)" in down[0].summary


def test_a_survivors_75_is_never_the_victim_named():
    """#52 M3: slice 1 force-deleted (its pod gone from the API, no exit of it seen), slice 0 stopped with its
    group (75). The pods name no victim (lost_slice.VICTIM_GONE, slice 0 a survivor): the alert names slice 1,
    down and no survivor, never slice 0 whose 75 the watch saw."""
    w = _watchman()
    w.observe(_seen(True, True), 0.0)
    assert w.incident(_exit(0, 75, "survivor"), 5.0) == []
    gone = "lost, its pod gone from the API: the rest of its group stopped with it, exit 75"
    down = w.observe(_seen(False, False, state="Restarting", fault=gone, survivors=(0,)), 6.0)
    assert kinds(down) == ["slice-lost"] and down[0].details == {"slice": 1}
    done = w.observe(_seen(True, True), 40.0)
    assert kinds(done) == ["recovered"] and done[0].details["slice"] == 1


def test_with_only_survivors_down_the_alert_names_no_slice():
    """Slice 1's replacement already ready, slice 0 down after its 75: no slice left that is not a survivor,
    so the one alert says a slice was lost and names none."""
    w = _watchman()
    w.observe(_seen(True, True), 0.0)
    assert w.incident(_exit(0, 75, "survivor"), 5.0) == []
    gone = "lost, its pod gone from the API: the rest of its group stopped with it, exit 75"
    down = w.observe(_seen(False, True, state="Degraded", fault=gone, survivors=(0,)), 6.0)
    assert kinds(down) == ["slice-lost"] and down[0].details["slice"] is None
    assert "a slice lost, which one no source says" in down[0].summary and "slice 0 lost" not in down[0].summary
    assert w.observe(_seen(False, True, state="Degraded", fault=gone, survivors=(0,)), 7.0) == []  # once
    done = w.observe(_seen(True, True), 40.0)
    assert kinds(done) == ["recovered"] and "after a slice's loss" in done[0].summary


def test_a_lone_exit_75_is_the_loss_when_nothing_else_shows():
    w = _watchman()
    w.observe(_seen(True, True), 0.0)
    assert w.incident(_exit(0, 75, "p"), 5.0) == []
    down = w.observe(_seen(False, True, state="Degraded", fault="lost: pod p; exit 75 slice_lost", fault_slice=0), 6.0)
    assert kinds(down) == ["slice-lost"] and down[0].incident["exit_code"] == 75


def test_recovered_is_the_trainers_next_step_not_pods_ready():
    """#43: every slice healthy at 40 s, the trainer's first step after the loss only at 58.5 s: one recovered
    alert, once the record shows that step, timed to it (48.5 s from the loss at 10 s)."""
    w = _watchman()
    w.observe(_seen(True, True, step_time=5.0), 0.0)
    assert kinds(w.incident(_loss(1, "disruption"), 10.0)) == ["slice-lost"]
    assert w.observe(_seen(True, True, step_time=9.0), 40.0) == []  # pods ready, the trainer not stepping yet
    done = w.observe(_seen(True, True, step_time=58.5), 60.0)
    assert kinds(done) == ["recovered"] and done[0].details["recovery_s"] == 48.5
    assert "48s after slice 1's loss, the trainer stepping again" in done[0].summary
    assert w.observe(_seen(True, True, step_time=70.0), 80.0) == []



def test_a_lone_exit_75_whose_pod_a_restart_took_is_still_the_alert_of_its_slice():
    """The JobSet restart deleted the failed pod before the look: the pods name no victim, the exit does."""
    w = _watchman()
    w.observe(_seen(True, True), 0.0)
    assert w.incident(_exit(1, 75, "p"), 5.0) == []
    down = w.observe(_seen(False, False, state="Restarting"), 6.0)
    assert kinds(down) == ["slice-lost"] and down[0].details == {"slice": 1} and down[0].incident["exit_code"] == 75


def test_the_pods_a_jobset_restart_deletes_are_casualties_of_the_slice_that_failed_first():
    """On the real controllers (test_notify_real.py): slice 1 exits 75, the restart deletes slice 0's pod (its
    container then exits 137): the alert is slice 1's, with its exit."""
    w = _watchman()
    w.observe(_seen(True, True), 0.0)
    assert w.incident(_exit(1, 75, "p1"), 5.0) == []
    deleted = Incident("d", "2026-01-01T00:00:01Z", "exit", "infra", "Error", slice=0, pod="p0", exit_code=137,
                       fault="deleted")
    assert w.incident(deleted, 6.0) == []
    down = w.observe(_seen(False, False, state="Restarting", fault="lost: pod p1; exit 75 slice_lost",
                           fault_slice=1), 7.0)
    assert kinds(down) == ["slice-lost"] and down[0].details == {"slice": 1} and down[0].incident["exit_code"] == 75


def test_each_fault_of_a_soak_is_its_own_alert_and_its_own_recovery_even_with_no_look_between():
    """#43: three kills 60 s apart, each recovered by the trainer 12-30 s after it, and the watch's looks (a
    snapshot a minute) never fall between a recovery and the next kill: each kill is its own slice-lost, and
    the outage before it is recovered when the next loss shows, timed to the trainer's first step after it
    (its record's resumed_at), not one `recovered` covering all three."""
    w = _watchman()
    w.observe(_seen(True, True, resumed_at=1.0), 0.0)
    kills, resumed = [10.0, 70.0, 130.0], [22.0, 100.0, 145.0]
    alerts = []
    for n, kill in enumerate(kills):
        before = resumed[n - 1] if n else 1.0  # what the record says at this kill: the previous recovery
        alerts += w.incident(_loss(n % 2, "disruption", f"victim{n}"), kill, resumed_at=before)
        alerts += w.incident(_exit(1 - n % 2, 75, f"survivor{n}"), kill + 1, resumed_at=before)  # a casualty
    alerts += w.observe(_seen(True, True, resumed_at=resumed[-1]), 160.0)
    assert kinds(alerts) == ["slice-lost", "recovered"] * 3
    recovered = [a for a in alerts if a.kind == "recovered"]
    assert [a.details["recovery_s"] for a in recovered] == [b - k for k, b in zip(kills, resumed, strict=True)]
    assert [a.details["slice"] for a in recovered] == [0, 1, 0]  # each names its own fault's victim
    assert "the trainer stepping again 12s after slice 0's loss" in recovered[0].summary


def test_a_kill_during_a_recovery_belongs_to_the_outage_it_interrupted():
    """The second kill lands before the trainer stepped again: its own slice-lost, and one recovered for the
    outage, timed from the first loss and naming both (no step came between them to time them apart)."""
    w = _watchman()
    w.observe(_seen(True, True, resumed_at=1.0), 0.0)
    assert kinds(w.incident(_loss(1, "disruption", "a"), 10.0, resumed_at=1.0)) == ["slice-lost"]
    assert kinds(w.incident(_loss(0, "disruption", "b"), 20.0, resumed_at=1.0)) == ["slice-lost"]
    done = w.observe(_seen(True, True, resumed_at=50.0), 60.0)
    assert kinds(done) == ["recovered"] and done[0].details["recovery_s"] == 40.0
    assert (done[0].details["slice"], done[0].details["faults"]) == (1, 2)
    assert "after slice 1's loss (and slice 0's loss, which interrupted its recovery)" in done[0].summary


def test_a_kueue_preemption_says_so_and_names_the_preemptor():
    w = _watchman()
    w.observe(_seen(True, True, resumed_at=1.0), 0.0)
    preempted = dict(fault="preempted: by Kueue: Preempted: Preempted to accommodate a workload (UID: u-1)",
                     whole_workload=True, preemptor="Workload default/jobset-high-1 (JobSet high)",
                     fault_time=95.0, resumed_at=1.0)
    down = w.observe(_seen(False, False, state="Queued", **preempted), 100.0)
    assert kinds(down) == ["slice-lost"]
    assert down[0].summary.startswith("train: the workload preempted by Kueue to admit Workload default/jobset-high-1")
    assert down[0].details["preemptor"] == preempted["preemptor"] and down[0].details["slices"] == [0, 1]
    assert w.observe(_seen(False, False, state="Queued", **preempted), 160.0) == []  # one alert, not per look
    done = w.observe(_seen(True, True, resumed_at=400.0), 410.0)
    assert kinds(done) == ["recovered"] and done[0].details["recovery_s"] == 400.0 - 95.0  # from the API's time
    assert "after preempted by Kueue" in done[0].summary


def test_a_kueue_preemption_is_recovered_at_the_trainers_step_after_its_stop_not_at_the_victims_last():
    """#52 M2: Kueue dated the eviction (100) before the victim's last steps: the trainer, just recovered from
    a previous fault, stepped first at 101.6 and last at 102.9, heard SIGTERM and stopped (its record's stop
    at 103, its pods' exits 77 then). Neither its first step nor its last, read again while the new process
    restores (its record keeps the old step_time), is the recovery: the trainer's first step after its stop,
    168, is; timed from the fault (68 s), once, at the look that reads it."""
    w = _watchman()
    w.observe(_seen(True, True, resumed_at=101.6, step_time=101.6), 101.7)
    preempted = dict(fault="preempted: by Kueue: Preempted: Preempted to accommodate a workload (UID: u-1)",
                     whole_workload=True, fault_time=100.0)
    stopped = dict(resumed_at=101.6, step_time=102.9, trainer_state="preempted", trainer_stopped_at=103.0)
    assert kinds(w.observe(_seen(False, False, state="Queued", **preempted, **stopped), 110.0)) == ["slice-lost"]
    assert w.incident(_exit(0, 77, "p0"), 111.0, resumed_at=101.6) == []  # its exit: a casualty of the preemption
    # the new processes restore: their record has no resumed_at yet, its step_time the old process's last
    restoring = dict(step_time=102.9, trainer_phase="restoring")
    assert w.observe(_seen(True, True, **restoring), 130.0) == []
    assert w.observe(_seen(True, True, step_time=102.9, trainer_phase="compiling"), 150.0) == []
    done = w.observe(_seen(True, True, resumed_at=168.0, step_time=168.0, trainer_phase="stepping"), 170.0)
    assert kinds(done) == ["recovered"] and done[0].details["recovery_s"] == 68.0
    assert done[0].details["stepped_at"] == 168.0


def test_an_incident_seen_late_is_timed_from_the_apis_own_time_of_it():
    """The watch saw the deletion 4 s after the API dated it (a loaded host): the outage runs from the API's time."""
    from elxpk.cluster.objects.labels import parse_time

    dated = "2026-01-01T00:00:10Z"
    at = parse_time(dated)
    assert at is not None
    w = _watchman()
    w.observe(_seen(True, True, resumed_at=at - 100), at - 50)
    late = Incident("d1", dated, "disruption", "infra", "EvictionByEvictionAPI", slice=1, pod="p")
    assert kinds(w.incident(late, at + 4.0, resumed_at=at - 100)) == ["slice-lost"]
    done = w.observe(_seen(True, True, resumed_at=at + 30.0), at + 40.0)
    assert kinds(done) == ["recovered"] and done[0].details["recovery_s"] == 30.0
    assert (done[0].details["since"], done[0].details["stepped_at"]) == (at, at + 30.0)


def test_a_kueue_preemption_seen_through_its_casualties_is_alerted_at_once_as_kueues():
    """The pod watch shows only the pods Kueue's eviction deleted (casualties, no victim); the watch then looks
    at the Workload (watch.py) and the alert is Kueue's, dated by Kueue's condition, not a slice's."""
    w = _watchman()
    w.observe(_seen(True, True, resumed_at=1.0), 0.0)
    deleted = Incident("x0", None, "exit", "infra", "Error", slice=0, pod="p0", exit_code=77, fault="deleted")
    assert w.incident(deleted, 100.0, resumed_at=1.0) == [] and w.waits_for_a_victim
    taken = w.workload_taken("preempted: by Kueue: Preempted: ... (UID: u)", 97.0, "Workload default/high", 2, 101.0)
    assert kinds(taken) == ["slice-lost"] and taken[0].summary.startswith(
        "train: the workload preempted by Kueue to admit Workload default/high")
    assert not w.waits_for_a_victim and w.workload_taken("preempted: again", 98.0, "", 2, 102.0) == []
    done = w.observe(_seen(True, True, resumed_at=130.0), 140.0)
    assert kinds(done) == ["recovered"] and done[0].details["recovery_s"] == 130.0 - 97.0


def test_the_previous_recoverys_step_in_the_same_second_as_the_next_kill_does_not_close_it():
    """On the real cluster (the replay): the trainer stepped at 886.27, the next eviction came at 886.3, dated
    886 by the API (whole seconds). That step is the previous recovery's: the new outage stays open, and the
    survivor's exit 75 that follows is its casualty, not a second fault."""
    from elxpk.cluster.objects.labels import parse_time

    dated = "2026-01-01T00:00:10Z"
    at = parse_time(dated)
    assert at is not None
    w = _watchman()
    w.observe(_seen(True, True, resumed_at=at + 0.27), at + 0.28)
    evicted = Incident("e", dated, "disruption", "infra", "EvictionByEvictionAPI", slice=0, pod="v")
    assert kinds(w.incident(evicted, at + 0.4, resumed_at=at + 0.27)) == ["slice-lost"]
    assert w.incident(_exit(1, 75, "survivor"), at + 1.5, resumed_at=at + 0.27) == []
    done = w.observe(_seen(True, True, resumed_at=at + 9.0), at + 10.0)
    assert kinds(done) == ["recovered"] and done[0].details["recovery_s"] == 9.0
