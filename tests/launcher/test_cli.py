"""`elxpk workload create` end to end: the real CLI entry point, the real console script, and, for
submission, the real Kubernetes client against the fake API server (tests/support)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from tests.launcher.cases import CASES

ELXPK = Path(sys.executable).parent / "elxpk"
GOOD = ["--workload", "run-1", "--tpu-type", "v5litepod-16", "--num-slices", "3", "--command", "python3 train.py"]


def test_dry_run_prints_only_the_manifest(cli):
    result = cli("workload", "create", *GOOD, "--elastic-slices", "1", "--max-slice-restarts", "2",
                 "--elastic-max-retries", "10", "--dry-run")
    assert result.code == 0
    (obj,) = yaml.safe_load_all(result.out)
    assert obj["kind"] == "JobSet"
    assert "warning: --elastic-max-retries 10 allows 9 in-process recoveries, but --max-slice-restarts 2" \
        in result.err.splitlines()[-1]


def test_create_pathways_is_an_alias(cli):
    create = cli("workload", "create", *CASES["pathways-v5p-8"], "--dry-run")
    alias = cli("workload", "create-pathways", *CASES["pathways-v5p-8"], "--dry-run")
    assert alias.code == 0 and alias.out == create.out


def test_bad_input_exits_2_with_one_line_per_error_and_writes_nothing(cli, tmp_path):
    out_file = tmp_path / "manifest.yaml"
    result = cli("workload", "create", "--workload", "Run_1", "--tpu-type", "v5p-9", "--num-slices", "2",
                 "--elastic-slices", "5", "--max-restarts", "abc", "--checkpoint-period", "0", "--env", "1X=2",
                 "--dry-run", "--output-manifest-file", str(out_file))
    assert result.code == 2
    assert result.out == ""
    assert not out_file.exists() and list(tmp_path.iterdir()) == []
    flags = [line.split()[1].rstrip(":") for line in result.error_lines]
    assert sorted(flags) == sorted(["--workload", "--tpu-type", "--elastic-slices", "--max-restarts", "--command",
                                    "--checkpoint-period", "--env"])
    assert len(result.err.splitlines()) == len(flags)  # nothing but the error lines, no trace


def test_output_manifest_file_and_json(cli, tmp_path):
    out_file = tmp_path / "manifest.json"
    result = cli("workload", "create", *GOOD, "--dry-run", "-o", "json", "--output-manifest-file", str(out_file))
    assert result.code == 0
    assert json.loads(out_file.read_text(encoding="utf-8")) == json.loads(result.out)
    assert "wrote" in result.err


def test_help_explains_the_two_slice_knobs(cli):
    result = cli("workload", "create", "--help")
    assert result.code == 0
    text = " ".join(result.out.split())
    assert "server-side tolerance" in text and "Healthy slices each attempt waits for" in text
    assert "--dry-run-server" in text and "--trainer" in text


def test_checkpoint_hint_goes_to_stderr(cli):
    hint = pytest.importorskip("elxpk.plan.hint")
    flags = [*GOOD, "--slice-mtbf", "2d", "--step-time", "2s", "--checkpoint-period", "100"]
    result = cli("workload", "create", *flags, "--dry-run")
    assert result.code == 0
    line = hint.checkpoint_period_hint(SimpleNamespace(num_slices=3, slice_mtbf_seconds=2 * 86400.0,
                                                       step_time_seconds=2.0, checkpoint_period=100))
    if line:
        assert line in result.err
    assert yaml.safe_load(result.out)["kind"] == "JobSet"  # stdout stays the manifest only


def test_console_script_exit_codes():
    ok = subprocess.run([str(ELXPK), "workload", "create", *GOOD, "--dry-run"], capture_output=True, text=True,
                        timeout=60)
    assert ok.returncode == 0 and ok.stdout.startswith("apiVersion: jobset.x-k8s.io/v1alpha2")
    bad = subprocess.run([str(ELXPK), "workload", "create", *GOOD[:4], *GOOD[6:], "--num-slices", "0", "--dry-run"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr == "error: --num-slices 0: must be at least 1\n"
    twice = subprocess.run([str(ELXPK), "workload", "create", *GOOD, "--num-slices", "0", "--dry-run"],
                           capture_output=True, text=True, timeout=60)
    assert twice.returncode == 2 and twice.stdout == ""
    assert twice.stderr == "error: --num-slices: given 2 times; give it once (only one value can apply)\n"


# --- submission: the real client against the fake API server -------------------------------------------------


@pytest.fixture()
def cluster(crd_dir, tmp_path):
    from tests.support.fake_apiserver import start_fake

    server = start_fake(crd_file=crd_dir / "jobset.x-k8s.io_jobsets.yaml", token="t0ken")
    store = server.store
    for value, name in ((100, "very-low"), (250, "low"), (500, "medium"), (750, "high"), (1000, "very-high")):
        store.create(("scheduling.k8s.io", "priorityclasses"), {"metadata": {"name": name}, "value": value})
    store.create(("kueue.x-k8s.io", "localqueues"), {
        "metadata": {"name": "multislice-queue", "namespace": "default"}, "spec": {"clusterQueue": "cq"}})
    store.create(("", "nodes"), {"metadata": {"name": "cpu-1", "labels": {"cloud.google.com/gke-nodepool": "cpu-np"}}})
    kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig.yaml")
    yield server, str(kubeconfig)
    server.stop()


def jobsets(server) -> list[dict]:
    return server.store.list(("jobset.x-k8s.io", "jobsets"), "default")


def test_submit_creates_the_rendered_jobset(cli, cluster):
    server, kubeconfig = cluster
    rendered = yaml.safe_load(cli("workload", "create", *GOOD, "--dry-run").out)
    result = cli("workload", "create", *GOOD, "--kubeconfig", kubeconfig)
    assert result.code == 0, result.err
    assert "jobset/run-1 created" in result.out
    (stored,) = jobsets(server)
    assert stored["spec"] == rendered["spec"]  # what --dry-run printed is what was sent


def test_server_dry_run_persists_nothing(cli, cluster):
    server, kubeconfig = cluster
    result = cli("workload", "create", *GOOD, "--kubeconfig", kubeconfig, "--dry-run-server")
    assert result.code == 0, result.err
    assert "(server dry run)" in result.out
    assert jobsets(server) == []


def test_existing_workload_needs_replace(cli, cluster):
    server, kubeconfig = cluster
    assert cli("workload", "create", *GOOD, "--kubeconfig", kubeconfig).code == 0
    again = cli("workload", "create", *GOOD, "--kubeconfig", kubeconfig)
    assert again.code == 1 and "--replace" in again.err
    replaced = cli("workload", "create", *GOOD, "--max-restarts", "3", "--kubeconfig", kubeconfig, "--replace")
    assert replaced.code == 0, replaced.err
    (stored,) = jobsets(server)
    assert stored["spec"]["failurePolicy"]["maxRestarts"] == 3


def test_bad_input_never_reaches_the_cluster(cli, cluster):
    server, kubeconfig = cluster
    before = len(server.calls)
    result = cli("workload", "create", *GOOD, "--elastic-slices", "3", "--kubeconfig", kubeconfig)
    assert result.code == 2
    assert len(server.calls) == before


def test_dry_run_needs_no_home_credentials_or_usable_cache(tmp_path):
    """A CI box: no HOME, no kubeconfig, no cloud credentials, a cache dir that cannot be created."""
    cache = tmp_path / "a-file"  # not a directory, so even root cannot create the cache under it
    cache.write_text("", encoding="utf-8")
    env = {"PATH": "/usr/bin:/bin", "XDG_CACHE_HOME": str(cache), "HOME": str(tmp_path / "missing-home")}
    done = subprocess.run([str(ELXPK), "workload", "create", *CASES["pathways-v5p-8"], "--dry-run"], env=env,
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert done.stdout == (Path(__file__).parent / "goldens" / "pathways-v5p-8.yaml").read_text(encoding="utf-8")


def test_kubectl_dry_run_spellings(cli):
    client = cli("workload", "create", *GOOD, "--dry-run=client")
    assert client.code == 0 and client.out == cli("workload", "create", *GOOD, "--dry-run").out
    bad = cli("workload", "create", *GOOD, "--dry-run=bogus")
    assert bad.code == 2 and bad.out == ""
    assert bad.error_lines == [bad.err.strip()] and "--dry-run=server" in bad.err
    # A user value that happens to spell the flag is data, not a flag.
    value = cli("workload", "create", *GOOD[:-1], "--dry-run=server", "--dry-run")
    assert value.code == 0 and '"--dry-run=server"' in value.out


def test_unknown_option_is_a_usage_error_without_a_traceback():
    result = subprocess.run([str(ELXPK), "workload", "create", *GOOD, "--no-such-flag"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "No such option" in result.stderr and "Traceback" not in result.stderr


def test_every_free_text_rows_value_is_data_in_any_spelling(cli):
    # The options whose value is never rewritten are the rows marked free_text, gcluster's spellings included.
    from elxpk.cli.main import _TAKES_VALUE, kubectl_dry_run
    from elxpk.create.flags import FLAGS

    free = [row for row in FLAGS if row.free_text]
    assert {row.name for row in free} == {"command", "env", "custom_proxy_server_args", "custom_server_args",
                                          "custom_worker_args"}
    for spelling in (s for row in free for s in (row.flag, *(a.spelling for a in row.aliases))):
        assert spelling in _TAKES_VALUE
        assert kubectl_dry_run([spelling, "--dry-run=server"]) == [spelling, "--dry-run=server"]
