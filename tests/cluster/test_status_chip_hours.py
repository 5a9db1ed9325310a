"""`workload status --chip-hour-price`: the chips a workload holds, read from its own JobSet (captured from the
real control plane: tests/cluster/captured.py), and the chip-hours and money its age has cost."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from elxpk.accelerators import PRICES
from elxpk.chip_hours import UNITS
from elxpk.cluster.records.chips import workload_accelerator
from tests.cluster.captured import OPS, captured, load_captured
from tests.cluster.conftest import run_cli

# The captured `ops` workload: 2 slices of v5litepod-16 (topology 4x4: 16 chips, 4 VMs of 4).
OPS_CHIPS = 2 * 16


@pytest.fixture(autouse=True)
def wide_terminal(monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")


def _expected(age_s: float, chips: int, price: float) -> tuple[float, float]:
    units = round(chips * age_s / 3600 * UNITS)
    return units / UNITS, round(units * price) / UNITS


def test_status_json_states_chips_spent_and_money(fake, capsys, k):
    load_captured(fake, "running")
    code, out, err = run_cli(capsys, "workload", "status", OPS, "--chip-hour-price", "2.5", "-o", "json", *k)
    assert code == 0, err
    data = json.loads(out)
    assert data["accelerator"]["name"] == "v5litepod-16" and data["accelerator"]["chips_per_slice"] == 16
    cost = data["chip_hours"]
    assert cost["chips"] == OPS_CHIPS and cost["unit"] == "chip-hours"
    spent, usd = _expected(cost["wall_s"], OPS_CHIPS, 2.5)
    assert cost["wall_s"] == data["age_s"] and cost["spent"] == spent
    assert cost["money"]["spent"] == usd and cost["money"]["source"] == "--chip-hour-price"
    # The captured record's directory is gone: no trainer totals, so no split is claimed; report is named.
    assert cost["useful"] is None and cost["lost"] is None
    assert "elxpk report RUN_DIR --accelerator v5litepod-16" in cost["split"]


def test_status_uses_the_cited_list_price_and_shows_a_row(fake, capsys, k):
    load_captured(fake, "running")
    code, out, err = run_cli(capsys, "workload", "status", OPS, *k)
    assert code == 0, err
    row = next(line for line in out.splitlines() if "Chip-hours" in line)
    assert "chip-hours spent (2 slices x 16 chips of v5litepod-16" in row
    assert f"at ${PRICES['v5litepod'].usd_per_chip_hour:g}/hour" in row and "elxpk report RUN_DIR" in row


def test_a_finished_workload_bills_to_its_end_and_its_alert_says_the_same(fake, capsys, k):
    """Succeeded: the chips are held from creation to the JobSet's Completed condition, not to the moment of
    asking: two looks a while apart, and the `succeeded` alert, state the same chip-hours and money, and name
    the accelerator as the catalog does (v5litepod-16, not its topology)."""
    from elxpk.cluster.objects.labels import parse_time
    from tests.support.webhook_server import webhook

    objects = load_captured(fake, "succeeded")
    jobset = objects["jobset"]
    ended = next(c for c in jobset["status"]["conditions"] if c["type"] == "Completed")["lastTransitionTime"]
    held = parse_time(ended) - parse_time(jobset["metadata"]["creationTimestamp"])
    looks = []
    for _ in range(2):
        code, out, err = run_cli(capsys, "workload", "status", OPS, "-o", "json", *k)
        assert code == 0, err
        looks.append(json.loads(out))
    first, second = (look["chip_hours"] for look in looks)
    assert looks[0]["state"] == "Succeeded" and looks[1]["age_s"] > looks[0]["age_s"]
    assert first["wall_s"] == second["wall_s"] == held and first["spent"] == second["spent"]
    assert first["spent"] == _expected(held, OPS_CHIPS, 0)[0] and first["money"] == second["money"]
    code, out, err = run_cli(capsys, "workload", "status", OPS, *k)
    row = next(line for line in out.splitlines() if "Chip-hours" in line)
    assert "from admission to its end" in row and "v5litepod-16" in row  # Kueue admitted it as it was created
    with webhook(["200"]) as hook:
        code, out, err = run_cli(capsys, "workload", "events", OPS, "--watch", "--notify", hook.url,
                                 "--notify-format", "json", "--notify-on", "succeeded", *k)
    assert code == 0, err
    (body,) = [json.loads(b) for _, b in hook.bodies]
    spent = row.split("Chip-hours", 1)[1].strip().split("; lost by cause")[0]
    assert spent in json.dumps(body), (spent, body)


@pytest.mark.parametrize("price", ["-1", "abc", "inf", "1e999"])
def test_a_bad_price_is_exit_2_and_nothing_is_sent(fake, capsys, k, price):
    before = len(fake.calls)
    code, out, err = run_cli(capsys, "workload", "status", OPS, "--chip-hour-price", price, *k)
    assert code == 2 and out == ""
    assert err.startswith("error: --chip-hour-price ") and price in err and len(err.strip().splitlines()) == 1
    assert len(fake.calls) == before


def test_a_gpu_workload_counts_gpus_per_node_times_nodes(tmp_path, capsys):
    """The rendered GPU JobSet (one node group of --num-nodes nodes of 8 GPUs), read back as status reads it."""
    code, out, err = run_cli(capsys, "workload", "create", "--workload", "g1", "--device-type", "h100-80gb-8",
                             "--num-nodes", "3", "--docker-image", "us-docker.pkg.dev/p/r/i:1", "--command", "echo",
                             "--dry-run")
    assert code == 0, err
    jobset = next(d for d in yaml.safe_load_all(out) if d and d.get("kind") == "JobSet")
    found = workload_accelerator(jobset)
    assert found is not None and (found.name, found.chips_per_slice, found.unit) == ("h100-80gb-8", 24, "GPU")
    assert workload_accelerator(captured("running")["jobset"]).chips_per_slice == 16


def test_console_script_status_with_a_price(fake, kubeconfig):
    """As a user runs it, against the captured workload: exit 0 with the figures, exit 2 on a bad price."""
    load_captured(fake, "running")
    exe = shutil.which("elxpk", path=str(Path(sys.executable).parent))
    assert exe
    done = subprocess.run([exe, "workload", "status", OPS, "--kubeconfig", str(kubeconfig), "--chip-hour-price",
                           "4", "-o", "json"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    cost = json.loads(done.stdout)["chip_hours"]
    assert cost["chips"] == OPS_CHIPS and cost["money"]["spent"] == _expected(cost["wall_s"], OPS_CHIPS, 4)[1]
    bad = subprocess.run([exe, "workload", "status", OPS, "--kubeconfig", str(kubeconfig), "--chip-hour-price",
                          "-4"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stderr.startswith("error: --chip-hour-price -4")


def _with_progress(fake, directory: Path) -> dict:
    """The captured workload, its trainer's checkpoint directory pointed at `directory`."""
    from tests.cluster.captured import KINDS, with_checkpoint_dir

    objects = load_captured(fake, "running")
    fake.store.put(KINDS["jobset"], with_checkpoint_dir(objects, directory)["jobset"])
    return objects


