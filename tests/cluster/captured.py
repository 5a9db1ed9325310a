"""Objects captured from the real control plane, put into the fake API server's store for the tests of faults
a real API server does not make on demand (an outage, an exec that fails, a PodDisruptionBudget's answer, a
name that must never reach a collection URL): what the real JobSet, Job and Kueue controllers wrote, not a
restatement of them.

- ops_corpus/running.json and succeeded.json: the workload `ops` of tests/realcluster/test_ops_real.py
  (multi-controller v5litepod-16, 2 slices of 4 VMs), written with ELXPK_OPS_CAPTURE=DIR;
- why_corpus/CASE.json: the stuck workloads of tests/realcluster/test_why_real.py (ELXPK_WHY_CAPTURE=DIR).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

from tests.support.fake_apiserver import FakeApiServer

HERE = Path(__file__).parent
OPS = "ops"  # the captured workload's name
# what each capture holds -> the store's (group, plural)
KINDS = {"jobset": ("jobset.x-k8s.io", "jobsets"), "jobs": ("batch", "jobs"), "pods": ("", "pods"),
         "workloads": ("kueue.x-k8s.io", "workloads"), "local_queue": ("kueue.x-k8s.io", "localqueues")}


def captured(case: str, corpus: str = "ops_corpus") -> dict:
    return dict(json.loads((HERE / corpus / f"{case}.json").read_text()))


def load_captured(fake: FakeApiServer, case: str = "running", corpus: str = "ops_corpus", *,
                  fresh_uids: bool = False) -> dict:
    """Put the captured objects into the fake's store (replacing those of the same name); with `fresh_uids`
    as if created again (the store gives them new uids). Returns the objects."""
    objects = captured(case, corpus)
    for kind, key in KINDS.items():
        found = objects.get(kind)
        for obj in found if isinstance(found, list) else [found] if found else []:
            obj = copy.deepcopy(obj)
            if fresh_uids:
                obj["metadata"].pop("uid", None)
            fake.store.put(key, obj)
    return objects


def replace_with(fake: FakeApiServer, case: str) -> None:
    """The workload as captured in another state: the store's objects of `ops` go (with their children, as
    the garbage collector takes them) and the captured ones take their place."""
    fake.store.delete(KINDS["jobset"], "default", OPS)
    for key in (KINDS["jobs"], KINDS["pods"]):  # those of earlier JobSet restarts, owned by no object here
        for obj in fake.store.list(key, "default", f"jobset.sigs.k8s.io/jobset-name={OPS}"):
            fake.store.delete(key, "default", obj["metadata"]["name"])
    load_captured(fake, case)
