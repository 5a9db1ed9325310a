"""#33, "counted more than once", on objects and Events captured from the real control plane: one incident,
one line, with its time, in time order (incident_merge.py). The same on the real cluster, through `elxpk`:
tests/realcluster/test_incidents_once_real.py and test_why_real.py::test_preempted_by_higher_priority."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from elxpk.cluster.objects.labels import RESTART_ATTEMPT, parse_time
from elxpk.cluster.records.incidents import collect
from tests.cluster.captured import load

HERE = Path(__file__).parent
WITH_EVENTS = sorted(p for corpus in ("incidents_corpus", "why_corpus") for p in (HERE / corpus).glob("*.json")
                     if "events" in json.loads(p.read_text()))


def _collect(objects: dict) -> list:
    return collect(objects["jobset"], objects["jobs"], objects["pods"], objects["workloads"],
                   objects.get("events") or [])


def test_the_corpora_with_events_are_many() -> None:
    assert len(WITH_EVENTS) >= 8, WITH_EVENTS


@pytest.mark.parametrize("path", WITH_EVENTS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_incident_once_dated_in_time_order(path: Path) -> None:
    incidents = _collect(json.loads(path.read_text()))
    assert all(i.time for i in incidents), [i.line() for i in incidents if not i.time]
    times = [parse_time(i.time) for i in incidents]
    assert times == sorted(times)
    assert len({i.id for i in incidents}) == len(incidents)
    # the JobSet controller's restart Events date the restart, they are not lines of their own
    assert not [i for i in incidents if i.kind == "event" and "applying RestartJobSet" in i.message]


def test_one_kueue_preemption_is_one_line() -> None:
    objects = json.loads((HERE / "why_corpus" / "preempted.json").read_text())
    said = {e["reason"] for e in objects["events"] if e["involvedObject"]["kind"] == "Workload"}
    assert {"Preempted", "EvictedDueToPreempted"} <= said  # what Kueue wrote: two Events, two conditions
    kueue = [i for i in _collect(objects) if "Preempt" in i.reason or "Preempt" in i.message]
    assert [(i.kind, i.reason, i.cause) for i in kueue] == [("kueue_eviction", "Preempted/InClusterQueue", "infra")]


def test_a_restart_whose_jobs_are_gone_is_dated_by_the_jobset_controllers_event() -> None:
    """A later restart deletes the Jobs that dated this one: the JobSet controller's Event still does."""
    objects = load("restarted")
    jobs = [j for j in objects["jobs"] if j["metadata"]["labels"].get(RESTART_ATTEMPT) != "1"]
    assert len(jobs) < len(objects["jobs"])
    with_jobs = [i for i in _collect(objects) if i.kind == "jobset_restart"]
    without = [i for i in collect(objects["jobset"], jobs, objects["pods"], objects["workloads"],
                                  objects["events"]) if i.kind == "jobset_restart"]
    assert len(with_jobs) == len(without) == 1
    assert abs((parse_time(without[0].time) or 0) - (parse_time(with_jobs[0].time) or 0)) < 2.0, (without, with_jobs)
    gone = [i for i in collect(objects["jobset"], jobs, objects["pods"], objects["workloads"], [])
            if i.kind == "jobset_restart"]
    assert gone[0].time is None  # neither kept: said so, not guessed


def _readmitted(objects: dict) -> dict:
    """As after Kueue admitted the workload again: the Evicted and Preempted conditions gone, the Events kept."""
    readmitted = json.loads(json.dumps(objects))
    for w in readmitted["workloads"]:
        w["status"]["conditions"] = [c for c in w["status"]["conditions"] if c["type"] not in ("Evicted", "Preempted")]
    return readmitted


def test_a_readmitted_preemption_is_still_one_kueue_eviction() -> None:
    """Issue 52 L6: once Kueue readmits the workload its conditions no longer say the preemption, only its two
    Events do: one `kueue_eviction` line, as the documented kind, never two `event` lines; the same incident
    (its id) as the conditions gave, so a watch that saw both repeats nothing."""
    objects = json.loads((HERE / "why_corpus" / "preempted.json").read_text())
    before = [i for i in _collect(objects) if i.kind == "kueue_eviction"]
    after = _collect(_readmitted(objects))
    kueue = [i for i in after if "Preempt" in i.reason or "Preempt" in i.message]
    assert [(i.kind, i.reason, i.cause) for i in kueue] == [("kueue_eviction", "Preempted", "infra")], after
    assert [i.id for i in kueue] == [i.id for i in before]
    assert "(UID: 7cf85980" in kueue[0].message  # the preemptor, as the conditions named it


def test_events_watch_shows_a_preemption_readmitted_between_snapshots_once(fake, clock, kube) -> None:
    """`events --watch` reads the preemption while the conditions say it, then the workload readmitted: one
    `kueue_eviction` line in all, no `event` line for Kueue's Events."""
    from elxpk.cluster.verbs.events_feed import follow
    from tests.cluster.captured import KINDS, load_captured, name_of

    objects = load_captured(fake, "preempted", "why_corpus")
    readmitted = _readmitted(objects)["workloads"]
    seen: list = []

    def emit(incident) -> None:
        seen.append(incident)
        for w in readmitted:  # admitted again while the first snapshot is shown
            fake.store.put(KINDS["workloads"], w)

    follow(kube, "why-preempt", name_of(objects), emit, watch=True, clock=clock, watch_s=1, refresh_s=0.0,
           max_watches=2, sleep=clock.sleep)
    kueue = [(i.kind, i.reason) for i in seen if "Preempt" in i.reason or "Preempt" in i.message]
    assert kueue == [("kueue_eviction", "Preempted/InClusterQueue")], [i.line() for i in seen]


def test_the_restart_count_is_said_once_on_the_newest_restart() -> None:
    """Issue 52 L6: the JobSet's one count of restarts towards maxRestarts was repeated on every restart line
    ("(8 counted)" nine times, read as 8 each): it is said on the newest restart only, out of all of them."""
    objects = json.loads(json.dumps(load("restarted")))
    objects["jobset"]["status"].update(restarts=3, restartsCountTowardsMax=2)
    restarts = [i for i in _collect(objects) if i.kind == "jobset_restart"]
    assert sorted(i.message.split(";")[0] for i in restarts) == [
        "JobSet restart 1 of incidents", "JobSet restart 2 of incidents",
        "JobSet restart 3 of incidents (2 of 3 counted towards maxRestarts)"]
