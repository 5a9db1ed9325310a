"""Capacity modes of `workload create` (elxpk/create/capacity.py): the goldens, what each mode renders on
which pods, one mode at a time, the reservation name reader, --max-run-duration's rules."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from elxpk.create.capacity import CAPACITY_KEYS, MAX_RUN_ANNOTATION, read_capacity, reservation_name
from tests.launcher.capacity_cases import CAPACITY_CASES
from tests.launcher.conftest import GOLDENS

MODE_FLAGS = ("--spot", "--flex-start", "--reservation=res-a", "--on-demand")
BASE = ["--workload=cap-1", "--tpu-type=v5p-8", "--command", "bash hello"]


def _pod_specs(doc: dict) -> dict[str, dict]:
    return {r["name"]: r["template"]["spec"]["template"]["spec"] for r in doc["spec"]["replicatedJobs"]}


def _render(cli, *argv: str) -> dict:
    result = cli("workload", "create", *argv, "--dry-run")
    assert result.code == 0, result.err
    return yaml.safe_load(result.out)


@pytest.mark.parametrize("name", sorted(CAPACITY_CASES))
def test_capacity_golden(name, cli, update_goldens, jobset_validator, core_validator):
    result = cli("workload", "create", *CAPACITY_CASES[name], "--dry-run")
    assert result.code == 0, result.err
    path = GOLDENS / f"{name}.yaml"
    if update_goldens:
        path.write_text(result.out, encoding="utf-8")
    assert result.out == path.read_text(encoding="utf-8"), f"{name}: regenerate with --update-goldens and review"
    doc = yaml.safe_load(result.out)
    assert jobset_validator(doc) == [] and core_validator(doc) == []


@pytest.mark.parametrize(("flag", "label", "value"), [
    ("--spot", "cloud.google.com/gke-spot", "true"),
    ("--flex-start", "cloud.google.com/gke-queued", "true"),
    ("--reservation=projects/p/reservations/res-a/reservationBlocks/b-1", "cloud.google.com/reservation-name",
     "res-a"),
])
@pytest.mark.parametrize("shape", [["--command", "bash hello"], ["--no-pathways", "--command", "x"], ["--headless"]])
def test_mode_selects_and_tolerates_on_the_accelerator_pods_only(cli, flag, label, value, shape):
    argv = ["--workload=cap-1", "--tpu-type=v5p-8", *shape]
    plain, chosen = _render(cli, *argv), _render(cli, *argv, flag)
    for job, spec in _pod_specs(chosen).items():
        before = _pod_specs(plain)[job]
        if job == "pathways-head":  # the CPU pool: no capacity mode there
            assert spec == before
            continue
        assert spec["nodeSelector"] == {**before["nodeSelector"], label: value}
        assert spec["tolerations"] == [*before["tolerations"],
                                       {"key": label, "operator": "Equal", "value": value, "effect": "NoSchedule"}]
        assert {k: v for k, v in spec.items() if k not in ("nodeSelector", "tolerations")} == \
            {k: v for k, v in before.items() if k not in ("nodeSelector", "tolerations")}
    assert "annotations" not in chosen["metadata"]


def test_on_demand_renders_what_no_mode_renders(cli):
    """xpk's on-demand selector is empty: the flag only rules the other modes out."""
    assert _render(cli, *BASE, "--on-demand") == _render(cli, *BASE)


def test_gpu_pods_get_the_mode_too(cli):
    argv = ["--workload=cap-1", "--device-type=h100-80gb-8", "--command", "nvidia-smi"]
    spec = next(iter(_pod_specs(_render(cli, *argv, "--spot")).values()))
    assert spec["nodeSelector"]["cloud.google.com/gke-spot"] == "true"
    assert {"key": "cloud.google.com/gke-spot", "operator": "Equal", "value": "true",
            "effect": "NoSchedule"} in spec["tolerations"]