def test_status_splits_chip_hours_by_the_trainers_progress_record(fake, capsys, k, tmp_path):
    """The trainer's own writer and meter publish where its time went; status splits the age's chip-hours by
    it, spent = useful + lost to the float, the rest of the age (queueing, scheduling) being `other`."""
    from elxpk.cluster.records.status import parse_time
    from tests.support.clock import ManualClock
    from trainer.elastic.badput_meter import BadputMeter
    from trainer.elastic.progress import ProgressWriter

    objects = _with_progress(fake, tmp_path)
    created = parse_time(objects["jobset"]["metadata"]["creationTimestamp"])
    clock = ManualClock(start=created + 30)
    meter = BadputMeter()
    writer = ProgressWriter(str(tmp_path), clock, meter=meter)
    for kind, record in [("event", {"event": "restore_started", "time": created + 30}),
                         ("event", {"event": "restore_done", "time": created + 40, "compile_s": 20.0}),
                         *(("metric", {"step": s, "step_time_s": 1.5}) for s in range(8)),
                         ("event", {"event": "checkpoint_saved", "time": created + 80, "blocking_s": 2.0}),
                         ("event", {"event": "failure_detected", "time": created + 90}),
                         ("event", {"event": "slices_ready", "time": created + 190}),
                         *(("metric", {"step": s, "step_time_s": 1.5}) for s in range(4, 10))]:
        meter.observe(kind, record)
    writer.step_done(10, at=created + 300, attempt=2)
    code, out, err = run_cli(capsys, "workload", "status", OPS, "--chip-hour-price", "2", "-o", "json", *k)
    assert code == 0, err
    cost = json.loads(out)["chip_hours"]
    hours = OPS_CHIPS / 3600
    assert cost["useful"] == pytest.approx(10 * 1.5 * hours, abs=2 / UNITS)
    by_cause = cost["lost_by_cause"]
    assert by_cause["rewind"] == pytest.approx(4 * 1.5 * hours, abs=2 / UNITS)
    assert by_cause["recovery"] == pytest.approx(10 * hours, abs=2 / UNITS)
    assert by_cause["waiting"] == pytest.approx(100 * hours, abs=2 / UNITS)
    assert by_cause["compile"] == pytest.approx(20 * hours, abs=2 / UNITS)
    assert by_cause["checkpoint"] == pytest.approx(2 * hours, abs=2 / UNITS)
    assert cost["useful"] + cost["lost"] == cost["spent"] and sum(by_cause.values()) == cost["lost"]
    assert cost["money"]["useful"] + cost["money"]["lost"] == cost["money"]["spent"]
    code, out, err = run_cli(capsys, "workload", "status", OPS, "--chip-hour-price", "2", *k)
    assert code == 0 and "useful +" in out and "waiting for a slice" in out and "progress record" in out


