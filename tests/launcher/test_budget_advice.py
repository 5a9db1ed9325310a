"""The budget advice (elxpk/create/budget_checks.py) suggests only values its flag's own row accepts, and
`workload validate` reads a manifest's ELXPK_* env by the trainer's own rules (#29, class 7 and class 3).

Every suggested value is parsed back out of the message and checked against the row it names: the launcher's
flag table (`BY_NAME[...]`, with the worker Job's backoffLimit = restarts x VMs) or the trainer's settings
table (`check_setting`, the rule the trainer itself applies)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elxpk.create.budget_checks import Budgets, Times, budget_findings, jobset_budget_findings
from elxpk.create.checks import parse_create
from elxpk.create.flags import BY_NAME
from elxpk.create.render import render
from elxpk.errors import UsageError
from elxpk_contract.limits import MAX_INDEX
from elxpk_contract.setting_rules import check_setting, env_name

MAX_INT32, MAX_INT64 = 2**31 - 1, 2**63 - 1
ELXPK = [str(Path(sys.executable).with_name("elxpk"))]
# "raise --flag to [at least] N", "give --flag N", "lower --flag to N": every value a fix suggests
SUGGESTION = re.compile(r"(?:raise|lower) (--[a-z-]+) to (?:at least )?([0-9]+)|give (--[a-z-]+) ([0-9]+)")
TRAINER = {"--elastic-timeout-seconds": "elastic_timeout_seconds", "--stall-timeout-seconds": "stall_timeout_seconds",
           "--elastic-max-retries": "elastic_max_retries"}


def suggestions(lines: list[str]) -> list[tuple[str, int]]:
    found = []
    for line in lines:
        for m in SUGGESTION.finditer(line):
            flag, value = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
            found.append((flag, int(value)))
    return found


def assert_within_rows(lines: list[str], vms_per_slice: int) -> None:
    rows = {row.flag: row for row in BY_NAME.values()}
    for flag, value in suggestions(lines):
        if flag in TRAINER:
            assert check_setting(TRAINER[flag], str(value))[1] is None, (flag, value, lines)
            continue
        row = rows[flag]
        assert row.low is not None and row.high is not None
        high = row.high // vms_per_slice if row.name == "max_slice_restarts" else row.high
        assert row.low <= value <= high, (flag, value, lines)


seconds = st.one_of(st.floats(min_value=1e-3, max_value=1.7e308), st.integers(1, 10**6).map(float))
times = st.builds(Times, step_s=st.none() | seconds, save_s=st.none() | seconds, replacement_s=st.none() | seconds)
budgets = st.builds(
    Budgets, pathways=st.booleans(), elastic=st.booleans(), has_trainer=st.just(True),
    grace_s=st.integers(0, MAX_INT64), max_slice_restarts=st.integers(0, MAX_INT32), max_restarts=st.integers(0, 5),
    elastic_timeout_s=st.integers(1, MAX_INDEX), elastic_min_slice_count=st.sampled_from([-1, 1]),
    stall_timeout_s=st.floats(0, 1.7e308), elastic_max_retries=st.none() | st.integers(1, MAX_INDEX),
    vms_per_slice=st.integers(1, 4096))


@settings(max_examples=400)
@given(budgets, times)
def test_every_suggested_value_lies_within_its_rows_bounds(b: Budgets, t: Times) -> None:
    errors, warnings = budget_findings(b, t)
    assert_within_rows(errors + warnings, b.vms_per_slice)


@pytest.mark.parametrize(("times", "flag", "instead"), [
    (Times(save_s=1e19), "--termination-grace-period-seconds", "make the save shorter"),
    (Times(save_s=1.7e308), "--termination-grace-period-seconds", "make the save shorter"),
    (Times(replacement_s=1e300), "--elastic-timeout-seconds", "resize onto the survivors"),
    (Times(step_s=1e308, save_s=1e308), "--stall-timeout-seconds", "make the steps and saves shorter"),
])
def test_where_no_value_within_the_bound_works_the_fix_says_so(times: Times, flag: str, instead: str) -> None:
    b = Budgets(pathways=True, elastic=True, has_trainer=True, grace_s=30, max_slice_restarts=1, max_restarts=0,
                stall_timeout_s=5.0)
    errors, warnings = budget_findings(b, times)
    (line,) = [line for line in errors + warnings if line.startswith(flag)]
    assert f"no {flag} within its bound" in line or f"no finite {flag}" in line
    assert instead in line and not suggestions([line])


def test_a_retry_budget_beyond_the_backoff_limit_asks_only_for_fewer_retries() -> None:
    b = Budgets(pathways=True, elastic=True, has_trainer=True, grace_s=30, max_slice_restarts=1, max_restarts=0,
                elastic_max_retries=MAX_INDEX, vms_per_slice=4)
    (line,) = budget_findings(b, Times())[1]
    assert f"--max-slice-restarts goes up to {MAX_INT32 // 4} with 4 VM(s) per slice" in line
    assert suggestions([line]) == [("--elastic-max-retries", 2)]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(save=st.floats(1, 1e300), replacement=st.floats(1, 1e300), step=st.floats(1e-3, 1e300),
       grace=st.integers(0, MAX_INT64), retries=st.integers(1, MAX_INDEX), restarts=st.integers(0, MAX_INT32 // 4))
def test_create_advice_within_the_rows_for_any_accepted_flags(save, replacement, step, grace, retries, restarts):
    flags = dict(workload="run-1", tpu_type="v5litepod-16", num_slices="3", command="python3 train.py",
                 elastic_slices="1", max_slice_restarts=str(restarts), elastic_max_retries=str(retries),
                 termination_grace_period_seconds=str(grace), checkpoint_save_time=f"{save!r}s",
                 slice_replacement_time=f"{replacement!r}s", step_time=f"{step!r}s", stall_timeout_seconds="30")
    try:
        lines = list(parse_create(**flags).warnings)
    except UsageError as exc:
        lines = list(exc.messages)
    assert_within_rows(lines, vms_per_slice=4)  # v5litepod-16: 4 VMs per slice


# workload validate: the manifest's env, read by the trainer's rules ------------------------------------------

HOSTILE = ["²", "٣", "-1", "1e999", "99999999999999999999999", "", "  ", "nan"]
CHECKED = ["elastic_timeout_seconds", "stall_timeout_seconds", "elastic_max_retries", "elastic_min_slice_count",
           "elastic_enabled", "checkpoint_period"]


def rendered(**extra: str) -> dict:
    spec = parse_create(workload="run-1", tpu_type="v5litepod-16", num_slices="3", command="python3 train.py",
                        elastic_slices="1", max_slice_restarts="10", **extra)[0]
    return render(spec).objects[0]


def trainer_env(jobset: dict) -> list[dict]:
    head = next(r for r in jobset["spec"]["replicatedJobs"] if r["name"] == "pathways-head")
    box = next(c for c in head["template"]["spec"]["template"]["spec"]["containers"]
               if any(e["name"].startswith("ELXPK_") for e in c.get("env") or []))
    return box["env"]


@settings(max_examples=60, deadline=None)
@given(values=st.dictionaries(st.sampled_from(CHECKED), st.sampled_from(HOSTILE) | st.text(max_size=8),
                              min_size=1))
def test_each_refused_env_value_is_one_line_and_feeds_no_advice(values: dict[str, str]) -> None:
    jobset = rendered()
    env = trainer_env(jobset)
    for name, raw in values.items():
        env.append({"name": env_name(name), "value": raw})
    errors, warnings = jobset_budget_findings(jobset, Times(save_s=60.0, step_s=40.0, replacement_s=600.0))
    refused = {name for name, raw in values.items() if check_setting(name, raw, env_name(name))[1]}
    env_lines = [line for line in errors if ".env[" in line]
    assert len(env_lines) == len(refused)
    for line in env_lines:
        assert re.match(r"spec\.replicatedJobs\[0\]\.template\.spec\.template\.spec\.containers\[\d+\]\.env\[\d+\]"
                        r"\.value: ELXPK_[A-Z_]+ ", line) and "container 'jax-tpu'" in line
    for name in refused:  # no rule reads a refused value, so no line names its flag with a fix
        flag = "--" + name.replace("_", "-")
        assert not any(line.startswith(flag) for line in errors + warnings if ".env[" not in line)
    assert_within_rows(errors + warnings, vms_per_slice=4)


@pytest.mark.parametrize("field", ["terminationGracePeriodSeconds", "completions", "backoffLimit"])
@pytest.mark.parametrize("value", [float("inf"), float("nan"), "²", True, 1.5, None])
def test_a_field_that_is_no_whole_number_leaves_the_schema_to_report_it(field: str, value: object) -> None:
    jobset = rendered()
    worker = next(r for r in jobset["spec"]["replicatedJobs"] if r["name"] == "worker")["template"]["spec"]
    target = worker["template"]["spec"] if field == "terminationGracePeriodSeconds" else worker
    target[field] = value
    for head in jobset["spec"]["replicatedJobs"]:
        head["template"]["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = value
    jobset_budget_findings(jobset, Times(save_s=60.0))  # no exception: ([], []) or the rules on the rest


def write_manifest(path: Path, **env: str) -> Path:
    jobset = rendered()
    trainer_env(jobset).extend({"name": env_name(k), "value": v} for k, v in env.items())
    path.write_text(yaml.safe_dump(jobset, allow_unicode=True), encoding="utf-8")
    return path


def test_validate_cli_names_each_refused_value(cli, tmp_path: Path) -> None:
    path = write_manifest(tmp_path / "jobset.yaml", elastic_timeout_seconds="²", stall_timeout_seconds="1e999",
                          elastic_max_retries="-1")
    result = cli("workload", "validate", str(path), "--slice-replacement-time", "20m", "--step-time", "40s")
    assert result.code == 1, result.err
    lines = result.out.splitlines()
    assert [line.split(".value: ")[1].split(":")[0] for line in lines if ".env[" in line] == [
        "ELXPK_ELASTIC_TIMEOUT_SECONDS '²'", "ELXPK_STALL_TIMEOUT_SECONDS '1e999'", "ELXPK_ELASTIC_MAX_RETRIES -1"]
    assert all(line.startswith(f"{path}: timeouts and budgets: spec.replicatedJobs[0]") for line in lines)
    assert "internal error" not in result.err


def test_validate_subprocess_reports_the_env_value_and_no_advice_from_it(tmp_path: Path) -> None:
    path = write_manifest(tmp_path / "jobset.yaml", elastic_timeout_seconds="²")
    done = subprocess.run([*ELXPK, "workload", "validate", str(path), "--slice-replacement-time", "20m",
                           "--checkpoint-save-time", "1e19s"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert "ELXPK_ELASTIC_TIMEOUT_SECONDS '²': not a whole number; give a whole number, at least 1 (whole seconds to " \
           "wait for slices on each attempt, e.g. 300); the trainer in container 'jax-tpu' " \
           "refuses it (exit 2)" in done.stdout
    assert "--elastic-timeout-seconds" not in done.stdout + done.stderr  # no advice from a refused value
    assert f"no --termination-grace-period-seconds within its bound (at most {MAX_INT64})" in done.stdout
    assert "internal error" not in done.stderr


def test_create_dry_run_subprocess_clamps_its_advice() -> None:
    done = subprocess.run([*ELXPK, "workload", "create", "--dry-run", "--workload", "run-1", "--tpu-type",
                           "v5litepod-16", "--num-slices", "3", "--elastic-slices", "1", "--command", "python3 t.py",
                           "--checkpoint-save-time", "1e19s", "--slice-replacement-time", "1.7e308s"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""  # nothing printed: refused before the manifest
    assert f"no --termination-grace-period-seconds within its bound (at most {MAX_INT64})" in done.stderr
    assert f"no --elastic-timeout-seconds within its bound (at most {MAX_INDEX})" in done.stderr
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr
    assert_within_rows(done.stderr.splitlines(), vms_per_slice=4)
