"""`kill-slice --mode exit` against an API server with its own CA, as every GKE cluster has (#43): the exec goes
through the official client's WebSocket, which reads a CA file (`ssl_ca_cert`), not the PEM data the kubeconfig
gives. The fake API server serves TLS with a CA of its own (tests/support/tls.py) and the exec WebSocket
(tests/support/fake_exec.py). The same against the real control plane, whose process pools serve exec, is
the `exit` fault of tests/realcluster/test_operator_replay.py (the real-cluster tier); this one keeps the
CA's check in the fast tier."""

from __future__ import annotations

import os
import stat
import tempfile

from elxpk.cli.main import main
from tests.cluster.captured import load_captured
from tests.support.fake_apiserver import start_fake
from tests.support.tls import make_tls


def test_exit_mode_execs_through_the_clusters_own_ca(capsys, tmp_path, jobset_crd, clock, monkeypatch):
    tls = make_tls(tmp_path / "tls")
    api = start_fake(crd_file=jobset_crd, tls=tls.server_context(), clock=clock)
    # The CA file the exec reads is private and gone after it: the temporary directory is this test's
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    seen: list[tuple[str, int]] = []

    def on_exec(namespace, pod, container, command):
        seen.extend((p.name, stat.S_IMODE(p.stat().st_mode)) for p in (tmp_path / "tmp").iterdir())
        return "", 0

    try:
        objects = load_captured(api)
        api.store.on_exec = on_exec
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig.yaml", ca_pem=tls.ca_pem)
        code = main(["workload", "kill-slice", "ops", "--slice", "1", "--mode", "exit", "--yes",
                     "--kubeconfig", str(kubeconfig)])
        out, err = capsys.readouterr()
        assert code == 0, err
        assert "CERTIFICATE_VERIFY_FAILED" not in err
        slice_1 = sorted(p["metadata"]["name"] for p in objects["pods"]
                         if p["metadata"]["labels"]["jobset.sigs.k8s.io/job-index"] == "1")
        assert sorted(e[1] for e in api.store.execs) == slice_1
        assert f"slice 1 of ops: {len(slice_1)} pods sent signal 15" in out  # the default --exit-code 143: SIGTERM
    finally:
        api.stop()
    assert seen and all(mode == 0o600 for _, mode in seen), seen
    assert not [p for p in os.listdir(tmp_path / "tmp") if p.startswith("elxpk-")]  # removed after the exec
