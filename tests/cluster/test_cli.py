"""The `elxpk workload` verbs where the fake API server is needed: the requests not sent after bad flags, a
403, a cluster without JobSet, GKE's credential endpoint. The objects it serves are captured from the real
control plane (tests/cluster/captured.py); status, list, wait, logs, kill-slice and delete on the real
controllers are tests/realcluster/test_ops_real.py and test_lifecycle.py."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.cluster.captured import load_captured
from tests.cluster.conftest import run_cli


@pytest.fixture(autouse=True)
def wide_terminal(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # Rich would otherwise fold table cells at 80 columns


def test_bad_flags_are_one_line_each_and_exit_2(capsys, k, fake):
    before = len(fake.calls)
    code, _, err = run_cli(capsys, "workload", "wait", "x", "--for", "ever", "--timeout", "soon", "-o", "xml", *k)
    assert code == 2
    lines = err.splitlines()
    assert len(lines) == 3 and lines[0] == "error: --for 'ever': use one of completed, running"
    assert lines[1].startswith("error: --timeout 'soon': ") and "not a number with a unit" in lines[1]
    assert lines[2] == "error: -o/--output 'xml': use table, json or yaml"
    code, _, err = run_cli(capsys, "workload", "kill-slice", "x", "--slice", "-1", *k)
    assert code == 2 and err.strip() == "error: --slice -1: must be 0 or more (a slice index, or random)"
    code, _, err = run_cli(capsys, "workload", "status", "x", "-n", "Bad_NS", *k)
    assert code == 2 and "--namespace 'Bad_NS' is not a valid namespace name" in err
    assert len(fake.calls) == before  # nothing was sent


def test_not_found_missing_jobset_and_forbidden_are_one_line(fake, capsys, k, jobset_crd, tmp_path):
    code, _, err = run_cli(capsys, "workload", "status", "ghost", *k)
    assert code == 1 and err == 'error: workload "ghost" not found in namespace "default" (`elxpk workload list` shows what exists)\n'
    fake.forbidden.add(("list", "pods"))
    load_captured(fake)
    code, _, err = run_cli(capsys, "workload", "status", "ops", *k)
    assert code == 1 and err.startswith('error: permission denied (403): you need RBAC permission to list Pods in '
                                        'namespace "default"')
    from tests.support.fake_apiserver import start_fake

    bare = start_fake(crd_file=jobset_crd, install_jobset=False)
    try:
        kc = bare.write_kubeconfig(tmp_path / "bare.yaml")
        code, _, err = run_cli(capsys, "workload", "list", "--kubeconfig", str(kc))
        assert code == 1 and err.startswith("error: JobSet is not installed on this cluster: install")
        assert "Traceback" not in err
    finally:
        bare.stop()


def test_gke_flags_end_to_end(capsys, tmp_path, monkeypatch, jobset_crd, clock):
    from tests.support.fake_apiserver import start_fake
    from tests.support.fake_gke import FakeGke
    from tests.support.tls import make_tls

    tls = make_tls(tmp_path / "tls")
    api = start_fake(crd_file=jobset_crd, tls=tls.server_context(), clock=clock)
    gke = FakeGke().start()
    try:
        gke.add_cluster("proj", "us-central2-b", "c1", endpoint=api.url.removeprefix("https://"), ca_pem=tls.ca_pem)
        monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(gke.write_service_account(tmp_path / "sa.json")))
        monkeypatch.setenv("ELXPK_CONTAINER_API_ENDPOINT", gke.url)
        config = tmp_path / "config.yaml"
        config.write_text("project: proj\nzone: us-central2-b\ncluster: c1\n")
        monkeypatch.setenv("ELXPK_CONFIG", str(config))
        load_captured(api, "quota", "why_corpus")  # a workload Kueue holds: over the ClusterQueue's quota
        code, out, err = run_cli(capsys, "workload", "status", "why-quota", "-n", "why-quota", "-o", "json")
        assert code == 0, err
        assert json.loads(out)["state"] == "Queued"
        assert api.seen_tokens[-1] in gke.issued
    finally:
        gke.stop()
        api.stop()


def test_cli_start_does_not_import_cluster_clients():
    code = ("import sys; from elxpk.cli import workload_status, workload_list, workload_delete, workload_logs, "
            "workload_wait, workload_kill_slice, workload_events; "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('kubernetes', 'google', 'jax')]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
