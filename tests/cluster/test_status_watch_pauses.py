"""`workload status NAME --watch` and `status` while the API or the checkpoint directory's storage pauses
(issue 52, L1 and L2), on the fake API server: a late storage read is told as storage, not as the API; the
view says the last read's phase, aged, never live stepping while it cannot read; a read that rides out a
pause ages its answer from its end."""

from __future__ import annotations

import re
import time

import pytest

from elxpk.cli.status_watch_view import facts
from elxpk.cluster.verbs.observe import fetch_status
from elxpk.cluster.verbs.status_watch import LATE_S, WatchState, watch_status
from tests.cluster.test_status_watch import _screen


def test_a_storage_pause_reads_as_storage_not_as_the_api(fake, clock, kube, tmp_path):
    """Issue 52 L1: the API has answered a refresh's objects and the progress record's read (gs://) hangs:
    the view says storage, not `API reconnecting`; the watch that follows waits on the API again."""
    from tests.cluster.captured import seed_stage
    from tests.support.clock import ManualClock
    from trainer.elastic.progress import ProgressWriter

    name = seed_stage(fake, "restarted", tmp_path)
    ProgressWriter(str(tmp_path), ManualClock()).step_done(3, 1_000.0, 1)
    state, lines = WatchState(name), []

    def read(hook):
        def objects(*found):
            hook(*found)
            clock.sleep(LATE_S + 7)  # the storage read, paused this long
            lines.append(state.connection(clock()))
        return fetch_status(kube, "default", name, now=clock(), with_progress=True, stuck_after_s=120.0,
                            on_objects=objects)

    watch_status(kube, "default", name, read, state, on_change=lambda: None, clock=clock, sleep=clock.sleep,
                 refresh_s=1, max_watches=0)
    assert lines[0].startswith("storage not answering: no answer from the checkpoint directory for 12 s"), lines
    assert "reconnecting" not in lines[0] and "API server" not in lines[0]
    assert state.waiting_on == "api" and state.connection(clock()) == ""  # the refresh ended: nothing late
    state.expect_by = clock()  # a watch due now, late by more than LATE_S: the API's
    assert state.connection(clock() + LATE_S + 1).startswith("reconnecting: no answer from the API server")
    state.waiting_on, state.expect_by, state.answered_at = "storage", time.monotonic() - LATE_S - 7, None
    screen = _screen(state)  # the view's own clock: its row says whom it waits on
    assert re.search(r"^Storage +storage not answering", screen, re.M) and not re.search(r"^API ", screen, re.M)


def test_an_api_pause_shows_the_last_reads_phase_aged_never_live_stepping(fake, kube, tmp_path):
    """Issue 52 L2: the trainer steps, then the API stops answering: the view no longer says `stepping` (nor a
    rate) while it cannot read; it says what its last read said and how old that read is."""
    from elxpk.cluster.objects.labels import parse_time
    from tests.cluster.captured import seed_stage
    from tests.support.clock import ManualClock
    from trainer.elastic.progress import ProgressWriter

    name = seed_stage(fake, "restarted", tmp_path)
    started = max(parse_time(p["status"]["containerStatuses"][0]["state"]["running"]["startedAt"])
                  for p in fake.store.list(("", "pods"), "default"))
    trainer = ManualClock(started + 5)
    writer = ProgressWriter(str(tmp_path), trainer)
    state = WatchState(name)
    for step in (8, 38):  # two records 30 s apart: 1 step/s
        writer.step_done(step, trainer.now, 1)
        watch_status(kube, "default", name, lambda hook, at=trainer.now + 1: fetch_status(
            kube, "default", name, now=at, with_progress=True, stuck_after_s=120.0, on_objects=hook), state,
                     on_change=lambda: None, refresh_s=1, max_watches=0)
        trainer.now += 30
    state.read_at = trainer.now - 29  # the last read, 1 s after the step at 38
    seen = facts(state, state.read_at + 2, 0.0)
    assert (seen["connection"], seen["phase"], seen["steps_per_s"]) == ("ok", "stepping", pytest.approx(1.0))
    state.expect_by = 0.0  # the API owes an answer since then: paused
    seen = facts(state, state.read_at + 12, LATE_S + 12)
    assert seen["connection"].startswith("reconnecting") and (seen["phase"], seen["steps_per_s"]) == ("unknown", None)
    assert seen["phase_detail"] == "cannot read now; the last read, 12s ago, said stepping", seen


def test_a_read_that_rides_out_a_pause_ages_its_answer_from_its_end(fake, clock, kubeconfig, tmp_path):
    """Issue 52 L2: `status` takes `now` before its reads; a read that rides out an API pause (here the Jobs'
    LIST dropped twice, the retries' pauses on the clock) aged the trainer's step from the first request.
    With the clock, the ages are as of the reads' end."""
    from elxpk.cluster.access.connect import connect
    from elxpk.cluster.access.target import ClusterTarget
    from tests.cluster.captured import seed_stage
    from tests.support.clock import ManualClock
    from tests.support.fake_apiserver import Fault
    from trainer.elastic.progress import ProgressWriter

    name = seed_stage(fake, "restarted", tmp_path)
    ProgressWriter(str(tmp_path), ManualClock()).step_done(8, clock() - 5, 1)
    kube = connect(ClusterTarget(kubeconfig=str(kubeconfig)), sleep=clock.sleep)
    fake.faults.append(Fault("GET", ".*/jobs", "drop", times=2))
    first = clock()
    status = fetch_status(kube, "default", name, now=first, with_progress=True, clock=clock)
    assert fake.faults[0].times == 0 and clock() > first  # the retries took time
    assert status.progress["step_age_s"] == pytest.approx(clock() - (first - 5))