@pytest.mark.parametrize(("given_", "seconds"), [("24h", "86400"), ("7d", "604800"), ("90", "90")])
def test_max_run_duration_is_the_provisioning_request_annotation(cli, given_, seconds):
    doc = _render(cli, *BASE, "--flex-start", f"--max-run-duration={given_}")
    assert doc["metadata"]["annotations"] == {MAX_RUN_ANNOTATION: seconds}
    assert "annotations" not in _render(cli, *BASE, "--flex-start")["metadata"]


@pytest.mark.parametrize("pair", list(itertools.combinations(MODE_FLAGS, 2)))
def test_two_modes_are_refused_naming_both(cli, pair, tmp_path):
    out = tmp_path / "m.yaml"
    result = cli("workload", "create", *BASE, *pair, f"--output-manifest-file={out}", "--dry-run")
    assert result.code == 2 and result.out == "" and not out.exists()
    line = next(x for x in result.err.splitlines() if "capacity mode" in x)
    assert all(flag.split("=")[0] in line for flag in pair), line
    assert "Traceback" not in result.err


@pytest.mark.parametrize(("argv", "says"), [
    (["--max-run-duration=24h"], "--max-run-duration: only with --flex-start"),
    (["--spot", "--max-run-duration=24h"], "--max-run-duration: only with --flex-start"),
    (["--flex-start", "--max-run-duration=8d"], "--max-run-duration '8d': must be from 1 to 604800"),
    (["--flex-start", "--max-run-duration=soon"], "--max-run-duration 'soon'"),
    (["--reservation=Res_A"], "--reservation 'Res_A': give the reservation's name"),
    (["--reservation=projects/p/reservationBlocks/b"], "--reservation 'projects/p/reservationBlocks/b'"),
    (["--reservation="], "--reservation '': empty (or only spaces)"),
])
def test_capacity_refusals(cli, argv, says):
    result = cli("workload", "create", *BASE, *argv, "--dry-run")
    assert result.code == 2 and result.out == ""
    assert says in result.err, result.err


@given(st.text(max_size=80))
def test_reservation_reader_never_raises_and_yields_a_label_value(text):
    name, problem = reservation_name(text)
    assert (name is None) != (problem is None)
    if name is not None:
        assert 1 <= len(name) <= 63 and name[0].isalpha() and name.isascii()
        assert set(name) <= set("abcdefghijklmnopqrstuvwxyz0123456789-") and not name.endswith("-")


@given(st.from_regex(r"[a-z]([-a-z0-9]{0,20}[a-z0-9])?", fullmatch=True), st.sampled_from(
    ["{}", "projects/p-1/reservations/{}", "projects/p/reservations/{}/reservationBlocks/b",
     "projects/p/reservations/{}/reservationBlocks/b/reservationSubBlocks/s", "{}/"]))
def test_reservation_path_gives_its_short_name(name, shape):
    assert reservation_name(shape.format(name)) == (name, None)


def test_console_script_refuses_two_modes_with_exit_2(tmp_path):
    """The user's entry point: the `elxpk` script as installed, two modes, exit 2 and one line each."""
    elxpk = Path(sys.executable).parent / "elxpk"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    done = subprocess.run([str(elxpk), "workload", "create", *BASE, "--spot", "--flex-start", "--dry-run"],
                          capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path, check=False)
    assert done.returncode == 2, done.stderr
    assert done.stdout == "" and "--spot and --flex-start: give one capacity mode" in done.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("subset", [s for n in range(5) for s in itertools.combinations(CAPACITY_KEYS, n)])
def test_every_combination_of_modes(subset):
    """All 16 combinations: one or none is a mode (or none), two or more one line naming each given."""
    given = {key: ("res-a" if key == "reservation" else True) for key in subset}
    spelled = {key: "--" + key.replace("_", "-") for key in CAPACITY_KEYS}
    capacity, problems = read_capacity(given, spelled, None, "--max-run-duration")
    if len(subset) <= 1:
        assert problems == [] and (capacity is None) == (not subset)
        assert capacity is None or capacity.mode == subset[0].replace("_", "-")
    else:
        assert capacity is None and len(problems) == 1
        assert problems[0].startswith(" and ".join(spelled[k] for k in subset) + ": give one capacity mode")
