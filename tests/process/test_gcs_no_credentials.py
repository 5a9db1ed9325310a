"""Every `gs://` entry point on a machine with no Google credentials and no emulator, as the user runs it:
one line naming the flag and how to give Application Default Credentials, exit 2, nothing written, and an
answer in bounded time (before, gcsfs retried anonymous requests and tensorstore its credential lookup:
the trainer hung until it was killed).

The metadata server google-auth probes is pointed (GCE_METADATA_IP, GCE_METADATA_HOST: the variables it
honours) at a local port: one that refuses, as on most machines off Google Cloud, and one that accepts and
never answers, the worst case its bounded probe must survive. The subprocess timeout is only a hang guard."""

from __future__ import annotations

import json
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from array_record.python.array_record_module import ArrayRecordWriter

from elxpk_storage import gcs_auth
from tests.conftest import REPO_ROOT
from tests.process.conftest import Exited, elxpk, run_process, trainer, user_env
from tests.support.fake_gcs import FakeGcs
from tests.support.run_writer import FakeRun, write_run

pytestmark = pytest.mark.slow

HANG_GUARD_S = 120  # far above google-auth's bounded probe (3 attempts of 3 s); a hang ends here, and fails
# google-auth's probe as these tests run it: 2 attempts of 1 s (GCE_METADATA_DETECT_RETRIES, GCE_METADATA_TIMEOUT,
# which google-auth reads at import) instead of 3 of 3 s. Still a retry, a backoff and a timeout on the silent
# server, so a path that waits on anything beyond the bounded probe still hangs here; 25 s a case was waiting.
PROBE = {"GCE_METADATA_TIMEOUT": "1", "GCE_METADATA_DETECT_RETRIES": "2"}
ADC_HINT = "GOOGLE_APPLICATION_CREDENTIALS"
CREDENTIAL_VARS = ("GOOGLE_APPLICATION_CREDENTIALS", "CLOUDSDK_CONFIG", "NO_GCE_CHECK", "GCE_METADATA_ROOT",
                   gcs_auth.EMULATOR, *gcs_auth.TENSORSTORE_EMULATOR)
MAXTEXT = "python3 -m maxtext.trainers.pre_train.train src/maxtext/configs/base.yml"


def on_a_google_vm() -> bool:
    try:
        return Path("/sys/class/dmi/id/product_name").read_text().startswith("Google")
    except OSError:
        return False


