"""The `elxpk workload` verbs end to end: the real CLI entry point, a kubeconfig, the fake API server."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from tests.cluster.conftest import pathways_jobset, run_cli, running, scripted


@pytest.fixture(autouse=True)
def wide_terminal(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # Rich would otherwise fold table cells at 80 columns


def test_status_table_and_json(fake, clock, capsys, k):
    ctl = running(fake, clock, slices=3, vms=2, backoff=4)
    ctl.crash_slice(1)
    code, out, err = run_cli(capsys, "workload", "status", "train", *k)
    assert code == 0, err
    assert "Degraded  slice 1 restarting (budget 2/4 used)" in out
    assert "Slices healthy   2/3" in out
    assert "0 (maxRestarts 1: 0 counted, 1 left)" in out
    assert "2/4 used, 2 left" in out  # slice 1's restart budget
    code, out, _ = run_cli(capsys, "workload", "status", "train", "-o", "json", *k)
    data = json.loads(out)
    assert (data["state"], data["slices_healthy"], data["slices_total"]) == ("Degraded", 2, 3)
    assert data["slices"][1]["budget_left"] == 2 and data["max_restarts"] == 1
    code, out, _ = run_cli(capsys, "workload", "status", "train", "-o", "yaml", *k)
    assert yaml.safe_load(out)["state"] == "Degraded"


def test_list_filters_and_json(fake, clock, capsys, k):
    running(fake, clock, "alpha")
    running(fake, clock, "beta", xpk=True).complete()
    code, out, _ = run_cli(capsys, "workload", "list", "-o", "json", *k)
    rows = {r["name"]: r for r in json.loads(out)}
    assert rows["alpha"]["state"] == "Running" and rows["beta"]["state"] == "Succeeded"
    assert rows["beta"]["created_by"] == "xpk" and rows["alpha"]["created_by"] is None
    _, out, _ = run_cli(capsys, "workload", "list", "--status", "succeeded", "-o", "json", *k)
    assert [r["name"] for r in json.loads(out)] == ["beta"]
    _, out, _ = run_cli(capsys, "workload", "list", "--filter", "^al", "--regex", "-o", "json", *k)
    assert [r["name"] for r in json.loads(out)] == ["alpha"]
    code, out, _ = run_cli(capsys, "workload", "list", *k)
    assert code == 0 and "alpha" in out and "beta" in out and "(xpk)" in out


def test_wait_exit_codes(fake, clock, capsys, k):
    ctl = running(fake, clock, "done")
    ctl.complete()
    assert run_cli(capsys, "workload", "wait", "done", *k)[0] == 0
    failed = running(fake, clock, "broken", max_restarts=0)
    failed.exhaust_slice(0)
    code, _, err = run_cli(capsys, "workload", "wait", "broken", *k)
    assert code == 1 and err.splitlines()[-1].startswith("error: workload broken failed: jobset broken job")
    running(fake, clock, "slow")
    code, _, err = run_cli(capsys, "workload", "wait", "slow", "--timeout", "0.2s", "--poll", "0.05s", *k)
    assert code == 124 and "still Running" in err and "Traceback" not in err
    assert run_cli(capsys, "workload", "wait", "slow", "--for", "running", *k)[0] == 0


def test_bad_flags_are_one_line_each_and_exit_2(capsys, k, fake):
    before = len(fake.calls)
    code, _, err = run_cli(capsys, "workload", "wait", "x", "--for", "ever", "--timeout", "soon", "-o", "xml", *k)
    assert code == 2
    assert err.splitlines() == ["error: --for ever: use completed or running",
                                "error: --timeout soon: 'soon' is not a number with a unit",
                                "error: -o/--output 'xml': use table, json or yaml"]
    code, _, err = run_cli(capsys, "workload", "kill-slice", "x", "--slice", "-1", *k)
    assert code == 2 and err.strip() == "error: --slice -1: must be 0 or more"
    code, _, err = run_cli(capsys, "workload", "status", "x", "-n", "Bad_NS", *k)
    assert code == 2 and "--namespace 'Bad_NS' is not a valid namespace name" in err
    assert len(fake.calls) == before  # nothing was sent


def test_not_found_missing_jobset_and_forbidden_are_one_line(fake, clock, capsys, k, jobset_crd, tmp_path):
    code, _, err = run_cli(capsys, "workload", "status", "ghost", *k)
    assert code == 1 and err == 'error: workload "ghost" not found in namespace "default" (`elxpk workload list` shows what exists)\n'
    fake.forbidden.add(("list", "pods"))
    running(fake, clock)
    code, _, err = run_cli(capsys, "workload", "status", "train", *k)
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


def test_delete_and_delete_all(fake, clock, capsys, k):
    running(fake, clock, "one")
    running(fake, clock, "two")
    code, out, _ = run_cli(capsys, "workload", "delete", "one", *k)
    assert code == 0 and "jobset/one deleted" in out
    code, _, err = run_cli(capsys, "workload", "delete", "--all", *k)  # stdin is not a terminal under pytest
    assert code == 2 and "pass --yes" in err
    assert fake.store.list(("jobset.x-k8s.io", "jobsets"), "default")
    code, out, _ = run_cli(capsys, "workload", "delete", "--all", "--yes", *k)
    assert code == 0 and fake.store.list(("jobset.x-k8s.io", "jobsets"), "default") == []
    assert run_cli(capsys, "workload", "delete", "one", "--all", *k)[0] == 2


def test_logs_and_kill_slice(fake, clock, capsys, k):
    ctl = running(fake, clock, slices=2, vms=2)
    ctl.head_log("hello", "world")
    code, out, err = run_cli(capsys, "workload", "logs", "train", *k)
    assert code == 0 and out == "hello\nworld\n" and "head" in err
    code, out, _ = run_cli(capsys, "workload", "kill-slice", "train", "--slice", "1", "--yes", *k)
    assert code == 0 and "2 pods force-deleted" in out
    assert len(ctl.pods("jobset.sigs.k8s.io/job-index=1,jobset.sigs.k8s.io/replicatedjob-name=worker")) == 0
    code, _, err = run_cli(capsys, "workload", "kill-slice", "train", "--slice", "0", *k)
    assert code == 2 and "pass --yes" in err


def test_kill_slice_watch_reports_recovery(fake, clock, capsys, k):
    import threading
    import time

    ctl = running(fake, clock, slices=2, vms=2)
    selector = "jobset.sigs.k8s.io/job-index=1,jobset.sigs.k8s.io/replicatedjob-name=worker"
    killed = {p["metadata"]["uid"] for p in ctl.pods(selector)}
    stop = threading.Event()

    def job_controller() -> None:  # plays the Job controller and the trainer while the CLI watches
        deadline = time.monotonic() + 20
        while not stop.is_set() and time.monotonic() < deadline:
            ctl.reconcile()
            fresh = [p for p in ctl.pods(selector) if p["metadata"]["uid"] not in killed]
            if len(fresh) == 2 and all(p["status"]["phase"] == "Running" for p in fresh):
                ctl.head_log(json.dumps({"event": "first_step_after_recovery", "time": time.time(), "step": 9}))
                return
            stop.wait(0.05)

    thread = threading.Thread(target=job_controller)
    code, out, err = None, "", ""
    try:
        thread.start()
        code, out, err = run_cli(capsys, "workload", "kill-slice", "train", "--slice", "1", "--yes", "--watch",
                             "--poll", "0.05s", "--timeout", "20s", *k)
    finally:
        stop.set()
        thread.join()
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "killed slice 1 of train: 2 pods force-deleted"
    assert lines[1].startswith("slice 1 running again after ")
    assert lines[2].startswith("first training step after recovery: ")


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
        scripted(api, clock, pathways_jobset()).queue()
        code, out, err = run_cli(capsys, "workload", "status", "train", "-o", "json")
        assert code == 0, err
        assert json.loads(out)["state"] == "Queued"
        assert api.seen_tokens[-1] in gke.issued
    finally:
        gke.stop()
        api.stop()


def test_cli_start_does_not_import_cluster_clients():
    code = ("import sys; from elxpk.cli import workload_ops; "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('kubernetes', 'google', 'jax')]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
