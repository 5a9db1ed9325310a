"""The run's records on gs:// (`--run-dir gs://...`) against fake-gcs-server alone, as a user runs it.

`python -m trainer` with its run dir where `workload create` renders it, inside its checkpoint directory on
gs://, is SIGKILLed while it hangs at step 10 (its records held for at most --record-flush-seconds), then
resumed from its step-8 checkpoint to the end. Then `elxpk report`, `elxpk compare` and `plan --from-run`
read the run from gs:// alone, as one run of two writers: every example exactly once, the losses bitwise
those of the same run trained in one go in a local run dir; `elxpk checkpoint inspect` sees only the steps
beside it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from elxpk_storage.run_records import run_dir_beside
from tests.support.gcs_server import emulator_env, fake_gcs_server, make_bucket, object_names

REPO = Path(__file__).resolve().parents[2]
ELXPK = Path(sys.executable).with_name("elxpk")
STEPS, PERIOD, HANG_AT = 12, 4, 10
BUCKET = "records"
CKPT = f"gs://{BUCKET}/ckpt"
RUN = run_dir_beside(CKPT) or ""  # gs://records/ckpt/elxpk-run: what the launcher renders
PREFIX = RUN.removeprefix(f"gs://{BUCKET}/") + "/"


def trainer(run_dir: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "trainer", "--steps", str(STEPS), "--checkpoint-period", str(PERIOD),
            "--run-dir", run_dir, *extra]


def uploaded(url: str, kind: str) -> list[dict]:
    """The records of the `kind` chunks uploaded so far (read with the JSON API, not the code under test)."""
    records = []
    for name in object_names(url, BUCKET, PREFIX + "records/"):
        if name.rsplit("/", 1)[-1].startswith(f"{kind}-"):
            body = requests.get(f"{url}/storage/v1/b/{BUCKET}/o/{requests.utils.quote(name, safe='')}",
                                params={"alt": "media"}, timeout=30).text
            records += [json.loads(line) for line in body.splitlines()]
    return records


def committed(url: str, step: int) -> bool:
    return any(e["event"] == "checkpoint_committed" and e["step"] == step for e in uploaded(url, "events"))


def uploaded_steps(url: str) -> set[int]:
    return {m["step"] for m in uploaded(url, "metrics")}


def wait_for(what: str, ready, process: subprocess.Popen, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        assert process.poll() is None, f"the trainer exited {process.returncode} before {what}"
        assert time.monotonic() < deadline, f"no {what} within {timeout:g} s"
        time.sleep(0.2)


@pytest.mark.slow
def test_records_on_gs_survive_a_sigkill_and_read_as_one_run(tmp_path: Path) -> None:
    with fake_gcs_server(tmp_path / "gcs") as url:
        make_bucket(url, BUCKET)
        env = {**os.environ, **emulator_env(url), "PYTHONPATH": str(REPO)}
        run, on_gs = RUN, ("--checkpoint-dir", CKPT, "--record-flush-seconds", "0.2")
        # The reference trains beside the first gs:// run (most of either is compiling).
        reference = subprocess.Popen(trainer(str(tmp_path / "reference")), cwd=tmp_path, env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        hung = subprocess.Popen(trainer(run, *on_gs, "--fault", f"0@hang:{HANG_AT}"), cwd=tmp_path, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            wait_for(f"checkpoint of step {2 * PERIOD}", lambda: committed(url, 2 * PERIOD), hung)
            wait_for(f"records of step {HANG_AT - 1}", lambda: HANG_AT - 1 in uploaded_steps(url), hung)
        finally:
            hung.send_signal(signal.SIGKILL)
            _, err = hung.communicate(timeout=60)
        assert hung.returncode == -signal.SIGKILL, err[-3000:]
        assert uploaded_steps(url) == set(range(HANG_AT)), "records of a step the hung run never finished"

        resumed = subprocess.run(trainer(run, *on_gs), cwd=tmp_path, env=env, capture_output=True, text=True,
                                 timeout=300, check=False)
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        out, err = reference.communicate(timeout=300)
        assert reference.returncode == 0, err[-3000:]

        writers = {name.removeprefix(PREFIX).split("/")[1] for name in object_names(url, BUCKET, PREFIX)}
        assert writers == {"w000001-p00000", "w000002-p00000"}, writers  # nothing else under the run dir

        report = subprocess.run([str(ELXPK), "report", run, "-o", "json"], cwd=tmp_path, env=env,
                                capture_output=True, text=True, timeout=120, check=False)
        assert report.returncode == 0, report.stdout + report.stderr[-3000:]
        read = json.loads(report.stdout)
        assert (read["steps"], read["sessions"], read["run_dir"]) == (STEPS, 2, run), read
        assert read["rewound_steps"] == HANG_AT - 2 * PERIOD, read  # steps 8 and 9, done again after the restore
        examples = read["examples"]
        assert (examples["duplicates"], examples["gaps"], examples["missing_count"]) == (0, 0, 0), examples

        compared = subprocess.run([str(ELXPK), "compare", str(tmp_path / "reference"), run, "-o", "json"],
                                  cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False)
        assert compared.returncode == 0, compared.stdout + compared.stderr[-3000:]
        result = json.loads(compared.stdout)
        assert result["bitwise_equal"] and result["bitwise_equal_steps"] == STEPS, result
        assert sorted(p.name for p in tmp_path.iterdir()) == ["gcs", "reference"]  # read from gs://: no plot, nothing written

        planned = subprocess.run([str(ELXPK), "plan", "--from-run", run, "--slice-mtbf", "30d", "-o", "json"],
                                 cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False)
        assert planned.returncode == 0, planned.stdout + planned.stderr[-3000:]
        sources = json.loads(planned.stdout)["inputs"]["sources"]
        assert (sources["step_time_s"], sources["checkpoint_period"]) == ("run", "run"), sources

        inspected = subprocess.run([str(ELXPK), "checkpoint", "inspect", CKPT, "-o", "json"], cwd=tmp_path, env=env,
                                   capture_output=True, text=True, timeout=120, check=False)
        assert inspected.returncode == 0, inspected.stdout + inspected.stderr[-3000:]
        steps = [s["step"] for s in json.loads(inspected.stdout)["steps"]]
        assert steps == [4, 8, 12], steps  # the records inside the checkpoint directory are no step
