"""Naming the preemptor of a Kueue preemption (elxpk/cluster/records/preemptor.py) from Kueue's own words, on the
objects captured from the real Kueue (tests/cluster/why_corpus/preempted.json: test_why_real's preemption)."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from elxpk.cluster.records.preemptor import describe, preemptor_uid

CAPTURED = json.loads((Path(__file__).parent / "why_corpus" / "preempted.json").read_text())


def test_the_preemptors_uid_is_read_from_kueues_condition_and_named_from_the_workloads():
    (preempted,) = CAPTURED["workloads"]
    condition = next(c for c in preempted["status"]["conditions"] if c["type"] == "Preempted")
    uid = preemptor_uid(condition["message"])
    assert uid is not None and uid in condition["message"] and uid != preempted["metadata"]["uid"]
    # The capture holds the preempted Workload only: a listing without the preemptor names nobody ...
    assert describe(CAPTURED["workloads"], uid) is None
    # ... and one with it (here the captured Workload under the preemptor's UID) names it, owner and priority.
    listed = [{**preempted, "metadata": {**preempted["metadata"], "uid": uid}}]
    assert describe(listed, uid) == "Workload why-preempt/jobset-why-low-2528e (JobSet why-low, priority low (250))"


@given(st.text(max_size=200))
def test_any_text_gives_a_uid_from_kueues_pattern_or_none(text):
    uid = preemptor_uid(text)
    assert uid is None or f"(UID: {uid}" in text
