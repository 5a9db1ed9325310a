"""`workload status NAME --watch` on the fake API server (objects captured from the real controllers): what a
refresh costs against one `status`, the watch's resume point, an incident seen once, an outage ridden out
with "reconnecting", the JSON stream's one object per change, the exit codes and the usage errors. The live
view on the real control plane, a kill and an API server paused: tests/realcluster/test_status_watch_real.py."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elxpk.cli.status_watch_view import JsonStream, WatchView, facts
from elxpk.cluster.verbs.observe import fetch_status
from elxpk.cluster.verbs.status_watch import LATE_S, WatchState, watch_status
from tests.cluster.captured import load, name_of, pod_of, seed
from tests.cluster.conftest import run_cli

REPO = Path(__file__).resolve().parents[2]


def _reader(kube, clock, name: str):
    def read(on_objects):
        return fetch_status(kube, "default", name, now=clock(), with_progress=True, stuck_after_s=120.0,
                            on_objects=on_objects)
    return read


def _non_watch_calls(fake, since: int) -> list:
    return [c for c in fake.calls[since:] if c.query.get("watch") != ["true"]]


def test_a_refresh_costs_what_one_status_costs(fake, clock, kube):
    """Every refresh makes exactly the requests of one `status`; pod changes come on the watch, never as a
    GET per pod."""
    objects = seed(fake, "ignored")
    name = name_of(objects)
    kube.kueue_version()  # discovery is once per process
    before = len(fake.calls)
    fetch_status(kube, "default", name, now=clock(), with_progress=True, stuck_after_s=120.0)
    one_status = [(c.method, c.path) for c in fake.calls[before:]]
    before = len(fake.calls)
    state = WatchState(name)
    watch_status(kube, "default", name, _reader(kube, clock, name), state, on_change=lambda: None, clock=clock,
                 sleep=clock.sleep, refresh_s=1, max_watches=3)
    made = [(c.method, c.path) for c in _non_watch_calls(fake, before)]
    assert state.refreshes >= 4 and len(made) == state.refreshes * len(one_status)
    assert made == one_status * state.refreshes  # the same requests, in the same order
    watches = [c.query for c in fake.calls[before:] if c.query.get("watch") == ["true"]]
    assert len(watches) == 3 and "resourceVersion" not in watches[0]
    assert all(int(w["resourceVersion"][0]) > 0 for w in watches[1:])  # each resumes where the last ended


def test_a_pod_failing_while_watched_is_one_incident(fake, clock, kube):
    """A pod fails during the watch: it comes in on the watch and is kept once, though every later refresh
    sees it again."""
    objects = seed(fake, "ignored")
    name = name_of(objects)
    failed = pod_of(load("failed"), 0)
    state = WatchState(name)
    changes: list[int] = []

    def on_change() -> None:
        changes.append(state.incident_count)
        if len(changes) == 1:
            fake.store.create(("", "pods"), failed)

    watch_status(kube, "default", name, _reader(kube, clock, name), state, on_change=on_change, clock=clock,
                 sleep=clock.sleep, refresh_s=1, min_gap_s=0, max_watches=3)
    mine = [i for i in state.incidents if i.pod == failed["metadata"]["name"] and i.exit_code == 70]
    assert len(mine) == 1
    ids = [i.id for i in state.incidents]
    assert len(ids) == len(set(ids)) and state.incident_count >= changes[0] + 1


def test_an_outage_shows_reconnecting_then_resumes_losing_nothing(fake, clock, kube):
    """Every request dropped for a while, and a pod fails meanwhile: the view says reconnecting, then the
    watch resumes and the failure is there once."""
    from tests.support.fake_apiserver import Fault

    objects = seed(fake, "ignored")
    name = name_of(objects)
    failed = pod_of(load("failed"), 0)
    state = WatchState(name)
    seen_lines: list[str] = []

    def on_change() -> None:
        seen_lines.append(state.connection(0.0))
        if not fake.faults and state.refreshes == 1:
            fake.faults.append(Fault("GET", ".*", "drop", times=14))
            fake.store.create(("", "pods"), failed)

    watch_status(kube, "default", name, _reader(kube, clock, name), state, on_change=on_change, clock=clock,
                 sleep=clock.sleep, refresh_s=1, max_watches=8)
    assert fake.faults[0].times == 0
    assert any(line.startswith("reconnecting: the API server is not answering") for line in seen_lines)
    assert state.connection(0.0) == ""  # answered again
    assert sum(1 for i in state.incidents if i.pod == failed["metadata"]["name"] and i.exit_code == 70) == 1


def test_an_api_never_reached_fails_at_once_without_riding_an_outage(fake, clock, kube):
    """The first read fails as `status` fails (after its request's own tries): nothing is being watched yet,
    so the watch does not wait out OUTAGE_S first (piped, it used to print nothing for ten minutes)."""
    from elxpk.cluster.verbs.events_feed import OUTAGE_S
    from elxpk.errors import ClusterError
    from tests.support.fake_apiserver import Fault

    objects = seed(fake, "ignored")
    name = name_of(objects)
    fake.faults.append(Fault("GET", ".*", "drop", times=1000))
    state, changes = WatchState(name), []
    started = clock()
    with pytest.raises(ClusterError, match="cannot reach the Kubernetes API"):
        watch_status(kube, "default", name, _reader(kube, clock, name), state, on_change=lambda: changes.append(1),
                     clock=clock, sleep=clock.sleep, refresh_s=1, max_watches=2)
    assert clock() - started < OUTAGE_S / 10  # the request's own few tries, not the outage's ten minutes
    assert state.refreshes == 0 and state.outage_note == ""


def test_a_late_answer_reads_as_reconnecting():
    """A paused API server accepts the connection and answers nothing: no error until the request's own
    deadline, so lateness alone says reconnecting."""
    state = WatchState("w")
    assert state.connection(100.0) == ""
    state.expect_by = 100.0
    assert state.connection(100.0 + LATE_S) == ""
    line = state.connection(100.0 + LATE_S + 7)
    assert line == f"reconnecting: no answer from the API server for {LATE_S + 7:.0f} s"
    state.answered_at = 90.0  # the last answer: a watch that was due at 100
    assert state.connection(100.0 + LATE_S + 7) == f"reconnecting: no answer from the API server for " \
        f"{LATE_S + 17:.0f} s"


def test_a_refresh_waiting_on_storage_names_storage_not_the_api(fake, clock, kube):
    """#52 L1: storage paused (the progress record's gs://) while the API answers: a refresh gets its objects,
    then waits on the record's read. The view names storage and says the API answers, not "reconnecting" to
    an API server that is there; once the read answers, the line is gone."""
    objects = seed(fake, "ignored")
    name = name_of(objects)
    state = WatchState(name)
    lines: list[str] = []

    def read(on_objects):
        def objects_then_a_slow_read(*found) -> None:
            on_objects(*found)
            clock.now += LATE_S + 7  # the progress record's read, held by the paused storage
            lines.append(state.connection(clock()))
        return _reader(kube, clock, name)(objects_then_a_slow_read)

    watch_status(kube, "default", name, read, state, on_change=lambda: None, clock=clock,
                 sleep=clock.sleep, refresh_s=1, max_watches=1)
    assert lines and lines[0] == (f"storage not answering: no answer from the checkpoint directory for "
                                  f"{LATE_S + 7:.0f} s (reading the progress record; the Kubernetes API answered)")
    assert state.connection(clock()) == ""
    state.expect_by = clock() - 100  # and the API's own silence is still the API's
    assert state.connection(clock()).startswith("reconnecting: no answer from the API server")


def test_json_stream_writes_one_object_per_change(fake, clock, kube, tmp_path):
    objects = seed(fake, "ignored")
    name = name_of(objects)
    state = WatchState(name)
    out = (tmp_path / "out.jsonl").open("w+")
    stream = JsonStream(state, out)
    stream.changed()  # nothing read yet: the first object
    stream.changed()  # unchanged: nothing
    watch_status(kube, "default", name, _reader(kube, clock, name), state, on_change=stream.changed,
                 clock=clock, sleep=clock.sleep, refresh_s=1, max_watches=2)
    out.seek(0)
    records = [json.loads(line) for line in out]
    assert len(records) == 2  # the empty start, then the first status: later refreshes changed nothing
    assert records[1]["state"] == records[1]["status"]["state"] == "Running" and records[1]["status"]["name"] == name
    assert len(records[1]["new_incidents"]) == state.incident_count > 0
    state.expect_by = -1e9  # the API stops answering: a change of its own
    stream.changed()
    out.seek(0)
    last = json.loads(out.readlines()[-1])
    assert last["connection"].startswith("reconnecting") and last["new_incidents"] == []


def test_view_shows_every_figure(fake, clock, kube):
    """The live view's rows: state and why, slices N/M, restarts by cause and the budget, the incidents."""
    from rich.console import Console

    objects = seed(fake, "ignored")
    name = name_of(objects)
    state = WatchState(name)
    watch_status(kube, "default", name, _reader(kube, clock, name), state, on_change=lambda: None, clock=clock,
                 sleep=clock.sleep, refresh_s=1, max_watches=0)
    console = Console(width=120, record=True, file=open(os.devnull, "w"))
    console.print(WatchView(state))
    screen = console.export_text()
    record = facts(state, clock(), 0.0)
    assert f"Slices healthy  {record['slices_healthy']}/{record['slices_total']}" in screen
    assert f"State           {record['state']}  {record['message']}" in screen
    assert f"JobSet restarts {record['jobset_restarts']} ({record['jobset_restarts_left']} of maxRestarts" in screen
    causes = ", ".join(f"{n} {cause}" for cause, n in record["failures"].items() if n)
    assert f"Failures        by cause: {causes or 'none'}" in screen
    assert f"Last incidents ({state.incident_count} seen)" in screen
    assert state.incidents[-1].line()[:60] in screen
    assert all(len(line) <= 120 for line in screen.splitlines())  # an incident is one line, cut to the width


def _screen(state: WatchState) -> str:
    from rich.console import Console

    console = Console(width=120, record=True, file=open(os.devnull, "w"))
    console.print(WatchView(state))
    return console.export_text()


def test_failures_stay_counted_after_the_restart_deletes_the_pods(fake, clock, kube):
    """The pods that failed are deleted by the JobSet's restart: the count still holds them, so it never says
    none above the exits listed under it; a --no-pathways slice (backoffLimit 0) shows no slice budget."""
    objects = seed(fake, "ignored")
    name = name_of(objects)
    state = WatchState(name)
    read = _reader(kube, clock, name)
    watch_status(kube, "default", name, read, state, on_change=lambda: None, clock=clock, sleep=clock.sleep,
                 refresh_s=1, max_watches=0)
    counted = facts(state, clock(), 0.0)["failures"]
    assert counted == state.status.restart_causes and sum(counted.values()) == 2  # the two failed pods there
    for pod in objects["pods"]:
        if pod["status"]["phase"] == "Failed":
            fake.store.delete(("", "pods"), "default", pod["metadata"]["name"])
    watch_status(kube, "default", name, read, state, on_change=lambda: None, clock=clock, sleep=clock.sleep,
                 refresh_s=1, max_watches=0)
    record = facts(state, clock(), 0.0)
    assert sum(state.status.restart_causes.values()) == 0 and record["failures"] == counted
    screen = _screen(state)
    assert "by cause: none" not in screen and "exit" in screen.split("Last incidents")[1]
    assert record["slice_budget_left_min"] is None and "slice budget" not in screen


def test_the_phases_of_a_restart_from_the_trainer_s_own_records(fake, kube, tmp_path):
    """The restarted group's pods are all running (the JobSet says Running 2/2): with the previous process's
    record the view says pods starting and shows no rate; then restoring and compiling as the trainer's
    ProgressWriter publishes them; stepping with the rate of its records; and a step older than the
    record's publication period is not stepping, its old rate not shown as current."""
    from elxpk.cluster.objects.labels import parse_time
    from elxpk.units import format_duration
    from elxpk_contract.exit_codes import SLICE_LOST, TrainerStopped
    from tests.cluster.captured import seed_stage
    from tests.support.clock import ManualClock
    from trainer.elastic.loop import stop_record
    from trainer.elastic.progress import ProgressWriter

    name = seed_stage(fake, "restarted", tmp_path)
    pods_started = max(parse_time(p["status"]["containerStatuses"][0]["state"]["running"]["startedAt"])
                       for p in fake.store.list(("", "pods"), "default"))
    trainer = ManualClock(pods_started - 60)
    previous = ProgressWriter(str(tmp_path), trainer)
    previous.step_done(7, trainer.time(), 1)
    previous.finish(*stop_record(TrainerStopped(SLICE_LOST, "slice 1 lost")))
    state = WatchState(name)
    reader = [0.0]

    def look(at: float) -> dict:
        reader[0] = at
        watch_status(kube, "default", name, lambda hook: fetch_status(
            kube, "default", name, now=at, with_progress=True, stuck_after_s=120.0, on_objects=hook), state,
                     on_change=lambda: None, refresh_s=1, max_watches=1)
        return facts(state, at, 0.0)

    seen = look(pods_started + 10)
    assert (seen["state"], seen["phase"], seen["steps_per_s"]) == ("Running", "pods starting", None)
    assert "Phase           pods starting" in _screen(state) and "Trainer         last step 7," in _screen(state)
    trainer.now = pods_started + 5
    restarted = ProgressWriter(str(tmp_path), trainer)
    words = {"restoring": "", "compiling": ", this process's start: imports 2.50 s -> devices 3.00 s -> restored 5.00 s"}
    for phase in ("restoring", "compiling"):
        if words[phase]:  # the new process's start-up so far rides with the phase's write (trainer/startup.py)
            restarted.startup({"restore_done": 5.0, "imports_done": 2.5, "devices_open": 3.0}, "", pods_started + 1)
        restarted.phase(phase)
        trainer.now += 3
        seen = look(trainer.now)
        assert (seen["phase"], seen["phase_detail"], seen["steps_per_s"]) == (
            phase, f"for {format_duration(3.0)}{words[phase]}", None)
        assert f"Phase           {phase}" in _screen(state)
    restarted.step_done(8, trainer.now, 1)
    seen = look(trainer.now + 1)
    # Issue 52 L3: no rate across the restart's gap (1 step over its minutes read 0.02 steps/s): the window
    # starts at the restart's first step
    assert (seen["phase"], seen["steps_per_s"]) == ("stepping", None)
    trainer.now += 30
    restarted.step_done(38, trainer.now, 1)
    seen = look(trainer.now + 1)
    assert (seen["phase"], seen["steps_per_s"]) == ("stepping", pytest.approx(1.0))
    assert "step 38 done" in _screen(state) and "1.00 steps/s" in _screen(state)
    seen = look(trainer.now + 100)  # no record since: its step is old
    assert (seen["phase"], seen["steps_per_s"], seen["step"]) == ("not stepping", None, 38)
    screen = _screen(state)
    assert "Trainer         last step 38, 1m40s ago" in screen and "steps/s" not in screen


def test_status_and_the_watch_give_the_trainer_s_tokens_per_s_and_mfu_from_its_progress_record(fake, kube, tmp_path):
    """The speed the trainer publishes (trainer/speed_log.py through its ProgressWriter) is what `workload status`
    and the watch show beside the step, with an MFU where the chip's peak is known and `no MFU` where not;
    a trainer no longer stepping shows no speed as current."""
    import io

    from rich.console import Console

    from elxpk.cluster.records.status import WorkloadStatus
    from elxpk.cluster.verbs.status_render import status_renderables
    from elxpk_contract.speed import SpeedBasis
    from tests.cluster.captured import seed_stage
    from tests.support.clock import ManualClock
    from trainer.elastic.progress import ProgressWriter
    from trainer.speed_log import SpeedLog

    name = seed_stage(fake, "restarted", tmp_path)
    pods = fake.store.list(("", "pods"), "default")
    from elxpk.cluster.objects.labels import parse_time

    started = max(parse_time(p["status"]["containerStatuses"][0]["state"]["running"]["startedAt"]) for p in pods)
    for kind, peak, shown in (("TPU v5 lite", 197.0, "MFU 6.1%"), ("cpu", None, "no MFU")):
        clock = ManualClock(started + 5)
        speed = SpeedLog(SpeedBasis(512, 6e11, 4, kind, peak), 0, None)
        writer = ProgressWriter(str(tmp_path), clock, speed=speed.recent)
        for step in range(8, 12):  # 16 examples a step on 2 slices x 4 devices in 0.1 s: 81,920 tokens/s, 12 TFLOP/s a device
            speed.observe("metric", {"step": step, "loss": (2.0).hex(), "step_time_s": 0.1, "slices": [0, 1],
                                     "examples": [16 * step, 16 * step + 16]})
        writer.step_done(12, clock.time(), 1)
        state = WatchState(name)
        watch_status(kube, "default", name, lambda hook, at=clock.time() + 1: fetch_status(
            kube, "default", name, now=at, with_progress=True, stuck_after_s=120.0, on_objects=hook), state,
                     on_change=lambda: None, refresh_s=1, max_watches=1)
        seen = facts(state, clock.time() + 1, 0.0)
        assert seen["tokens_per_s"] == pytest.approx(81920.0) and (seen["mfu"] is None) == (peak is None)
        assert f"step 12 done 1.0s ago, 81,920 tokens/s, {shown}" in _screen(state)
        status = state.status
        assert isinstance(status, WorkloadStatus)
        console = Console(width=400, record=True, file=io.StringIO())
        for renderable in status_renderables(status):
            console.print(renderable)
        assert f"step 12 done 1.0s ago; 81,920 tokens/s, {shown}; no checkpoint" in console.export_text()
        watch_status(kube, "default", name, lambda hook, at=clock.time() + 1000: fetch_status(
            kube, "default", name, now=at, with_progress=True, stuck_after_s=120.0, on_objects=hook), state,
                     on_change=lambda: None, refresh_s=1, max_watches=1)
        later = facts(state, clock.time() + 1000, 0.0)  # no record since: not stepping, no speed as current
        assert later["tokens_per_s"] is None and "tokens/s" not in _screen(state).split("Trainer")[1].split("\n")[0]


@pytest.mark.parametrize("flags,problem", [
    (("-o", "yaml", "--watch"), "-o yaml --watch: a stream of changes is -o json"),
    (("--why", "--watch"), "--why --watch: the live view shows the why line already"),
])
def test_watch_usage_errors_exit_2_before_any_call(fake, capsys, k, flags, problem):
    before = len(fake.calls)
    code, out, err = run_cli(capsys, "workload", "status", "w", *flags, *k)
    assert code == 2 and problem in err and out == "" and "Traceback" not in err
    assert len(fake.calls) == before


def test_watch_of_a_failed_workload_exits_1_through_the_script(fake, kubeconfig):
    """The console script as a user runs it: a workload that has failed ends the watch at once, exit 1 (as
    `workload wait`), with its one JSON object."""
    objects = seed(fake, "failed")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([str(Path(sys.executable).parent / "elxpk"), "workload", "status", name_of(objects), "--watch",
                           "-o", "json", "--kubeconfig", str(kubeconfig)], capture_output=True, text=True,
                          env=env, timeout=120, cwd=REPO)
    assert done.returncode == 1, done.stderr
    records = [json.loads(line) for line in done.stdout.splitlines()]
    assert records[-1]["state"] == "Failed" and records[-1]["status"]["state"] == "Failed"
    assert "failed" in done.stderr and "Traceback" not in done.stderr


@functools.cache
def _base_status() -> object:
    from elxpk.cluster.records.status import compute_status

    objects = load("ignored")
    return compute_status(objects["jobset"], objects["jobs"], objects["pods"], objects["workloads"], 0.0)


def _with_progress(steps: int, step_time: float | None) -> object:
    from dataclasses import replace

    return replace(_base_status(), progress={"steps_done": steps, "step_time": step_time, "step_age_s": 1.0,
                                             "checkpoint_step": None, "checkpoint_age_s": None})


@given(st.integers(0, 10**6), st.integers(0, 10**6), st.floats(0, 1e9) | st.none(), st.floats(0, 1e9) | st.none())
@settings(deadline=None)
def test_rate_is_steps_over_the_time_between_their_records(steps_a, steps_b, time_a, time_b):
    """The rate is positive and exactly the steps over the time between the two steps' records (the
    trainer's clock); a trainer that did not advance, or a record without a step yet, gives no rate rather
    than 0 or a negative one."""
    from elxpk.cluster.verbs.status_watch import _rate

    rate = _rate(_with_progress(steps_a, time_a), _with_progress(steps_b, time_b))
    if steps_b <= steps_a or time_a is None or time_b is None or time_b <= time_a:
        assert rate is None
    else:
        assert rate == pytest.approx((steps_b - steps_a) / (time_b - time_a))


def test_a_slice_budget_of_its_own_is_shown_with_its_size():
    """A slice with pod retries of its own (backoffLimit 4, 1 used) shows the lowest budget left out of its
    size; the --no-pathways slice beside it (backoffLimit 0: no retries of its own) does not make it 0."""
    from dataclasses import replace

    base = _base_status()
    slices = (replace(base.slices[0], backoff_limit=4, failed=1), replace(base.slices[1], backoff_limit=0))
    state = WatchState("w")
    state.status = replace(base, slices=slices)
    assert (facts(state, 0.0, 0.0)["slice_budget_left_min"], facts(state, 0.0, 0.0)["slice_budget_min"]) == (3, 4)
    assert "slice budget left 3 of 4 (lowest)" in _screen(state)


@settings(deadline=None, max_examples=40)  # a loaded machine: no timing in tests
@given(st.lists(st.tuples(st.sampled_from(["Running", "Degraded"]), st.floats(0, 1e4)), min_size=1, max_size=20))
def test_json_stream_writes_on_a_change_of_state_never_of_age(tmp_path_factory, changes):
    """A sequence of refreshes where the state may change and the step's age always grows: one object for
    the start and one per change of state, none for an age alone."""
    from dataclasses import replace

    state = WatchState("w")
    out = (tmp_path_factory.mktemp("s") / "out.jsonl").open("w+")
    stream = JsonStream(state, out)
    wanted, last = 0, None
    for name, age in changes:
        status = replace(_with_progress(5, 100.0), state=name)
        status.progress["step_age_s"] = age
        state.status = status
        stream.changed()
        wanted += name != last
        last = name
    out.seek(0)
    assert len(out.readlines()) == wanted


def _killed(pod: dict, code: int, at: str, *, forced: bool) -> dict:
    """`pod` as the API shows it after its trainer exited `code` at `at` (restartPolicy Never: Failed); `forced`:
    force-deleted first (kill-slice: deletionTimestamp with no grace, held by the Job's tracking finalizer)."""
    import copy

    pod = copy.deepcopy(pod)
    if forced:
        pod["metadata"].update(deletionTimestamp=at, deletionGracePeriodSeconds=0)
    status = pod["status"]
    status["phase"] = "Failed"
    status["conditions"] = [c for c in status.get("conditions", []) if c["type"] != "Ready"]
    for cs in status["containerStatuses"]:
        started = cs["state"]["running"]["startedAt"]
        cs.update(ready=False, state={"terminated": {"exitCode": code, "reason": "Error", "startedAt": started,
                                                     "finishedAt": at}})
    return pod


def test_a_slice_killed_shows_restarting_and_counts_as_one_failure(fake, clock, kube):
    """kill-slice force-deletes the 4 pods of slice 1 of a 2-slice v5litepod-16 JobSet (the captured `plain`
    one): they exit 137, slice 0's 4 trainers stop with their group (75), and the JobSet controller sets its
    RestartingJobSet condition, its Jobs still counting the pods ready. The watch says Restarting (the
    controller's word, not the stale Jobs' Running), and counts one failure and one slice stopped with it,
    however many pods (8) and incidents the kill made and however often a refresh sees them."""
    objects = seed(fake, "plain")
    name = name_of(objects)
    state = WatchState(name)
    kill_at, stop_at = "2026-12-01T21:58:00Z", "2026-12-01T21:58:02Z"

    def kill() -> None:
        for pod in objects["pods"]:
            victim = pod["metadata"]["labels"]["jobset.sigs.k8s.io/job-index"] == "1"
            fake.store.put(("", "pods"), _killed(pod, 137 if victim else 75, kill_at if victim else stop_at,
                                                 forced=victim))
        jobset = fake.store.get(("jobset.x-k8s.io", "jobsets"), "default", name)
        jobset["status"].update(restarts=1, restartsCountTowardsMax=1, conditions=[
            *jobset["status"].get("conditions", []),
            {"type": "RestartingJobSet", "status": "True", "reason": "FailurePolicy", "lastTransitionTime": kill_at,
             "message": "restarting the JobSet: job incidents-plain-slice-job-1 failed"}])
        fake.store.put(("jobset.x-k8s.io", "jobsets"), jobset)

    def on_change() -> None:
        if state.refreshes == 1 and not state.losses:
            kill()

    watch_status(kube, "default", name, _reader(kube, clock, name), state, on_change=on_change, clock=clock,
                 sleep=clock.sleep, refresh_s=1, min_gap_s=0, max_watches=4)
    seen = facts(state, clock(), 0.0)
    assert state.refreshes >= 3 and len(state.losses) == 8  # each pod's exit came in, once
    assert seen["state"] == "Restarting" and seen["phase"] == "restarting"
    assert seen["failures"] == {"infra": 1, "user": 0, "unknown": 0} and seen["stopped_with_group"] == 1
    screen = _screen(state)
    assert "State           Restarting  JobSet restart 1" in screen
    assert "Failures        by cause: 1 infra; 1 slice stopped with its group" in screen
