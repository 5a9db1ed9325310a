"""Every number a run reports is canonical (issue 29): a run that loses slices, in any mode, reports bit for bit
the losses of a run that lost none, and holds the same state at every checkpoint both runs kept.

Run as the user runs it: `elxpk local run` and `elxpk compare --rtol 0` as subprocesses, with the exit codes
the README documents. The loss that was one ulp off after a resize came from XLA vectorising the loss's
reduce differently at the two widths; whether that shows depends on the vector ISA the code is compiled
for (not on this machine's default AVX-512, on the filer's), so the runs here are compiled for AVX2, where
the unfixed trainer reported 16 of 38 survivor losses off (trainer.core.model.sum_in_fixed_order).
"""

from __future__ import annotations

import json
import platform
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.process.conftest import Exited, elxpk, user_env

pytestmark = pytest.mark.slow
STEPS = 20
# local run's own model (the tiny test model's shapes do not show the ISA-dependent reduce), and 8 examples per
# slice shard whatever the slice count: the per-shard program the issue saw.
SHARD = 8
_X86 = platform.machine().lower() in ("x86_64", "amd64")


def _env() -> dict[str, str]:
    env = user_env()
    if _X86:  # the ISA under which the width-dependent reduce showed; other machines compile their own
        env["XLA_FLAGS"] = "--xla_cpu_max_isa=AVX2"
    return env


def _local_run_process(run_dir: Path, *flags: str, slices: int = 2) -> Exited:
    """Run `elxpk local run`, check it exited 0, and return the process (what it printed)."""
    # local run calls a step stalled after 5 s (its hang tests recover in seconds); at a CI load of 20 the
    # first step of a 2-slice reference took longer and the run exited 76. These runs are about losses.
    done = elxpk(["local", "run", "--run-dir", str(run_dir), "--seed", "7", "--steps", str(STEPS), "--plain",
                  "--num-slices", str(slices), f"--trainer-arg=--global-batch={SHARD * slices}",
                  "--trainer-arg=--stall-timeout-seconds=300", *flags],
                 run_dir.parent, env=_env())
    assert done.code == 0, done.out[-2000:] + done.err[-3000:]
    return done


def _local_run(run_dir: Path, *flags: str, slices: int = 2) -> Path:
    _local_run_process(run_dir, *flags, slices=slices)
    return run_dir


def _digests(run_dir: Path) -> dict[int, tuple]:
    """step -> (config fingerprint, every array's fingerprint) of each checkpoint the run kept."""
    found = {}
    for record in (run_dir / "checkpoints").glob("*/elxpk_digest.json"):
        body = json.loads(record.read_text(encoding="utf-8"))
        found[body["step"]] = (body["fingerprint"], body["arrays"])
    return found


def assert_canonical(reference: Path, run: Path) -> None:
    """`elxpk compare --rtol 0` exits 0 over every step, and the checkpoints both runs kept are the same state."""
    compared = elxpk(["compare", str(reference), str(run), "--rtol", "0", "-o", "json"], run.parent, env=_env())
    result = json.loads(compared.out)
    assert compared.code == 0, result["failures"]
    assert result["bitwise_equal"] and result["common_steps"] == STEPS
    ref, got = _digests(reference), _digests(run)
    common = sorted(set(ref) & set(got))
    assert STEPS in common, (sorted(ref), sorted(got))  # the final save: at least the end state is compared
    assert {s: got[s] for s in common} == {s: ref[s] for s in common}


class References:
    """One uninterrupted run per (mode, slice count), shared by every case that compares with it."""

    def __init__(self, root: Path) -> None:
        self._root, self._runs = root, {}

    def get(self, slices: int, mode: str = "resize") -> Path:
        if (mode, slices) not in self._runs:
            self._runs[mode, slices] = _local_run(self._root / f"ref-{mode}-{slices}", "--no-faults", "--mode",
                                                  mode, "--checkpoint-period", "10", slices=slices)
        return self._runs[mode, slices]


@pytest.fixture(scope="module")
def references(tmp_path_factory: pytest.TempPathFactory) -> References:
    return References(tmp_path_factory.mktemp("references"))


