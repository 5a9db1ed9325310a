"""why_capacity.py on what the real Kueue left at each stage of a flex-start workload
(tests/cluster/capacity_corpus/, written by tests/realcluster/test_capacity_real.py with
ELXPK_CAPACITY_CAPTURE): the newest ProvisioningRequest's state decides the reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from elxpk.cluster.diagnosis.why_capacity import capacity_reasons, label_gap, owned_requests

CORPUS = Path(__file__).parent / "capacity_corpus"
EXPECTED = {"waiting": "capacity-waiting", "accepted": "capacity-waiting", "provisioned": "capacity-provisioned",
            "failed": "capacity-failed", "booking-expired": "capacity-booking-expired"}


def _load(stage: str) -> dict:
    return json.loads((CORPUS / f"{stage}.json").read_text(encoding="utf-8"))


def test_the_corpus_holds_every_stage():
    assert sorted(p.stem for p in CORPUS.glob("*.json")) == sorted(EXPECTED)


@pytest.mark.parametrize("stage", sorted(EXPECTED))
def test_each_stage_reads_as_its_cause(stage):
    case = _load(stage)
    reasons = capacity_reasons(case["workload"], case["provisioning_requests"], case["name"])
    assert [r.cause for r in reasons] == [EXPECTED[stage]]
    request = case["provisioning_requests"][0]["metadata"]["name"]
    assert f"ProvisioningRequest {request}" in reasons[0].text
    assert reasons[0].detail.startswith("Kueue: admission check dws-prov ")
    if EXPECTED[stage] in ("capacity-failed", "capacity-booking-expired"):
        assert reasons[0].text.endswith("Kueue rejected the check and deactivated the workload")
        assert "--replace" in reasons[0].fix and "--spot" in reasons[0].fix


@pytest.mark.parametrize("stage", sorted(EXPECTED))
def test_requests_of_another_workload_are_not_read(stage):
    """Owned by uid: the same requests under a Workload of another uid give no reason at all."""
    case = _load(stage)
    other = {**case["workload"], "metadata": {**case["workload"]["metadata"], "uid": "another-uid"}}
    assert owned_requests(other, case["provisioning_requests"]) == []
    assert capacity_reasons(other, case["provisioning_requests"], case["name"]) == []


def test_the_newest_attempt_counts():
    """Kueue makes a new request per attempt: the newest decides, and the count is said."""
    failed, waiting = _load("failed"), _load("waiting")
    old = failed["provisioning_requests"][0]
    new = {**waiting["provisioning_requests"][0],
           "metadata": {**waiting["provisioning_requests"][0]["metadata"], "ownerReferences":
                        old["metadata"]["ownerReferences"], "creationTimestamp": "2099-01-01T00:00:00Z"}}
    reasons = capacity_reasons(failed["workload"], [old, new], failed["name"])
    assert reasons[0].cause == "capacity-waiting" and "(attempt 2)" in reasons[0].text
    assert capacity_reasons(failed["workload"], [new, old], failed["name"]) == reasons  # order of the LIST
    assert capacity_reasons(failed["workload"], [old], failed["name"])[0].cause == "capacity-failed"


def test_label_gap_only_when_the_shape_exists():
    shape = ("cloud.google.com/gke-tpu-accelerator", "cloud.google.com/gke-tpu-topology")
    selector = {shape[0]: "tpu-v5p-slice", shape[1]: "2x2x1", "cloud.google.com/gke-spot": "true"}
    plain = {"labels": {shape[0]: "tpu-v5p-slice", shape[1]: "2x2x1"}}
    spot = {"labels": {**plain["labels"], "cloud.google.com/gke-spot": "true"}}
    assert label_gap(selector, (plain,), shape)[0] == "cloud.google.com/gke-spot=true"  # type: ignore[index]
    assert label_gap(selector, (plain, spot), shape) is None  # a spot pool of that shape exists
    assert label_gap(selector, ({"labels": {shape[0]: "tpu-v6e-slice", shape[1]: "2x2"}},), shape) is None


def test_why_on_a_cluster_without_provisioning_requests(capsys, k, fake, monkeypatch):
    """The real Kueue's Workload with a Pending check (why_corpus), on an API server that does not serve
    autoscaling.x-k8s.io: one LIST answered 404, and --why says what it said before (the check's line)."""
    from tests.cluster.captured import load_captured
    from tests.cluster.conftest import run_cli

    monkeypatch.setenv("COLUMNS", "200")
    load_captured(fake, "admission_check_pending", "why_corpus")
    code, out, err = run_cli(capsys, "workload", "status", "why-check", "-n", "why-check", "--why", "-o", "json", *k)
    assert code == 0, err
    assert [r["cause"] for r in json.loads(out)["why"]] == ["admission-check"]
    asked = [c for c in fake.calls if "provisioningrequests" in c.path]
    assert [(c.method, c.path) for c in asked] == [
        ("GET", "/apis/autoscaling.x-k8s.io/v1/namespaces/why-check/provisioningrequests")]
    # Plain status makes no extra call for it.
    before = len(fake.calls)
    code, _, err = run_cli(capsys, "workload", "status", "why-check", "-n", "why-check", "-o", "json", *k)
    assert code == 0, err
    assert not [c for c in fake.calls[before:] if "provisioningrequests" in c.path]
