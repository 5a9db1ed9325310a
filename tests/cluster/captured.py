"""Objects captured from the real control plane, put into the fake API server's store for the tests of faults
a real API server does not show or make on demand (an outage, an exec that fails, a PodDisruptionBudget's
answer, a name that must never reach a collection URL, the watch protocol, call counts, log faults): what
the real JobSet, Job and Kueue controllers wrote, not a restatement of them. No controller runs here.

- ops_corpus/CASE.json: the workload `ops` of tests/realcluster/test_ops_real.py (multi-controller
  v5litepod-16, 2 slices of 4 VMs) running and succeeded, written with ELXPK_OPS_CAPTURE=DIR;
- incidents_corpus/STAGE.json: the stages of tests/realcluster/incident_story.py, with their Events,
  written with ELXPK_INCIDENTS_CAPTURE=DIR;
- why_corpus/CASE.json: the stuck workloads of tests/realcluster/test_why_real.py (ELXPK_WHY_CAPTURE=DIR).
All three are written by tests/realcluster/capture.py.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

from tests.support.fake_apiserver import FakeApiServer

HERE = Path(__file__).parent
OPS = "ops"  # the captured workload's name in ops_corpus
INCIDENTS = "incidents_corpus"
# what each capture holds -> the store's (group, plural)
KINDS = {"jobset": ("jobset.x-k8s.io", "jobsets"), "jobs": ("batch", "jobs"), "pods": ("", "pods"),
         "workloads": ("kueue.x-k8s.io", "workloads"), "local_queue": ("kueue.x-k8s.io", "localqueues"),
         "events": ("", "events")}


def captured(case: str, corpus: str = "ops_corpus") -> dict:
    """CASE.json: {"jobset": {...}, "jobs": [...], "pods": [...], "workloads": [...], ...} as captured."""
    return dict(json.loads((HERE / corpus / f"{case}.json").read_text()))


def load_captured(fake: FakeApiServer, case: str = "running", corpus: str = "ops_corpus", *,
                  fresh_uids: bool = False, without: tuple[str, ...] = (), keep_existing: bool = False) -> dict:
    """Put the captured objects (but the kinds in `without`) into the fake's store, replacing those of the
    same name, or leaving them with `keep_existing`; with `fresh_uids` as if created again (the store gives
    them new uids). Returns the objects."""
    objects = captured(case, corpus)
    for kind, key in KINDS.items():
        found = None if kind in without else objects.get(kind)
        for obj in found if isinstance(found, list) else [found] if found else []:
            obj = copy.deepcopy(obj)
            if fresh_uids:
                obj["metadata"].pop("uid", None)
            if not (keep_existing and fake.store.get(key, obj["metadata"].get("namespace", ""),
                                                     obj["metadata"]["name"]) is not None):
                fake.store.put(key, obj)
    return objects


def load(stage: str) -> dict:
    """A stage of the incident story, as captured."""
    return captured(stage, INCIDENTS)


def seed(fake: FakeApiServer, stage: str, *, without: tuple[str, ...] = ()) -> dict:
    """A stage of the incident story into the store; objects an earlier stage put there stay as they were."""
    return load_captured(fake, stage, INCIDENTS, without=without, keep_existing=True)


def replace_with(fake: FakeApiServer, case: str) -> None:
    """The workload as captured in another state: the store's objects of `ops` go (with their children, as
    the garbage collector takes them) and the captured ones take their place."""
    fake.store.delete(KINDS["jobset"], "default", OPS)
    for key in (KINDS["jobs"], KINDS["pods"]):  # those of earlier JobSet restarts, owned by no object here
        for obj in fake.store.list(key, "default", f"jobset.sigs.k8s.io/jobset-name={OPS}"):
            fake.store.delete(key, "default", obj["metadata"]["name"])
    load_captured(fake, case)


def name_of(objects: dict) -> str:
    return str(objects["jobset"]["metadata"]["name"])


def pod_of(objects: dict, slice_index: int, *, phase: str | None = None) -> dict:
    """The pod of `slice_index` (the one in `phase`, when given)."""
    return next(p for p in objects["pods"] if p["metadata"]["labels"]["jobset.sigs.k8s.io/job-index"] == str(
        slice_index) and (phase is None or p["status"].get("phase") == phase))


def with_checkpoint_dir(objects: dict, directory: Path) -> dict:
    """`objects` whose JobSet gives its trainer containers `directory` as ELXPK_CHECKPOINT_DIR (as elxpk
    renders it), where a test's trainer-written progress record is; the captured path is dropped."""
    for rjob in objects["jobset"]["spec"]["replicatedJobs"]:
        for box in rjob["template"]["spec"]["template"]["spec"]["containers"]:
            box["env"] = [e for e in box.get("env") or [] if e["name"] != "ELXPK_CHECKPOINT_DIR"] + [
                {"name": "ELXPK_CHECKPOINT_DIR", "value": str(directory)}]
            for key in ("args", "command"):
                box[key] = [a for a in box.get(key) or [] if not a.startswith("--checkpoint-dir")]
    return objects


def seed_stage(fake: FakeApiServer, stage: str, checkpoints: Path) -> str:
    """The incident story's `stage` in the fake's store, its JobSet naming `checkpoints` (ELXPK_CHECKPOINT_DIR)
    as elxpk renders it, where a test's trainer-written progress record is; the workload's name."""
    objects = with_checkpoint_dir(copy.deepcopy(captured(stage, INCIDENTS)), checkpoints)
    for kind, key in KINDS.items():
        found = objects.get(kind)
        for obj in found if isinstance(found, list) else [found] if found else []:
            fake.store.put(key, obj)
    return str(objects["jobset"]["metadata"]["name"])
