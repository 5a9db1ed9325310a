"""`workload events`' closing lines: failures grouped by cause, and "no progress since step S" from the
trainer's progress record (issue 23: a retry budget that knows causes). Through the CLI, on the real
controllers: tests/realcluster/test_incidents_real.py; here the arithmetic over exits before and after the
last step."""

from __future__ import annotations

from elxpk.cluster.diagnosis.failure_summary import summary_lines
from elxpk.cluster.records.incidents import Incident

START = 1_780_000_000.0


def _exit(code: int, time: str) -> Incident:
    return Incident(id=time, time=time, kind="exit", cause="infra", reason="Error", exit_code=code)


def test_exits_before_the_last_step_made_progress():
    progress = {"steps_done": 40, "step_time": START}
    before, after = "2000-01-01T00:00:00Z", "2100-01-01T00:00:00Z"
    assert summary_lines([_exit(75, before), _exit(75, "2000-01-01T00:05:00Z"), _exit(76, after)], progress) == [
        "failures by cause: slice_lost 2, stalled 1"]
    # two slices' 75 at once: one fault, the other slice stopped with its group
    assert summary_lines([_exit(75, before), _exit(75, before)], None) == [
        "failures by cause: slice_lost 1; 1 slice stopped with its group (exit 75)"]
    assert summary_lines([_exit(76, after), _exit(76, after)], {"steps_done": 0, "step_time": None})[1] == (
        "no progress since step 0: 2 stalled failures since the trainer's last completed step")
    assert summary_lines([_exit(76, after), _exit(76, after)], None) == ["failures by cause: stalled 2"]
    assert summary_lines([], progress) == []
    assert summary_lines([_exit(75, after), _exit(137, before)], None) == [  # outside the table: its code
        "failures by cause: exit 137 1, slice_lost 1"]


def test_the_slices_that_stopped_with_their_group_are_not_losses():
    """#43: one kill, one fault: the killed slice's exit (or its pod's disruption) is the loss, the 75 of the
    slice that stopped with it, within the window, a casualty; the pod's own fault names it."""
    t0, t1, later = "2026-01-01T00:00:00Z", "2026-01-01T00:00:03Z", "2026-01-01T01:00:00Z"
    assert summary_lines([_exit(137, t0), _exit(75, t1)], None) == [
        "failures by cause: exit 137 1; 1 slice stopped with its group (exit 75)"]
    forced = Incident(id="v", time=t0, kind="exit", cause="infra", reason="Error", exit_code=77, fault="lost its VM")
    evicted = Incident(id="e", time=later, kind="disruption", cause="infra", reason="EvictionByEvictionAPI",
                       fault="evicted")
    deleted = Incident(id="d", time=later, kind="exit", cause="infra", reason="Error", exit_code=137, fault="deleted")
    lines = summary_lines([forced, _exit(75, t1), evicted, _exit(75, later), deleted], None)
    assert lines == ["failures by cause: evicted 1, lost its VM 1; 3 slices stopped with their group (exit 75)"]


def test_a_multi_host_slice_killed_is_one_fault_whatever_its_pods():
    """kill-slice on a slice of 4 VMs: each of its 4 pods exits 137, and the other slice's 4 stop with their
    group (75): one fault and one slice stopped with it, not "exit 137 4; 4 slices stopped"."""
    t0, t1 = "2026-01-01T00:00:00Z", "2026-01-01T00:00:02Z"

    def pod(slice_index: int, vm: int, code: int, time: str) -> Incident:
        return Incident(id=f"{slice_index}-{vm}", time=time, kind="exit", cause="infra", reason="Error",
                        exit_code=code, slice=slice_index, pod=f"w-slice-job-{slice_index}-{vm}")

    killed = [pod(1, vm, 137, t0) for vm in range(4)] + [pod(0, vm, 75, t1) for vm in range(4)]
    assert summary_lines(killed, None) == ["failures by cause: exit 137 1; 1 slice stopped with its group (exit 75)"]
    # the victim slice's own pods that stop with the group (75 after its VM went) are its fault, not casualties
    one_vm = [pod(1, 0, 137, t0), *(pod(1, vm, 75, t1) for vm in range(1, 4))]
    assert summary_lines(one_vm, None) == ["failures by cause: exit 137 1"]