@st.composite
def resize_faults(draw) -> tuple[int, int, list[str], str]:
    """(slices, checkpoint period, --kill-slice values, --revive-after): up to all but one slice lost, each
    at its own step; revived after 2 s (a scale-up back to full width mid-run) or never (600 s)."""
    slices = draw(st.sampled_from([2, 3]))
    lost = draw(st.lists(st.integers(0, slices - 1), min_size=1, max_size=slices - 1, unique=True))
    kills = [f"{s}@{draw(st.integers(1, STEPS - 2))}" for s in lost]
    return slices, draw(st.sampled_from([2, 4, 5, 10])), kills, draw(st.sampled_from(["2", "600"]))


# Three local runs, and the two shared references when it runs first: 100 s on a quiet machine, 392 s at a CI
# load, past the default 600 s hang guard when the host also stole time; the guard is for hangs, not speed.
@pytest.mark.timeout(1500)
@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=resize_faults())
def test_resize_reports_the_losses_of_a_run_that_lost_no_slice(references, tmp_path_factory, case):
    slices, period, kills, revive = case
    run = tmp_path_factory.mktemp("resize") / "run"
    _local_run(run, "--mode", "resize", "--checkpoint-period", str(period), "--revive-after", revive,
               *(f"--kill-slice={k}" for k in kills), slices=slices)
    assert_canonical(references.get(slices), run)


def test_the_issue_case_kill_1_at_5_period_10_never_revived(references, tmp_path):
    """The issue's own shape (2 slices, period 10, the slice never back), fixed, so CI always runs it: the
    unfixed trainer reported 6 of the 15 survivor losses off here."""
    run = _local_run(tmp_path / "run", "--mode", "resize", "--checkpoint-period", "10", "--revive-after", "600",
                     "--kill-slice", "1@5")
    assert_canonical(references.get(2), run)


def test_pause_resume_reports_the_losses_of_a_run_that_lost_no_slice(references, tmp_path):
    run = _local_run(tmp_path / "run", "--mode", "pause-resume", "--checkpoint-period", "4",
                     "--revive-after", "1", "--kill-slice", "1@9")
    assert_canonical(references.get(2), run)


def test_multi_controller_reports_the_losses_of_a_run_that_lost_no_slice(references, tmp_path):
    """A killed multi-controller group restarts, resumes from a checkpoint and reproduces an uninterrupted
    multi-controller run bit for bit (compared with a multi-controller reference: gloo's cross-process
    reduction is its own). This is also the local run's group-restart test (it was
    tests/local/test_multicontroller.py, the same claim on the same kind of run): the supervisor's logs, the
    report's recovery and its fallback from --recovery live are checked on this run."""
    period, kill = 5, 11
    run = tmp_path / "run"
    done = _local_run_process(run, "--mode", "multi-controller", "--checkpoint-period", str(period),
                             "--revive-after", "0", "--kill-slice", f"1@{kill}")
    assert f"slice 1 lost at step {kill}" in done.out and "Traceback" not in done.out + done.err
    # the supervisor restarted the group once: two attempts' logs per process
    assert sorted(p.name for p in (run / "logs").iterdir()) == [
        "attempt1-process0.log", "attempt1-process1.log", "attempt2-process0.log", "attempt2-process1.log"]

    reported = elxpk(["report", str(run), "-o", "json", "--no-png"], tmp_path, env=_env())
    assert reported.code == 0, reported.err[-2000:]
    report = json.loads(reported.out)
    assert len(report["recoveries"]) == 1 and report["sessions"] == 2
    rec = report["recoveries"][0]
    assert rec["lost_slices"] == [1] and rec["restored_step"] % period == 0
    # --recovery live is the default, but jax aborted the survivors: the checkpoint, and the reason said.
    assert rec["state_source"] == "checkpoint" and "multi-controller" in rec["live_fallback"]
    assert rec["first_step_s"] is not None and rec["first_step_s"] > rec["slices_ready_s"] >= 0

    assert_canonical(references.get(2, "multi-controller"), run)
