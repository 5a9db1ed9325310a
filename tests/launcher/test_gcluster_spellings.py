"""gcluster's `job submit` spellings (issue #32): aliases of the flag table's rows, gcluster's defaults and
limits when a command uses them, both dialects' spellings of one quantity refused, `job submit`'s -n/-o/-e,
and `--compute-type` in its three forms. Everything in-process through the real CLI entry point, plus one
real `elxpk job submit` subprocess."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from elxpk.cli.options import CLUSTER_FLAGS, trainer_setting_parameters
from elxpk.create import flags as table
from elxpk.create.dialect import NAME_LIMIT, PATHWAYS_NAME_LIMIT

IMAGE = "us-docker.pkg.dev/my-project/my-repo/trainer:1"
GCLUSTER = ["--name", "run-1", "--compute-type", "v6e-16", "--image", IMAGE, "--command", "python3 train.py"]
ELXPK = ["--workload", "run-1", "--tpu-type", "v6e-16", "--docker-image", IMAGE, "--command", "python3 train.py"]
# A value each row reads, to give a row and its alias together.
_VALUES = {"workload": "run-1", "docker_image": IMAGE, "headless": True, "output_manifest_file": "/tmp/x.yaml"}


def jobset(cli, *argv: str) -> dict:
    done = cli("workload", "create", *argv, "--dry-run")
    assert done.code == 0, done.err
    return yaml.safe_load(done.out)


def _value(row, alias=None) -> list[str]:
    value = _VALUES.get(row.name, "2" if row.kind in ("int",) else ("30s" if alias and alias.kind else "x"))
    return [] if value is True else [str(value)]


def test_every_alias_key_is_its_own_option_and_names_no_other_parameter():
    others = ({f.name for f in table.FLAGS} | {row.name for row in CLUSTER_FLAGS}
              | {p.name for p in trainer_setting_parameters()} | {"output", "settings", "flags", "cluster"})
    spellings = [f.flag for f in table.FLAGS] + [a.spelling for f in table.FLAGS for a in f.aliases]
    assert len(spellings) == len(set(spellings))
    for key, (row, alias) in table.ALIASES.items():
        assert key not in others, key
        assert alias.spelling != row.flag


def _without(argv: list[str], flag: str) -> list[str]:
    """`argv` (flag, value pairs) less `flag` and its value."""
    pairs = list(zip(argv[::2], argv[1::2], strict=True))
    return [word for pair in pairs if pair[0] != flag for word in pair]


@pytest.mark.parametrize("key", sorted(table.ALIASES))
def test_a_row_and_its_alias_together_are_exit_2_naming_both(key, cli, tmp_path):
    row, alias = table.ALIASES[key]
    out = tmp_path / "m.yaml"
    both = [row.flag, *_value(row), alias.spelling, *_value(row, alias)]
    written = [] if key == "dry_run_out" else ["--output-manifest-file", str(out)]
    done = cli("workload", "create", *_without(ELXPK, row.flag), *both, "--dry-run", *written)
    assert done.code == 2, done.err
    assert any(alias.spelling in line and row.flag in line and "give one" in line for line in done.error_lines), \
        done.err
    assert not out.exists() and done.out == ""


def test_gcluster_spellings_bring_gclusters_defaults_and_elxpks_keep_xpks(cli):
    gcluster, elxpk = jobset(cli, *GCLUSTER), jobset(cli, *ELXPK)
    assert gcluster["spec"]["failurePolicy"]["maxRestarts"] == 1  # gcluster --restarts 1
    assert gcluster["spec"]["ttlSecondsAfterFinished"] == 3600  # --gke-ttl-after-finished 1h
    assert [r["name"] for r in gcluster["spec"]["replicatedJobs"]] == ["slice-job"]  # plain unless --pathways
    assert elxpk["spec"]["failurePolicy"]["maxRestarts"] == 0  # xpk --max-restarts 0
    assert elxpk["spec"]["ttlSecondsAfterFinished"] == 43200
    assert "pathways-head" in [r["name"] for r in elxpk["spec"]["replicatedJobs"]]
    # Each default given explicitly in gcluster's spelling renders the same as leaving it out.
    spelled = jobset(cli, *GCLUSTER, "--restarts", "1", "--gke-ttl-after-finished", "1h", "--grace-period", "30s")
    assert spelled == gcluster


def test_durations_in_gcluster_spelling_become_the_rows_seconds(cli):
    js = jobset(cli, *GCLUSTER, "--grace-period", "2m", "--gke-ttl-after-finished", "5m")
    assert js["spec"]["ttlSecondsAfterFinished"] == 300
    pod = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] == 120
    done = cli("workload", "create", *GCLUSTER, "--grace-period", "soon", "--dry-run")
    assert done.code == 2 and done.error_lines[0].startswith("error: --grace-period 'soon':"), done.err


@pytest.mark.parametrize("pathways, limit", [(False, NAME_LIMIT), (True, PATHWAYS_NAME_LIMIT)])
def test_gclusters_name_limits(pathways, limit, cli):
    extra = ["--pathways", "--pathways-gcs-location", "gs://bkt/tmp"] if pathways else []
    at_limit = "a" * limit
    argv = [a if a != "run-1" else at_limit for a in GCLUSTER]
    assert jobset(cli, *argv, *extra)["metadata"]["name"] == at_limit
    over = [a if a != "run-1" else at_limit + "b" for a in GCLUSTER]
    done = cli("workload", "create", *over, *extra, "--dry-run")
    assert done.code == 2 and done.out == ""
    assert f"gcluster's limit is {limit}" in done.err and "--name" in done.err
    # elxpk's own spelling keeps elxpk's limits (39 for Pathways).
    assert jobset(cli, *[a if a != "run-1" else "a" * 30 for a in ELXPK])["metadata"]["name"] == "a" * 30


@pytest.mark.parametrize("key", sorted(k for k, (_, a) in table.ALIASES.items() if a.spelling.startswith("--pathways-")))
def test_every_pathways_spelling_needs_pathways(key, cli):
    row, alias = table.ALIASES[key]
    done = cli("workload", "create", *GCLUSTER, alias.spelling, *_value(row, alias), "--dry-run")
    assert done.code == 2 and done.out == ""
    assert any(line.startswith(f"error: {alias.spelling}: needs --pathways") for line in done.error_lines), done.err


# The rows only a Pathways workload takes, whose gcluster spelling is --pathways-* (--max-slice-restarts is
# only a warning without elastic slices).
_PATHWAYS_ROWS = sorted(row.name for row, alias in table.ALIASES.values()
                        if alias.spelling.startswith("--pathways-") and row.name != "max_slice_restarts")


@pytest.mark.parametrize("name", _PATHWAYS_ROWS)
def test_elxpks_spelling_of_a_pathways_flag_in_a_gcluster_command_needs_pathways_too(name, cli):
    """Pathways is off in gcluster's spelling unless --pathways: the line names the flag as typed and asks for
    --pathways, never to drop the --no-pathways the user did not type."""
    row = table.BY_NAME[name]
    done = cli("workload", "create", *GCLUSTER, "--num-slices", "3", row.flag, *_value(row), "--dry-run")
    assert done.code == 2 and done.out == ""
    assert f"error: {row.flag}: needs --pathways (gcluster renders a plain JobSet without it); add --pathways or " \
           "drop the flag" in done.error_lines, done.err
    assert "--no-pathways" not in done.err


@pytest.mark.parametrize("compute, topology, field, expected", [
    ("v6e-16", None, "gke-tpu-topology", "4x4"),  # TPU shorthand
    ("ct6e-standard-4t", "4x4", "gke-tpu-topology", "4x4"),  # GCE machine type with --topology
    ("ct5p-hightpu-4t", "2x2x2", "gke-tpu-topology", "2x2x2"),
    ("v5p-8", None, "gke-tpu-topology", "2x2x2"),  # gcluster counts v5p chips (xpk's v5p-16), not cores
    ("v5litepod-16", "4x4", "gke-tpu-topology", "4x4"),
    ("h100-mega-80gb-8", None, "gke-accelerator", "nvidia-h100-mega-80gb"),  # xpk device type
    ("a3-megagpu-8g", None, "gke-accelerator", "nvidia-h100-mega-80gb"),  # its GCE machine type
])
def test_compute_type_in_its_three_forms(compute, topology, field, expected, cli):
    argv = [a if a != "v6e-16" else compute for a in GCLUSTER] + (["--topology", topology] if topology else [])
    text = yaml.safe_dump(jobset(cli, *argv))
    assert f"cloud.google.com/{field}: {expected}" in text


@pytest.mark.parametrize("extra, words", [
    (["--topology", "2x2"], ["--topology '2x2'", "4x4"]),  # disagrees with the shorthand
    (["--tpu-type", "v6e-16"], ["--compute-type and --tpu-type"]),
    (["--compute-type", "ct6e-standard-4t"], ["given 2 times"]),
])
def test_compute_type_refusals_name_the_flags(extra, words, cli):
    done = cli("workload", "create", *GCLUSTER, *extra, "--dry-run")
    assert done.code == 2 and done.out == ""
    assert all(w in done.err for w in words), done.err
    assert "--tpu-type: required" not in done.err


def test_machine_type_without_topology_and_unknown_compute_types(cli):
    for compute, words in (("ct6e-standard-4t", "needs --topology"), ("n2-standard-32", "unknown TPU type"),
                           ("tpu7x-8", "gcluster takes the topology")):
        done = cli("workload", "create", *[a if a != "v6e-16" else compute for a in GCLUSTER], "--dry-run")
        assert done.code == 2 and words in done.err and done.err.count("error:") == 1, done.err


def test_mixed_pathways_switches_and_namespaces_are_refused(cli):
    done = cli("workload", "create", *GCLUSTER, "--pathways", "--no-pathways", "--pathways-gcs-location", "gs://bkt/t",
               "--gke-namespace", "team-a", "--namespace", "team-b", "--dry-run")
    assert done.code == 2
    assert any("--pathways and --no-pathways" in line for line in done.error_lines)
    assert any("--gke-namespace and --namespace" in line for line in done.error_lines)


def test_gke_namespace_is_the_namespace(cli):
    assert jobset(cli, *GCLUSTER, "--gke-namespace", "team-a")["metadata"]["namespace"] == "team-a"


def test_timeout_needs_await_and_await_needs_a_submission(cli, tmp_path):
    done = cli("workload", "create", *GCLUSTER, "--timeout", "10m", "--dry-run")
    assert done.code == 2 and "--timeout: only with --await-job-completion" in done.err
    done = cli("workload", "create", *GCLUSTER, "--await-job-completion", "--dry-run-out", str(tmp_path / "m.yaml"))
    assert done.code == 2 and "--await-job-completion and --dry-run-out" in done.err
    assert not (tmp_path / "m.yaml").exists()


def test_job_submit_takes_gclusters_short_flags(cli, tmp_path):
    out = tmp_path / "run.yaml"
    done = cli("job", "submit", "-n", "run-1", "--compute-type", "v6e-16", "-i", IMAGE, "-e", "python3 train.py",
               "-q", "team-queue", "-o", str(out))
    assert done.code == 0, done.err
    assert done.out == ""  # gcluster's dry run writes the file only
    js = yaml.safe_load(out.read_text())
    assert js["metadata"]["name"] == "run-1"
    assert js["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-queue"
    assert js == jobset(cli, *GCLUSTER, "--queue", "team-queue")


def test_workload_create_takes_gclusters_e_as_command_too(cli):
    """gcluster's -e is --command in both verbs (only -n and -o differ: elxpk's --namespace and --output)."""
    short = cli("workload", "create", "--name", "run-1", "--compute-type", "v6e-16", "-i", IMAGE, "-e",
                "python3 train.py", "--dry-run")
    long = cli("workload", "create", "--name", "run-1", "--compute-type", "v6e-16", "-i", IMAGE, "--command",
               "python3 train.py", "--dry-run")
    assert short.code == long.code == 0, short.err
    assert short.out == long.out and "python3 train.py" in short.out


def test_help_says_gclusters_defaults_differ(cli):
    for path in (("workload", "create"), ("job", "submit")):
        text = " ".join(cli(*path, "--help").out.split())
        assert "gcluster's --restarts" in text and "(default 1)" in text, path
        assert "gcluster's spellings (any of them brings gcluster's defaults)" in text, path


def test_job_submit_runs_as_gcluster_users_type_it(tmp_path):
    """The console script, as a user runs it: gcluster's spelling, exit 0, the manifest in -o's file only."""
    out = tmp_path / "elastic.yaml"
    elxpk = str(Path(sys.executable).with_name("elxpk"))
    done = subprocess.run([elxpk, "job", "submit", "-n", "elastic-1", "--compute-type", "v6e-16", "--num-slices", "3",
                           "-i", IMAGE, "-e", "python3 train.py", "--pathways", "--pathways-gcs-location",
                           "gs://my-bucket/tmp", "--pathways-elastic-slices=1", "--pathways-max-slice-restarts=10",
                           "-o", str(out)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "" and f"wrote {out}" in done.stderr
    js = yaml.safe_load(out.read_text())
    assert js["spec"]["failurePolicy"]["maxRestarts"] == 1
    assert "--num_elastic_slices=1" in yaml.safe_dump(js)
    done = subprocess.run([elxpk, "job", "submit", "-n", "a" * 23, "--compute-type", "v6e-16", "-i", IMAGE, "-e", "x",
                           "--pathways", "--pathways-gcs-location", "gs://bkt/t", "-o", str(tmp_path / "no.yaml")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "gcluster's limit is 22" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "no.yaml").exists()


PATHWAYS = [*GCLUSTER, "--pathways", "--pathways-gcs-location", "gs://my-bucket/tmp"]


def _container(js: dict, name: str) -> dict:
    return next(c for r in js["spec"]["replicatedJobs"] for pod in [r["template"]["spec"]["template"]["spec"]]
                for c in pod.get("initContainers", []) + pod["containers"] if c["name"] == name)


@pytest.mark.parametrize("flag, container", [("--pathways-proxy-env", "pathways-proxy"),
                                             ("--pathways-server-env", "pathways-rm"),
                                             ("--pathways-worker-env", "pathways-worker")])
def test_pathways_container_env_reaches_that_container_only(flag, container, cli):
    js = jobset(cli, *PATHWAYS, flag, "MY_FLAG=a b", flag, "OTHER=2")
    env = {e["name"]: e.get("value") for e in _container(js, container)["env"]}
    assert env["MY_FLAG"] == "a b" and env["OTHER"] == "2"
    others = {"pathways-proxy", "pathways-rm", "pathways-worker"} - {container}
    assert all("MY_FLAG" not in {e["name"] for e in _container(js, c)["env"]} for c in others)
    # a name the template sets on that container, or not an env name: one line naming the flag
    own = {e["name"] for e in _container(jobset(cli, *PATHWAYS), container)["env"]}
    done = cli("workload", "create", *PATHWAYS, flag, f"{sorted(own)[0]}=1", flag, "1X=2", "--dry-run")
    assert done.code == 2 and done.out == ""
    assert [line.split(" ")[1] for line in done.error_lines] == [flag, flag], done.err


def test_pathways_needs_its_gcs_location_as_in_gcluster(cli):
    done = cli("workload", "create", *GCLUSTER, "--pathways", "--dry-run")
    assert done.code == 2 and done.error_lines == [
        "error: --pathways-gcs-location: required with --pathways (gcluster's rule: where Pathways keeps its scratch "
        "files); e.g. --pathways-gcs-location gs://my-bucket/pathways-tmp"]


def test_job_inspect_takes_the_name_once_before_any_io(cli, tmp_path):
    for argv in ((), ("run-1", "--name", "run-1")):
        done = cli("job", "inspect", *argv, "--kubeconfig", str(tmp_path / "none"))
        assert done.code == 2 and done.error_lines == [
            "error: NAME: give the workload once, as NAME or --name NAME (e.g. elxpk job inspect my-run-1)"]
    done = cli("job", "inspect", "-n", "run-1", "--out", str(tmp_path / "no" / "such" / "dir.txt"))
    assert done.code == 2 and "--out" in done.err and not (tmp_path / "no").exists()