@pytest.fixture
def metadata_server(request: pytest.FixtureRequest) -> Iterator[str]:
    """HOST:PORT of a metadata server that refuses connections, or ("silent", by indirect parametrization)
    accepts them and never answers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    if getattr(request, "param", "refusing") == "silent":
        sock.listen(64)  # the kernel completes the handshakes; nothing ever reads or answers
    try:
        yield f"127.0.0.1:{sock.getsockname()[1]}"
    finally:
        sock.close()


@pytest.fixture
def bare_env(tmp_path: Path, metadata_server: str) -> dict[str, str]:
    """No credentials anywhere google-auth or tensorstore look: no variable, an empty HOME (no well-known
    file), a metadata server that gives nothing. On a Google VM google-auth takes the machine's DMI name as
    proof of a metadata server; there the probe is switched off, the way google-auth offers (NO_GCE_CHECK)."""
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in user_env().items() if k not in CREDENTIAL_VARS}
    env.update(HOME=str(home), GCE_METADATA_IP=metadata_server, GCE_METADATA_HOST=metadata_server,
               KUBECONFIG=str(tmp_path / "no-kubeconfig"), PYTHONPATH=str(REPO_ROOT), **PROBE)
    if on_a_google_vm():
        env["NO_GCE_CHECK"] = "true"
    return env


def refused(done: Exited, what: str) -> None:
    """Exit 2 with one line, all of stderr: the flag and path, and how to give credentials."""
    assert done.code == 2, (done.code, done.err[-3000:])
    lines = done.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {what}: "), done.err[-3000:]


def assert_no_credentials(done: Exited, what: str) -> None:
    refused(done, what)
    assert "no Google credentials found" in done.err and ADC_HINT in done.err and "Workload Identity" in done.err


def workdir(tmp_path: Path) -> Path:
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    return cwd


@pytest.mark.parametrize(("flags", "what", "metadata_server"), [
    (["--checkpoint-dir", "gs://bkt/run/ckpt"], "--checkpoint-dir gs://bkt/run/ckpt", "refusing"),
    (["--checkpoint-dir", "gs://bkt/run/ckpt"], "--checkpoint-dir gs://bkt/run/ckpt", "silent"),
    (["--data", "gs://bkt/tokens.npy"], "--data gs://bkt/tokens.npy", "refusing"),
    (["--run-dir", "gs://bkt/run"], "--run-dir gs://bkt/run", "refusing"),
], indirect=["metadata_server"])
def test_trainer_refuses_at_once_and_writes_nothing(flags: list[str], what: str, bare_env: dict[str, str],
                                                    tmp_path: Path) -> None:
    cwd = workdir(tmp_path)
    done = trainer(["--steps", "2", *flags], cwd, env=bare_env, timeout=HANG_GUARD_S)
    assert_no_credentials(done, what)
    assert list(cwd.iterdir()) == []  # no run dir, no checkpoint


def test_trainer_run_dir_is_local_or_gs(bare_env: dict[str, str], tmp_path: Path) -> None:
    """--run-dir s3://b/r used to become the local folder s3:/b/r, checkpoints and all; gs:// is written as
    chunks (elxpk_storage/run_records.py), any other URL is refused."""
    cwd = workdir(tmp_path)
    done = trainer(["--steps", "2", "--run-dir", "s3://bkt/run"], cwd, env=bare_env, timeout=HANG_GUARD_S)
    refused(done, "--run-dir 's3://bkt/run'")
    assert "a local directory or to gs://" in done.err and list(cwd.iterdir()) == []


def test_local_run_with_a_gs_checkpoint_dir(bare_env: dict[str, str], tmp_path: Path) -> None:
    cwd = workdir(tmp_path)
    done = elxpk(["local", "run", "--plain", "--no-faults", "--steps", "2",
                  "--trainer-arg=--checkpoint-dir=gs://bkt/ckpt"], cwd, env=bare_env, timeout=HANG_GUARD_S)
    assert_no_credentials(done, "--trainer-arg=--checkpoint-dir gs://bkt/ckpt")
    assert list(cwd.iterdir()) == []


@pytest.mark.parametrize("metadata_server", ["refusing", "silent"], indirect=True)
def test_checkpoint_inspect_and_pre_start(bare_env: dict[str, str], tmp_path: Path) -> None:
    cwd = workdir(tmp_path)
    inspected = elxpk(["checkpoint", "inspect", "gs://bkt/ckpt", "--quarantine"], cwd, env=bare_env,
                      timeout=HANG_GUARD_S)
    assert_no_credentials(inspected, "DIR gs://bkt/ckpt")
    pre_start = run_process([sys.executable, "-m", "elxpk.checkpoints", "gs://bkt/ckpt"], cwd, env=bare_env,
                            timeout=HANG_GUARD_S)
    assert_no_credentials(pre_start, "DIR gs://bkt/ckpt")


def test_incident_records(bare_env: dict[str, str], tmp_path: Path) -> None:
    """`workload events --record` refuses before it asks the cluster anything (KUBECONFIG names no file);
    `report --incidents` before it writes its plot."""
    cwd = workdir(tmp_path)
    events = elxpk(["workload", "events", "w", "--record", "gs://bkt/inc.jsonl"], cwd, env=bare_env,
                   timeout=HANG_GUARD_S)
    assert_no_credentials(events, "--record gs://bkt/inc.jsonl")
    run = write_run(tmp_path / "run", FakeRun(steps=4))
    before = sorted(p.name for p in run.iterdir())
    report = elxpk(["report", str(run), "--incidents", "gs://bkt/inc.jsonl"], cwd, env=bare_env,
                   timeout=HANG_GUARD_S)
    assert_no_credentials(report, "--incidents gs://bkt/inc.jsonl")
    assert sorted(p.name for p in run.iterdir()) == before and list(cwd.iterdir()) == []


@pytest.mark.parametrize("metadata_server", ["refusing"], indirect=True)
def test_a_run_on_gs_is_read_only_with_credentials(bare_env: dict[str, str], tmp_path: Path) -> None:
    """`report` and `compare` of a gs:// run dir refuse before they list anything, naming the argument."""
    cwd = workdir(tmp_path)
    report = elxpk(["report", "gs://bkt/run", "--no-png"], cwd, env=bare_env, timeout=HANG_GUARD_S)
    assert_no_credentials(report, "RUN_DIR gs://bkt/run")
    compare = elxpk(["compare", "gs://bkt/a", "gs://bkt/b"], cwd, env=bare_env, timeout=HANG_GUARD_S)
    assert compare.code == 2 and "RUN_A gs://bkt/a: no Google credentials found" in compare.err, compare.err
    assert list(cwd.iterdir()) == []


def create_flags(files: str) -> list[str]:
    return ["workload", "create", "--workload", "w", "--tpu-type", "v5litepod-16", "--num-slices", "2", "--trainer",
            "maxtext", "--command", f"{MAXTEXT} dataset_type=grain grain_train_files={files} "
            "grain_use_elastic_iterator=true packing=false", "--dry-run"]


def test_check_data(bare_env: dict[str, str], tmp_path: Path) -> None:
    cwd = workdir(tmp_path)
    pattern = "gs://bkt/data/train-*.array_record"
    created = elxpk([*create_flags(pattern), "--check-data"], cwd, env=bare_env, timeout=HANG_GUARD_S)
    assert_no_credentials(created, f"--check-data: grain_train_files {pattern}")
    assert created.out == ""  # no manifest
    manifest = tmp_path / "m.yaml"
    manifest.write_text(elxpk(create_flags(pattern), cwd, env=bare_env).out)
    validated = elxpk(["workload", "validate", str(manifest), "--check-data"], cwd, env=bare_env,
                      timeout=HANG_GUARD_S)
    assert_no_credentials(validated, f"--check-data: grain_train_files {pattern}")


