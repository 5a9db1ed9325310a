"""Timeouts and budgets checked before submit (`workload create`) and on a rendered manifest (`validate`):
each rule's warning and refusal, both flags named with the fix; times from flags or a measured run."""

from __future__ import annotations

import math

import pytest

from elxpk.create.budget_checks import (
    GRACE_SLACK_S,
    MARGIN,
    Budgets,
    Times,
    budget_findings,
    budgets_from_jobset,
)
from elxpk.create.checks import parse_create
from elxpk.create.render import render
from elxpk.errors import UsageError
from elxpk.plan.calibrate import calibrate
from elxpk_contract.stall import STALL_FLOOR_S, STALL_STEP_MULTIPLE
from tests.launcher.test_validate_cli import xpk_pathways
from tests.planner.helpers import write_run

BASE = dict(workload="run-1", tpu_type="v5litepod-16", num_slices="3", command="python3 train.py")
ELASTIC = dict(elastic_slices="1", max_slice_restarts="10")


def warnings(**flags) -> list[str]:
    return [w for w in parse_create(**{**BASE, **flags}).warnings if "which your command must read" not in w]


def refused(**flags) -> list[str]:
    with pytest.raises(UsageError) as info:
        parse_create(**{**BASE, **flags})
    return info.value.messages


class TestGraceAgainstSave:
    def test_shorter_than_a_save_is_refused(self):
        (line,) = refused(termination_grace_period_seconds="30", checkpoint_save_time="45s")
        need = math.ceil(MARGIN * 45 + GRACE_SLACK_S)
        assert line.startswith("--termination-grace-period-seconds 30 is shorter than --checkpoint-save-time 45s")
        assert line.endswith(f"raise --termination-grace-period-seconds to at least {need}")

    def test_little_headroom_is_a_warning(self):
        (line,) = warnings(termination_grace_period_seconds="50", checkpoint_save_time="45s")
        assert line.startswith("--termination-grace-period-seconds 50 leaves 5 s beyond --checkpoint-save-time 45s")
        need = math.ceil(MARGIN * 45 + GRACE_SLACK_S)
        assert warnings(termination_grace_period_seconds=str(need), checkpoint_save_time="45s") == []

    @pytest.mark.parametrize("save", ["0.13s", "1s", "10s", "13s"])
    def test_the_default_grace_covers_a_short_save_without_a_word(self, save):
        """A 30 s grace and a 0.13 s save once got "raise --termination-grace-period-seconds to 31"."""
        assert warnings(checkpoint_save_time=save) == []
        assert warnings(termination_grace_period_seconds="29", checkpoint_save_time="13s") != []

    def test_headless_has_no_trainer_to_save(self):
        done = parse_create(workload="run-1", tpu_type="v5p-8", headless=True, checkpoint_save_time="10m")
        assert done.warnings == ()


class TestElasticTimeoutAgainstReplacement:
    def test_first_slice_loss_ending_the_run_is_refused(self):
        (line,) = refused(**ELASTIC, slice_replacement_time="12m")
        assert line.startswith("--elastic-timeout-seconds 300 is shorter than --slice-replacement-time 12m and "
                               "--max-restarts is 0")
        assert line.endswith(f"raise --elastic-timeout-seconds to at least {math.ceil(MARGIN * 720)}")

    def test_with_a_restart_budget_it_is_a_warning(self):
        (line,) = warnings(**ELASTIC, max_restarts="2", slice_replacement_time="12m")
        assert "every slice loss ends in exit 124 and a whole-JobSet restart (--max-restarts 2)" in line
        (close,) = warnings(**ELASTIC, slice_replacement_time="4m")  # 300 s against 240 s: little margin
        assert close.startswith("--elastic-timeout-seconds 300 leaves 60 s beyond --slice-replacement-time 4m")
        assert warnings(**ELASTIC, slice_replacement_time="4m", elastic_timeout_seconds="360") == []

    def test_a_trainer_that_resizes_does_not_wait(self):
        assert warnings(**ELASTIC, elastic_min_slice_count="2", slice_replacement_time="12m") == \
            warnings(**ELASTIC, elastic_min_slice_count="2")

    def test_not_elastic_has_no_wait(self):
        assert warnings(no_pathways=True, slice_replacement_time="12m") == []


