"""What a kubeconfig names, through the console script as the user runs it (issue #29, class 2): one real
`elxpk workload status --kubeconfig ...` per kind of break, and the same through KUBECONFIG. Each is one
`error:` line with its exit code, no traceback, no library warning, and no hang (the run's own timeout is
a generous bound to catch one, not a speed claim)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from elxpk.cluster.access.exec_credential import EXEC_TIMEOUT_S
from tests.cluster.kubeconfig_shapes import EXEC_API, kubeconfig, plugins, special_files, write
from tests.support.fake_apiserver import start_fake
from tests.support.processes import run_measured

ELXPK = Path(sys.executable).parent / "elxpk"


def elxpk(*argv: str, env: dict | None = None) -> dict:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("ELXPK_") and k != "KUBECONFIG"}
    environ.update(env or {})
    return run_measured([str(ELXPK), *argv], env=environ)


def one_line(done: dict, code: int, *words: str) -> str:
    err = done["err"]
    assert done["code"] == code, err
    assert len(err.splitlines()) == 1 and err.startswith("error: "), err
    assert "Traceback" not in err and "internal error" not in err and "Warning" not in err, err
    for word in words:
        assert word in err, err
    return err


def _status(path: Path) -> dict:
    return elxpk("workload", "status", "x", "--kubeconfig", str(path))


def test_each_kind_of_break_is_one_line_exit_2(tmp_path):
    scripts = plugins(tmp_path / "bin")
    fifo, zero = (p for p in special_files(tmp_path / "special") if p.endswith("fifo") or p == "/dev/zero")
    cases = [
        (kubeconfig(user={"tokenFile": fifo}), ["tokenFile", "FIFO"]),
        (kubeconfig(user={"tokenFile": zero}), ["tokenFile", "character device"]),
        (kubeconfig("https://127.0.0.1:1", cluster={"certificate-authority": str(tmp_path)}),
         ["certificate-authority", "directory"]),
        (kubeconfig(user={"exec": {"apiVersion": EXEC_API, "command": str(scripts["flood"])}}),
         ["flood.sh", "printed more than 256.0 KiB"]),
        (kubeconfig(user={"exec": {"apiVersion": EXEC_API, "command": str(scripts["exit3"])}}),
         ["exit3.sh", "exited 3: login expired"]),
        (kubeconfig(user={"exec": {"apiVersion": EXEC_API, "command": "no-such-plugin-elxpk"}}),
         ["user 'u': exec", "not found on PATH"]),
        (kubeconfig(cluster={"proxy-url": "socks5://127.0.0.1:1080"}), ["proxy-url", "PySocks"]),
        (kubeconfig(cluster={"proxy-url": "::::"}), ["proxy-url"]),
        (kubeconfig("ftp://127.0.0.1:1"), ["cluster 'c': server"]),
        (kubeconfig(user={"token": "t\u00f6k"}), ["user 'u': the token", "not ASCII"]),  # was internal error
        (kubeconfig(contexts=[{"name": "x", "context": {"cluster": "c", "user": "nope"}}]), ["user 'nope'"]),
        (kubeconfig(user={"tokenFile": str(tmp_path / "special" / "zero-link")}), ["zero-link", "character device"]),
    ]
    for number, (config, words) in enumerate(cases):
        one_line(_status(write(tmp_path / f"k{number}.yaml", config)), 2, f"k{number}.yaml", *words)


def test_kubeconfig_env_naming_a_directory_or_fifo_is_refused_naming_it(tmp_path):
    for path, kind in special_files(tmp_path / "special").items():
        if path == "/dev/zero":
            continue
        one_line(elxpk("workload", "status", "x", env={"KUBECONFIG": path, "HOME": str(tmp_path)}), 2,
                 f"KUBECONFIG {path}:", kind)


def test_a_server_without_a_scheme_connects_without_a_warning(tmp_path, crd_dir):
    fake = start_fake(crd_file=crd_dir / "jobset.x-k8s.io_jobsets.yaml", token="test-token")
    try:
        path = write(tmp_path / "k.yaml", kubeconfig(fake.url.removeprefix("http://")))
        done = elxpk("workload", "status", "x", env={"KUBECONFIG": str(path), "HOME": str(tmp_path)})
    finally:
        fake.stop()
    one_line(done, 1, 'workload "x" not found')


@pytest.mark.slow
def test_a_plugin_that_hangs_ends_at_its_bound_with_exit_1(tmp_path):
    scripts = plugins(tmp_path / "bin")
    path = write(tmp_path / "k.yaml", kubeconfig(user={"exec": {"apiVersion": EXEC_API,
                                                                  "command": str(scripts["hang"])}}))
    started = time.monotonic()
    one_line(_status(path), 1, "hang.sh", f"timed out after {EXEC_TIMEOUT_S:g} s")
    assert time.monotonic() - started < EXEC_TIMEOUT_S + 60