PROGRESS_PROBE = """
import json, sys
from elxpk.cluster.records.progress import progress_of
jobset = {"spec": {"replicatedJobs": [{"template": {"spec": {"template": {"spec": {"containers": [
    {"args": ["--checkpoint-dir", sys.argv[1]]}]}}}}}]}}
print(json.dumps(progress_of(jobset, 0.0)))
"""


def test_status_progress_read(bare_env: dict[str, str], tmp_path: Path) -> None:
    """What `workload status` shows for a workload whose checkpoints are on gs://: the reason, not a hang."""
    done = run_process([sys.executable, "-c", PROGRESS_PROBE, "gs://bkt/ckpt"], workdir(tmp_path), env=bare_env,
                       timeout=HANG_GUARD_S)
    assert done.code == 0, done.err[-3000:]
    progress, why = json.loads(done.out)
    assert progress is None and why.startswith("cannot read gs://bkt/ckpt/elxpk-progress.json: "), why
    assert "no Google credentials found" in why and ADC_HINT in why


def test_an_unreadable_credentials_file_is_named(bare_env: dict[str, str], tmp_path: Path) -> None:
    bare_env["GOOGLE_APPLICATION_CREDENTIALS"] = str(tmp_path / "gone.json")
    done = elxpk(["checkpoint", "inspect", "gs://bkt/ckpt"], workdir(tmp_path), env=bare_env,
                 timeout=HANG_GUARD_S)
    refused(done, "DIR gs://bkt/ckpt")
    assert "cannot load Google credentials" in done.err and "gone.json" in done.err


CHECK = """
import sys
from elxpk_contract.errors import UsageError
from elxpk_storage.gcs_auth import require_credentials
try:
    require_credentials("--checkpoint-dir gs://bkt/c", tensorstore=True)
except UsageError as exc:
    print(f"error: {exc}", file=sys.stderr)
    sys.exit(exc.exit_code)
"""


def test_application_default_credentials_pass(bare_env: dict[str, str], tmp_path: Path) -> None:
    """Credentials where google-auth and tensorstore look (the well-known file, or a file named by
    GOOGLE_APPLICATION_CREDENTIALS) pass the check; loading them asks no server."""
    adc = {"type": "authorized_user", "client_id": "id", "client_secret": "secret", "refresh_token": "token"}
    well_known = Path(bare_env["HOME"]) / ".config" / "gcloud" / gcs_auth.WELL_KNOWN_FILE
    well_known.parent.mkdir(parents=True)
    well_known.write_text(json.dumps(adc))
    cwd = workdir(tmp_path)
    assert run_process([sys.executable, "-c", CHECK], cwd, env=bare_env, timeout=HANG_GUARD_S).code == 0
    well_known.rename(tmp_path / "key.json")
    assert_no_credentials(run_process([sys.executable, "-c", CHECK], cwd, env=bare_env, timeout=HANG_GUARD_S),
                          "--checkpoint-dir gs://bkt/c")
    bare_env["GOOGLE_APPLICATION_CREDENTIALS"] = str(tmp_path / "key.json")
    assert run_process([sys.executable, "-c", CHECK], cwd, env=bare_env, timeout=HANG_GUARD_S).code == 0


# With an emulator: the check lets it through (the realcluster tier runs the trainer against fake-gcs-server).

def test_the_trainer_needs_the_emulator_for_tensorstore_too(bare_env: dict[str, str], tmp_path: Path) -> None:
    """STORAGE_EMULATOR_HOST alone would send orbax's arrays (tensorstore) to Cloud Storage, or leave them
    waiting on credentials: refused, naming what is missing."""
    bare_env[gcs_auth.EMULATOR] = "http://127.0.0.1:9"
    cwd = workdir(tmp_path)
    done = trainer(["--steps", "2", "--checkpoint-dir", "gs://bkt/ckpt"], cwd, env=bare_env, timeout=HANG_GUARD_S)
    refused(done, "--checkpoint-dir gs://bkt/ckpt")
    assert "TENSORSTORE_GCS_HTTP_URL and GOOGLE_AUTH_TOKEN_FOR_TESTING not" in done.err
    assert list(cwd.iterdir()) == []


def test_check_data_through_an_emulator(bare_env: dict[str, str], tmp_path: Path) -> None:
    """The same command with STORAGE_EMULATOR_HOST reads the bucket, no credentials asked."""
    local = tmp_path / "t.array_record"
    writer = ArrayRecordWriter(str(local), "group_size:1")
    for i in range(3):
        writer.write(b"record %d" % i)
    writer.close()
    server = FakeGcs().start()
    try:
        server.objects[("bkt", "data/train-0.array_record")] = (local.read_bytes(), 1)
        bare_env[gcs_auth.EMULATOR] = server.url
        done = elxpk([*create_flags("gs://bkt/data/train-*.array_record"), "--check-data"], workdir(tmp_path),
                     env=bare_env, timeout=HANG_GUARD_S)
    finally:
        server.stop()
    assert done.code == 0, done.err[-3000:]
    assert "kind: JobSet" in done.out