def test_totals_older_than_the_workload_are_not_used(fake, capsys, k, tmp_path):
    """A checkpoint directory a new workload reuses: the record's totals began before this JobSet."""
    from elxpk.cluster.records.status import parse_time
    from tests.support.clock import ManualClock
    from trainer.elastic.badput_meter import BadputMeter
    from trainer.elastic.progress import ProgressWriter

    objects = _with_progress(fake, tmp_path)
    created = parse_time(objects["jobset"]["metadata"]["creationTimestamp"])
    meter = BadputMeter()
    meter.observe("metric", {"step": 0, "step_time_s": 1.0})
    ProgressWriter(str(tmp_path), ManualClock(start=created - 86400), meter=meter).step_done(1, created, 1)
    code, out, err = run_cli(capsys, "workload", "status", OPS, "-o", "json", *k)
    assert code == 0, err
    cost = json.loads(out)["chip_hours"]
    assert cost["useful"] is None and cost["spent"] > 0


@pytest.mark.parametrize("badput", ['{"productive": "lots"}', '{"productive": -1}', '{"productive": true}',
                                    '[1, 2]', '{"productive": 1e999}', '{}'])
def test_a_hostile_progress_record_gives_no_split_and_no_traceback(fake, capsys, k, tmp_path, badput):
    from elxpk.cluster.records.status import parse_time
    from elxpk_contract.progress_record import BADPUT_KEYS, PROGRESS_FILE

    objects = _with_progress(fake, tmp_path)
    created = parse_time(objects["jobset"]["metadata"]["creationTimestamp"])
    others = ", ".join(f'"{key}": 1.0' for key in BADPUT_KEYS if key != "productive")
    body = badput if not badput.startswith("{") or badput == "{}" else badput[:-1] + ", " + others + "}"
    (tmp_path / PROGRESS_FILE).write_text(
        '{"version": 1, "steps_done": 3, "step_time": null, "checkpoint_step": null, "checkpoint_time": null, '
        f'"updated_at": {created + 5}, "since": {created + 1}, "badput": {body}}}')
    code, out, err = run_cli(capsys, "workload", "status", OPS, "-o", "json", *k)
    assert code == 0, err
    data = json.loads(out)
    assert "Traceback" not in err
    assert data["chip_hours"]["useful"] is None and data["chip_hours"]["spent"] > 0


