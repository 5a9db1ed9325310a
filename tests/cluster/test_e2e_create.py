"""End to end: the real `elxpk workload create` (render + submit) against the fake API server, then
status, wait and delete on what the scripted controller makes of it."""

from __future__ import annotations

import json

import pytest

from tests.cluster.conftest import run_cli
from tests.support.jobset_controller import ScriptedJobSet

pytest.importorskip("elxpk.create.render")


def test_create_then_follow_the_workload(fake, kubeconfig, clock, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    k = ["--kubeconfig", str(kubeconfig)]
    create = ["workload", "create", "--workload", "e2e", "--tpu-type", "v5p-16", "--num-slices", "2",
              "--elastic-slices", "1", "--command", "python train.py", *k]
    code, out, err = run_cli(capsys, *create, "--dry-run-server")
    assert code == 0, err
    assert fake.store.list(("jobset.x-k8s.io", "jobsets"), "default") == []  # validated, not persisted

    code, out, err = run_cli(capsys, *create)
    assert code == 0, err
    [stored] = fake.store.list(("jobset.x-k8s.io", "jobsets"), "default")
    assert stored["metadata"]["labels"]["xpk.google.com/workload"] == "e2e"  # passed the CRD schema check

    code, _, err = run_cli(capsys, *create)
    assert code == 1 and "already exists" in err and "--replace" in err

    ctl = ScriptedJobSet(fake.store, "default", "e2e", clock)
    ctl.queue()
    code, out, _ = run_cli(capsys, "workload", "status", "e2e", "-o", "json", *k)
    assert json.loads(out)["state"] == "Queued"
    ctl.admit()
    ctl.run()
    code, out, _ = run_cli(capsys, "workload", "status", "e2e", "-o", "json", *k)
    data = json.loads(out)
    assert (data["state"], data["slices_healthy"], data["slices_total"], data["head"]) == ("Running", 2, 2, "Running")
    ctl.complete()
    assert run_cli(capsys, "workload", "wait", "e2e", "--timeout", "10s", *k)[0] == 0
    assert run_cli(capsys, "workload", "delete", "e2e", *k)[0] == 0
    assert fake.store.list(("jobset.x-k8s.io", "jobsets"), "default") == []
    assert fake.store.list(("", "pods"), "default") == []