class TestStallAgainstStepAndSave:
    def test_not_longer_than_a_step_is_refused(self):
        (line,) = refused(stall_timeout_seconds="20", step_time="30s", checkpoint_save_time="10s")
        assert line.startswith("--stall-timeout-seconds 20 is not longer than --step-time 30s")
        assert line.endswith("raise --stall-timeout-seconds to at least 80, or give 0 (auto)")

    def test_shorter_than_a_step_plus_a_save_is_a_warning(self):
        (line,) = warnings(stall_timeout_seconds="35", step_time="30s", checkpoint_save_time="10s",
                           termination_grace_period_seconds="60")
        assert line.startswith("--stall-timeout-seconds 35 is shorter than --step-time 30s plus "
                               "--checkpoint-save-time 10s (40 s)")
        assert line.endswith("raise --stall-timeout-seconds to at least 80")

    def test_auto_timeout_against_a_long_save(self):
        step, save = 2.0, 15 * 60.0
        (line,) = warnings(step_time="2s", checkpoint_save_time="15m", termination_grace_period_seconds="3000")
        auto = max(STALL_FLOOR_S, STALL_STEP_MULTIPLE * step)
        assert line.startswith(f"--stall-timeout-seconds 0 (auto: max({STALL_FLOOR_S:g} s, "
                               f"{STALL_STEP_MULTIPLE:g} x the median step) = {auto:g} s)")
        assert line.endswith(f"give --stall-timeout-seconds {math.ceil(2 * (step + save))}")
        assert warnings(step_time="2s", checkpoint_save_time="15m", termination_grace_period_seconds="3000",
                        stall_timeout_seconds="1900") == []


class TestRetriesAgainstRestartBudgets:
    def test_more_retries_than_slice_restarts_is_a_warning(self):
        (line,) = warnings(elastic_slices="1", max_slice_restarts="3", elastic_max_retries="10")
        assert line.startswith("--elastic-max-retries 10 allows 9 in-process recoveries, but --max-slice-restarts 3")
        assert "ends the run (--max-restarts 0)" in line
        assert line.endswith("raise --max-slice-restarts to 9 or lower --elastic-max-retries to 4")
        assert warnings(elastic_slices="1", max_slice_restarts="9", elastic_max_retries="10") == []

    def test_retries_without_elasticity_are_a_warning(self):
        (line,) = warnings(no_pathways=True, max_restarts="4", elastic_max_retries="5")
        assert line.startswith("--elastic-max-retries 5: the trainer retries in process only with --elastic-slices")
        assert "up to --max-restarts 4" in line


def test_all_problems_at_once():
    lines = refused(elastic_slices="1", slice_replacement_time="12m", checkpoint_save_time="1m", step_time="1m",
                    stall_timeout_seconds="30", max_slice_restarts="0")
    flags = [line.split(" ")[0] for line in lines]
    assert flags == ["--max-slice-restarts", "--termination-grace-period-seconds", "--elastic-timeout-seconds",
                     "--stall-timeout-seconds"]


def test_bad_durations_name_their_flag():
    lines = refused(checkpoint_save_time="soon", slice_replacement_time="0s")
    assert lines == ["--checkpoint-save-time 'soon': not a number with a unit; give a duration such as 90s, 2h or 30d",
                     "--slice-replacement-time '0s': must be more than 0s"]


class TestFromRun:
    def test_measured_times_stand_in_and_flags_win(self, tmp_path):
        write_run(tmp_path / "run")
        cal = calibrate(tmp_path / "run")
        run = parse_create(**BASE, from_run=str(tmp_path / "run"))[1]
        assert run.times is not None
        assert (run.times.step_s, run.times.save_s, run.times.replacement_s) == (
            cal.step_time_s, cal.save_s, cal.replacement_s)
        assert run.step_time_seconds == cal.step_time_s  # the checkpoint_period hint reads it too
        given = parse_create(**BASE, from_run=str(tmp_path / "run"), checkpoint_save_time="7s")[1].times
        assert given is not None and given.save_s == 7 and given.step_s == cal.step_time_s

    def test_a_measured_time_is_named_in_the_message(self, tmp_path):
        write_run(tmp_path / "run")  # replacement: 5 s
        (line,) = refused(**ELASTIC, from_run=str(tmp_path / "run"), elastic_timeout_seconds="3")
        assert line.startswith(f"--elastic-timeout-seconds 3 is shorter than the replacement time measured in "
                               f"--from-run {tmp_path / 'run'} (5 s)")

    def test_not_a_run_is_refused(self, tmp_path):
        (line,) = refused(from_run=str(tmp_path / "nothing"))
        assert line.startswith("--from-run: ")


