"""What a person reads in `workload status` (#33, "Wording"), on objects the real controllers left
(tests/cluster/incidents_corpus/, ops_corpus/): who made the workload, a --no-pathways slice's budget, and
which conditions lead. Piped output's width is checked through the `elxpk` script on the real cluster
(tests/realcluster/test_why_real.py::test_piped_status_is_not_cut_at_80_columns)."""

from __future__ import annotations

import io

from rich.console import Console

from elxpk.cluster.records.status import compute_status
from elxpk.cluster.verbs.status_render import status_renderables, telling_conditions
from tests.cluster.captured import captured, load
from tests.cluster.test_status import created


def _status(objects: dict):
    return compute_status(objects["jobset"], objects["jobs"], objects["pods"], objects["workloads"],
                          created(objects) + 60)


def _text(status) -> str:
    console = Console(width=4096, record=True, file=io.StringIO())
    for renderable in status_renderables(status):
        console.print(renderable)
    return console.export_text()


def test_who_made_it_elxpk_xpk_or_neither():
    shown = {stage: _text(_status(load(stage))) for stage in ("ignored", "xpk_shaped", "plain")}
    assert "created by elxpk" in shown["ignored"] and "created by xpk" not in shown["ignored"]
    assert "created by xpk" in shown["xpk_shaped"]
    assert "created by" not in shown["plain"]


def test_a_no_pathways_slice_has_no_pod_budget_of_its_own():
    objects = captured("running")  # multi-controller: backoffLimit 0, the JobSet restarts are the budget
    status = _status(objects)
    assert {s.backoff_limit for s in status.slices} == {0}
    text = _text(status)
    assert "0/0 used" not in text and "0 left" not in text.split("Slices")[1]
    assert "none: a failed pod fails the slice (JobSet restart)" in text


def test_latest_conditions_lead_with_what_is_in_effect():
    failed = _status(load("failed"))
    # the JobSet's own list leads (newest first) with RestartingJobSet False "jobset failed"
    assert [c.type for c in telling_conditions(failed.conditions)][0] == "Failed"
    assert all(c.status == "True" for c in telling_conditions(failed.conditions))
    text = _text(failed)
    assert "RestartingJobSet" not in text and "FailJobSetFailurePolicyAction" in text
    running = _status(captured("running"))  # only "Suspended False: jobset is resumed": no table at all
    assert [c.type for c in running.conditions] == ["Suspended"]
    assert "Latest conditions" not in _text(running)