@pytest.mark.parametrize("case", ["running", "stopped", "killed"])
def test_the_billed_interval_runs_from_the_trainers_first_start(fake, capsys, k, tmp_path, case):
    """The progress record's started_at (the first run_started record) begins the interval, not the JobSet's
    creation: queueing is not billed. It ends now while the workload runs; at the trainer's last record once
    the workload has finished and the trainer said it stopped; at the JobSet's Completed condition when the
    trainer was killed without a last write (its record still says running)."""
    from elxpk.cluster.records.status import parse_time
    from tests.cluster.captured import KINDS, with_checkpoint_dir
    from tests.support.clock import ManualClock
    from trainer.elastic.badput_meter import BadputMeter
    from trainer.elastic.progress import ProgressWriter

    objects = with_checkpoint_dir(load_captured(fake, "running" if case == "running" else "succeeded"), tmp_path)
    fake.store.put(KINDS["jobset"], objects["jobset"])
    created = parse_time(objects["jobset"]["metadata"]["creationTimestamp"])
    meter = BadputMeter()
    writer = ProgressWriter(str(tmp_path), ManualClock(start=created + 20), meter=meter)
    for event in ({"event": "run_started", "time": created + 25.5}, {"event": "run_finished", "time": created + 31.25}):
        meter.observe("event", event)
    if case == "killed":
        writer.step_done(4, at=created + 31.0, attempt=1)
    else:
        writer.finish("done", exit_code=0)
    code, out, err = run_cli(capsys, "workload", "status", OPS, "-o", "json", *k)
    assert code == 0, err
    data = json.loads(out)
    cost = data["chip_hours"]
    assert cost["billed"].endswith("queueing not billed)")
    if case == "running":  # to now: the age less the 25.5 s before the trainer's first record
        assert cost["wall_s"] == pytest.approx(data["age_s"] - 25.5, abs=5.0) and data["state"] != "Succeeded"
    elif case == "stopped":
        assert cost["wall_s"] == 31.25 - 25.5
    else:
        ended = next(c for c in objects["jobset"]["status"]["conditions"] if c["type"] == "Completed")
        assert cost["wall_s"] == parse_time(ended["lastTransitionTime"]) - (created + 25.5)
    assert cost["spent"] == _expected(cost["wall_s"], OPS_CHIPS, 0)[0]


@pytest.mark.parametrize("started", ['"soon"', "-1", "1e999", "true", "null"])
def test_a_hostile_billed_interval_falls_back_to_the_jobsets_times(fake, capsys, k, tmp_path, started):
    """started_at that is no time (or none): the JobSet's own times bound the interval (Kueue's admission, as
    the workload was created), and the line says so."""
    from elxpk.cluster.records.status import parse_time
    from elxpk_contract.progress_record import PROGRESS_FILE

    objects = _with_progress(fake, tmp_path)
    created = parse_time(objects["jobset"]["metadata"]["creationTimestamp"])
    (tmp_path / PROGRESS_FILE).write_text(
        '{"version": 1, "steps_done": 3, "step_time": null, "checkpoint_step": null, "checkpoint_time": null, '
        f'"updated_at": {created + 5}, "started_at": {started}, "last_record_at": {created + 6}}}')
    code, out, err = run_cli(capsys, "workload", "status", OPS, "-o", "json", *k)
    assert code == 0 and "Traceback" not in err, err
    data = json.loads(out)
    assert data["chip_hours"]["wall_s"] == pytest.approx(data["age_s"], abs=1e-6)
    assert data["chip_hours"]["billed"].endswith("since Kueue admitted the workload (queueing not billed)")


@pytest.mark.parametrize("kueue", ["admitted later", "evicted once", "none"])
def test_without_the_trainers_record_a_finished_workload_bills_from_its_admission(fake, capsys, k, kueue):
    """No progress record: from Kueue's admission (its one admission) to the JobSet's end; from the creation
    (queueing included) where Kueue evicted it once (the later admission's time is all its condition keeps)
    or no Kueue Workload admitted it."""
    from elxpk.cluster.records.status import parse_time
    from tests.cluster.captured import KINDS

    objects = load_captured(fake, "succeeded", without=("workloads",) if kueue == "none" else ())
    jobset, (workload,) = objects["jobset"], objects["workloads"]
    created = parse_time(jobset["metadata"]["creationTimestamp"])
    ended = parse_time(next(c for c in jobset["status"]["conditions"] if c["type"] == "Completed")["lastTransitionTime"])
    admitted = next(c for c in workload["status"]["conditions"] if c["type"] == "Admitted")
    admitted["lastTransitionTime"] = _rfc3339(created + 12)
    if kueue == "evicted once":
        workload["status"]["conditions"].append({"type": "Evicted", "status": "False", "reason": "Preempted",
                                                 "message": "", "lastTransitionTime": _rfc3339(created + 10)})
    if kueue != "none":
        fake.store.put(KINDS["workloads"], workload)
    code, out, err = run_cli(capsys, "workload", "status", OPS, "-o", "json", *k)
    assert code == 0, err
    cost = json.loads(out)["chip_hours"]
    if kueue == "admitted later":
        assert cost["wall_s"] == ended - (created + 12) and "from Kueue's admission (queueing not billed)" in cost["billed"]
    else:
        assert cost["wall_s"] == pytest.approx(ended - created) and "creation (queueing included)" in cost["billed"]


def _rfc3339(unix: float) -> str:
    import time

    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(unix))