class TestRenderedManifest:
    def test_values_read_back_from_the_jobset(self):
        spec = parse_create(**BASE, **ELASTIC, max_restarts="2", elastic_max_retries="4",
                            elastic_timeout_seconds="600", stall_timeout_seconds="1800",
                            termination_grace_period_seconds="90")[0]
        (jobset,) = render(spec).objects
        assert budgets_from_jobset(jobset) == Budgets(
            pathways=True, elastic=True, has_trainer=True, grace_s=90, max_slice_restarts=10, max_restarts=2,
            elastic_timeout_s=600, elastic_min_slice_count=-1, stall_timeout_s=1800.0, elastic_max_retries=4,
            vms_per_slice=4)
        mc = render(parse_create(**BASE, no_pathways=True)[0]).objects[0]
        got = budgets_from_jobset(mc)
        assert (got.pathways, got.elastic, got.has_trainer, got.grace_s, got.elastic_max_retries) == (
            False, False, True, 30, None)

    def test_validate_reports_the_rules(self, cli, tmp_path):
        spec = parse_create(**BASE, elastic_slices="1", max_slice_restarts="2", elastic_max_retries="10",
                            stall_timeout_seconds="30")[0]
        path = tmp_path / "jobset.yaml"
        path.write_text(render(spec).text, encoding="utf-8")
        result = cli("workload", "validate", str(path), "--checkpoint-save-time", "60s", "--step-time", "40s",
                     "--slice-replacement-time", "10m")
        assert result.code == 1
        lines = result.out.splitlines()
        assert [line.split(": ")[2].split(" ")[0] for line in lines] == [
            "--termination-grace-period-seconds", "--elastic-timeout-seconds", "--stall-timeout-seconds"]
        assert all(line.startswith(f"{path}: timeouts and budgets: ") for line in lines)
        assert f"warning: {path}: --elastic-max-retries 10 allows 9 in-process recoveries" in result.err
        assert "(3 of them: timeouts and budgets that cannot work together, or settings the trainer refuses " \
               "at its start)" in result.err

    def test_validate_without_times_checks_the_budgets_only(self, cli, tmp_path):
        spec = parse_create(**BASE, elastic_slices="1", max_slice_restarts="2", elastic_max_retries="10")[0]
        path = tmp_path / "jobset.yaml"
        path.write_text(render(spec).text, encoding="utf-8")
        result = cli("workload", "validate", str(path))
        assert result.code == 0 and "--elastic-max-retries 10 allows 9" in result.err
        bad = cli("workload", "validate", str(path), "--step-time", "fast")
        assert bad.code == 2 and bad.err == ("error: --step-time 'fast': not a number with a unit; give a duration such as "
                                        "90s, 2h or 30d\n")

    def test_a_foreign_manifest_uses_its_own_fields(self):
        jobset = xpk_pathways()
        head = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        del head["terminationGracePeriodSeconds"]  # as xpk renders it: the API's default, 30 s
        for box in head["containers"]:
            box["env"] = [e for e in box["env"] if not e["name"].startswith("ELXPK_")]
        budgets = budgets_from_jobset(jobset)
        assert (budgets.pathways, budgets.has_trainer, budgets.grace_s, budgets.elastic_max_retries) == (
            True, True, 30, None)
        errors, _ = budget_findings(budgets, Times(save_s=45.0, labels={"save": "SAVE"}))
        assert errors and errors[0].startswith("--termination-grace-period-seconds 30 is shorter than SAVE")


def test_the_checkpoint_hint_uses_the_given_times(cli):
    args = ["workload", "create", "--workload", "run-1", "--tpu-type", "v5litepod-16", "--num-slices", "3",
            "--command", "python3 train.py", "--slice-mtbf", "3d", "--step-time", "1s", "--dry-run"]
    assumed = [line for line in cli(*args).err.splitlines() if line.startswith("hint: ")]
    given = [line for line in cli(*args, "--checkpoint-save-time", "45s", "--slice-replacement-time", "2m",
                                  "--termination-grace-period-seconds", "200").err.splitlines()
             if line.startswith("hint: ")]
    assert len(assumed) == len(given) == 1 and "an assumed" in assumed[0] and "45s saves" in given[0]
    assert assumed[0].split(" steps for ")[0] != given[0].split(" steps for ")[0]  # another planned period
