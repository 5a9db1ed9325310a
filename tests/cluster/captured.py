"""The objects of tests/cluster/incidents_corpus/, captured from the real control plane by
the story of tests/realcluster/incident_story.py (ELXPK_INCIDENTS_CAPTURE=DIR writes them again), put into the fake API
server for the tests that stay on it: the watch protocol, call counts and log faults, which a real API server
does not show or produce on demand. No controller runs: the objects are what the real ones left."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.fake_apiserver import FakeApiServer

CORPUS = Path(__file__).parent / "incidents_corpus"
RESOURCES = {"jobset": ("jobset.x-k8s.io", "jobsets"), "jobs": ("batch", "jobs"), "pods": ("", "pods"),
             "workloads": ("kueue.x-k8s.io", "workloads"), "events": ("", "events")}


def load(stage: str) -> dict:
    """STAGE.json: {"jobset": {...}, "jobs": [...], "pods": [...], "workloads": [...], "events": [...]}."""
    return dict(json.loads((CORPUS / f"{stage}.json").read_text()))


def seed(fake: FakeApiServer, stage: str, *, without: tuple[str, ...] = ()) -> dict:
    """Store the objects of `stage` (but the kinds in `without`) as the API server held them; returns them."""
    objects = load(stage)
    for kind, key in RESOURCES.items():
        if kind in without:
            continue
        items = objects[kind] if isinstance(objects[kind], list) else [objects[kind]]
        for obj in items:
            if fake.store.get(key, obj["metadata"].get("namespace", ""), obj["metadata"]["name"]) is None:
                fake.store.create(key, obj)
    return objects


def name_of(objects: dict) -> str:
    return str(objects["jobset"]["metadata"]["name"])


def pod_of(objects: dict, slice_index: int, *, phase: str | None = None) -> dict:
    """The pod of `slice_index` (the one in `phase`, when given)."""
    return next(p for p in objects["pods"] if p["metadata"]["labels"]["jobset.sigs.k8s.io/job-index"] == str(
        slice_index) and (phase is None or p["status"].get("phase") == phase))
