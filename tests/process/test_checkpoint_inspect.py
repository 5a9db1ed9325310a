"""`elxpk checkpoint inspect DIR` as the user runs it, on directories the real writers made: a default
`python -m trainer` run, orbax's own CheckpointManager (MaxText's setup, tests/support/orbax_writer.py), and
both of them SIGKILLed in the middle of a save. Exit codes: 0 healthy, 1 findings, 2 bad input."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elxpk.checkpoints.inspection import MARKS, TMP_STEP
from elxpk_contract.progress_record import PROGRESS_FILE, Progress
from tests.conftest import REPO_ROOT
from tests.process.conftest import elxpk, user_env

pytestmark = pytest.mark.slow


def inspect(directory: Path | str, *flags: str, cwd: Path) -> tuple[int, dict, str]:
    done = elxpk(["checkpoint", "inspect", str(directory), "-o", "json", *flags], cwd)
    assert done.code in (0, 1), done.err[-3000:]
    return done.code, json.loads(done.out), done.err


def states(report: dict) -> dict[str, tuple[str, str]]:
    return {s["name"]: (s["state"], s["reason"]) for s in report["steps"]}


def orbax_writer(directory: Path, spec: str) -> None:
    done = subprocess.run([sys.executable, "-m", "tests.support.orbax_writer", str(directory), spec], cwd=REPO_ROOT,
                          env=user_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]


def orbax_latest(directory: Path) -> dict:
    done = subprocess.run([sys.executable, "-m", "tests.support.orbax_writer", str(directory), "--latest"],
                          cwd=REPO_ROOT, env=user_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _written(tmp: Path) -> bool:
    try:
        return any(p.name in MARKS for p in tmp.rglob("*"))
    except OSError:  # renamed away while listed: the save committed
        return False


def kill_mid_save(args: list[str], checkpoints: Path, cwd: Path, *, step: int | None = None,
                  written: bool = False) -> str:
    """Start a writer, SIGKILL it as soon as orbax's temporary directory of a save (of `step`, or any)
    appears (with `written`: once orbax has written its metadata into it), and return that directory's
    name. Polled, never timed."""
    proc = subprocess.Popen(args, cwd=cwd, env=user_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 300
        while proc.poll() is None and time.monotonic() < deadline:
            names = [p.name for p in checkpoints.iterdir()] if checkpoints.is_dir() else []
            torn = [n for n in names if (m := TMP_STEP.match(n)) and (step is None or int(m.group(1)) == step)]
            if torn and (not written or _written(checkpoints / torn[0])):
                proc.kill()
                proc.wait()
                return torn[0]
            time.sleep(0.005)
        raise AssertionError(f"no save was caught in flight (exit {proc.poll()})")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def orbax_dir(tmp_path_factory) -> Path:
    """Three committed saves, every 2 steps, by orbax's own writer."""
    root = tmp_path_factory.mktemp("orbax") / "checkpoints"
    orbax_writer(root, "2:1,4:1,6:1")
    return root


@pytest.fixture(scope="module")
def killed_orbax_dir(tmp_path_factory) -> tuple[Path, str]:
    """Saves 2 and 4 committed, then the process SIGKILLed while orbax writes step 6 (256 MiB), once orbax
    has written its first files there (a kill before that leaves an empty directory: see the test of what
    --quarantine leaves)."""
    root = tmp_path_factory.mktemp("killed") / "checkpoints"
    name = kill_mid_save([sys.executable, "-m", "tests.support.orbax_writer", str(root), "2:1,4:1,6:256"], root,
                         REPO_ROOT, step=6, written=True)
    assert not (root / "6").exists()
    return root, name


def copy(source: Path, tmp_path: Path) -> Path:
    target = tmp_path / "copy" / source.name
    shutil.copytree(source, target)
    return target


# --- healthy ------------------------------------------------------------------------------------------------

def test_a_finished_default_trainer_run_inspects_healthy(finished_short_run, tmp_path):
    for directory in (finished_short_run, finished_short_run / "checkpoints"):  # RUN_DIR or its checkpoints
        code, report, _ = inspect(directory, "--checkpoint-period", "2", cwd=tmp_path)
        assert code == 0 and report["healthy"] and report["findings"] == []
        assert report["layout"] == "elxpk trainer"
        assert states(report) == {"2": ("committed", ""), "4": ("committed", "")}
        assert report["restore_step"] == 4 and report["trainer_step"] == 4
        assert all(s["committed_at"] for s in report["steps"])
    text = elxpk(["checkpoint", "inspect", str(finished_short_run)], tmp_path)
    assert text.code == 0 and "restore: step 4" in text.out and text.out.rstrip().endswith("healthy")


def test_orbax_saves_as_maxtext_makes_them_inspect_healthy(orbax_dir, tmp_path):
    code, report, _ = inspect(orbax_dir, cwd=tmp_path)
    assert code == 0 and report["layout"] == "orbax (MaxText)"
    assert states(report) == {n: ("committed", "") for n in ("2", "4", "6")}
    assert (report["restore_step"], report["period"], report["period_source"]) == (6, 2, "inferred")
    # MaxText's base_output_directory/run_name holds checkpoints/: given the run's directory, it is found
    code, report, _ = inspect(orbax_dir.parent, cwd=tmp_path)
    assert code == 0 and report["directory"] == str(orbax_dir)


def test_the_launcher_reads_a_checkpoint_directory_without_importing_jax(finished_short_run, tmp_path):
    probe = ("import sys; from elxpk.cli.main import main; code = main(['checkpoint', 'inspect', sys.argv[1]]); "
             "print([m for m in ('jax', 'orbax', 'tensorstore', 'numpy') if m in sys.modules], code)")
    done = subprocess.run([sys.executable, "-c", probe, str(finished_short_run)], cwd=tmp_path, env=user_env(),
                          capture_output=True, text=True, timeout=120)
    assert done.stdout.strip().splitlines()[-1] == "[] 0", done.stderr[-2000:]


# --- torn: a killed save ------------------------------------------------------------------------------------

def test_a_save_killed_mid_write_by_sigkill_is_torn_and_quarantine_moves_it(killed_orbax_dir, tmp_path):
    root = copy(killed_orbax_dir[0], tmp_path)
    name = killed_orbax_dir[1]
    code, report, err = inspect(root, cwd=tmp_path)
    assert code == 1 and err.strip().startswith(f"error: checkpoint findings: step 6 ({name}) is torn")
    assert states(report)[name][0] == "torn" and "never committed" in states(report)[name][1]
    assert states(report)["4"] == ("committed", "") and report["restore_step"] == 4

    code, report, _ = inspect(root, "--quarantine", cwd=tmp_path)
    assert code == 0, report["findings"]
    [moved] = report["moved"]
    target = Path(moved["to"])
    assert target.parent == root / "elxpk-quarantine" and target.name.startswith("6-")
    assert (target / "elxpk_skip_reason.txt").read_text().startswith("never committed")
    assert sorted(p.name for p in root.iterdir()) == ["2", "4", "elxpk-quarantine"]
    assert orbax_latest(root) == {"latest": 4, "steps": [2, 4], "restored_step": 4}  # what a restart takes


def test_a_trainer_killed_mid_save_leaves_a_torn_step_that_inspect_finds(tmp_path):
    for attempt in range(3):  # the kill can land just after a small save's commit: then kill again
        run = tmp_path / f"run{attempt}"
        flags = ["--run-dir", str(run), "--steps", "40", "--checkpoint-period", "2"]
        name = kill_mid_save([sys.executable, "-m", "trainer", *flags], run / "checkpoints", tmp_path)
        if (run / "checkpoints" / name).exists():
            break
    code, report, _ = inspect(run, "--checkpoint-period", "2", cwd=tmp_path)
    assert code == 1 and report["layout"] == "elxpk trainer"
    assert states(report)[name][0] == "torn"
    whole = [s["step"] for s in report["steps"] if s["state"] == "committed"]
    assert report["restore_step"] == (max(whole) if whole else None)


def test_a_killed_save_on_gs_is_torn_and_moved_aside_within_the_bucket(killed_orbax_dir, tmp_path):
    done = subprocess.run([sys.executable, "-m", "tests.process.gs_checkpoint_inspect", str(killed_orbax_dir[0])],
                          cwd=REPO_ROOT, env=user_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout)
    first, moving, after = out["runs"]
    assert first["code"] == 1 and moving["code"] == 0 and after["code"] == 0, [r["err"] for r in out["runs"]]
    report = json.loads(first["out"])
    assert report["directory"] == "gs://bucket/run/checkpoints"
    assert states(report)["6"][0] == "torn" and "never committed" in states(report)["6"][1]
    assert report["restore_step"] == 4
    assert json.loads(moving["out"])["moved"][0]["to"].startswith("gs://bucket/run/checkpoints/elxpk-quarantine/6-")
    assert out["names"] == ["2", "4", "elxpk-quarantine"]
    assert "elxpk_skip_reason.txt" in {Path(rel).name for rel in out["quarantine"]}


# --- torn or unreadable: files changed after the commit -----------------------------------------------------

def _largest(folder: Path) -> Path:
    return max((p for p in folder.rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)


def test_a_truncated_array_file_of_a_trainer_step_is_torn_and_restore_falls_back(finished_short_run, tmp_path):
    run = copy(finished_short_run, tmp_path)
    victim = _largest(run / "checkpoints" / "4" / "state")
    victim.write_bytes(victim.read_bytes()[: victim.stat().st_size // 2])
    code, report, _ = inspect(run, cwd=tmp_path)
    assert code == 1
    state, reason = states(report)["4"]
    assert state == "torn" and reason.startswith("file changed: state/")
    assert report["restore_step"] == 2  # the trainer's own check passes over step 4


@pytest.mark.parametrize("damage, state, reason", [
    (lambda step: (step / "items" / "_METADATA").write_text("{trunc"), "unreadable", "item 'items': _METADATA is not JSON"),
    (lambda step: (step / "items" / "manifest.ocdbt").unlink(), "torn", "file missing: items/manifest.ocdbt"),
    (lambda step: _largest(step / "items").write_bytes(b""), "torn", "file empty: items/"),
    (lambda step: (step / "_CHECKPOINT_METADATA").unlink(), "torn", "no _CHECKPOINT_METADATA"),
    (lambda step: shutil.rmtree(step / "items"), "torn", "item 'items' missing"),
])
def test_damaged_files_of_a_maxtext_step_are_found(orbax_dir, tmp_path, damage, state, reason):
    root = copy(orbax_dir, tmp_path)
    damage(root / "6")
    code, report, _ = inspect(root, cwd=tmp_path)
    assert code == 1
    assert states(report)["6"][0] == state and states(report)["6"][1].startswith(reason)
    # orbax lists step 6 all the same: a MaxText restart would take it
    assert report["restore_step"] == 6 and any(f.startswith("a restart restores step 6") for f in report["findings"])
    if state == "torn":
        code, report, _ = inspect(root, "--quarantine", cwd=tmp_path)
        assert code == 0 and report["restore_step"] == 4 and [m["step"] for m in report["moved"]] == [6]


def test_quarantine_leaves_what_carries_no_orbax_or_trainer_file(orbax_dir, tmp_path):
    root = copy(orbax_dir, tmp_path)
    (root / "8.orbax-checkpoint-tmp").mkdir()  # a save killed before orbax wrote anything: empty, so moved
    (root / "10").mkdir()
    (root / "10" / "notes.txt").write_text("someone else's")
    no_step = root / ("9" * 200)  # no step number (over 19 digits), whatever it holds
    shutil.copytree(root / "2", no_step)
    code, report, _ = inspect(root, "--quarantine", cwd=tmp_path)
    assert code == 1 and [m["name"] for m in report["moved"]] == ["8.orbax-checkpoint-tmp"]
    assert sorted(states(report)) == ["10", "2", "4", "6"] and no_step.is_dir()
    assert not (root / "8.orbax-checkpoint-tmp").exists() and (root / "10" / "notes.txt").is_file()
    assert all("--quarantine leaves it" in f for f in report["findings"] if f.startswith("step "))


# --- cadence ------------------------------------------------------------------------------------------------

def test_a_gap_of_two_periods_with_no_save_is_a_finding(tmp_path):
    root = tmp_path / "checkpoints"
    orbax_writer(root, "2:1,4:1,10:1")
    code, report, err = inspect(root, "--checkpoint-period", "2", cwd=tmp_path)
    assert code == 1 and report["gaps"] == [[4, 10]]
    assert "no committed save between steps 4 and 10: 3 periods of 2" in err
    code, report, _ = inspect(root, "--checkpoint-period", "3", cwd=tmp_path)
    assert code == 1 and report["gaps"] == [[4, 10]]  # 6 steps: exactly two periods of 3
    code, report, _ = inspect(root, "--checkpoint-period", "4", cwd=tmp_path)
    assert code == 0 and report["gaps"] == []  # 6 steps: one and a half periods of 4
    code, report, _ = inspect(root, cwd=tmp_path)
    assert code == 1 and (report["period"], report["period_source"]) == (2, "inferred")


def test_saves_that_stopped_while_the_trainer_went_on_are_a_finding(finished_short_run, tmp_path):
    run = copy(finished_short_run, tmp_path)
    record = Progress(steps_done=9, step_time=1.0, checkpoint_step=4, checkpoint_time=1.0, updated_at=1.0)
    (run / "checkpoints" / PROGRESS_FILE).write_text(json.dumps(record.to_json()))
    code, report, _ = inspect(run, "--checkpoint-period", "2", cwd=tmp_path)
    assert code == 1 and report["trainer_step"] == 9 and report["gaps"] == [[4, 9]]
    assert report["findings"] == ["saves stopped: the trainer is at step 9, the last committed save is step 4 "
                                  "(period 2)"]


# --- bad input: one line, exit 2, nothing moved ----------------------------------------------------------------

def test_bad_input_exits_2_with_one_line_naming_it(orbax_dir, tmp_path):
    a_file = tmp_path / "file"
    a_file.write_text("x")
    other = tmp_path / "other"
    (other / "logs").mkdir(parents=True)
    cases = [([str(tmp_path / "missing")], "DIR"), ([str(a_file)], "DIR"), ([str(other)], "DIR"),
             ([str(orbax_dir), "--checkpoint-period", "0"], "--checkpoint-period"),
             ([str(orbax_dir), "--checkpoint-period", "two"], "--checkpoint-period"),
             ([str(orbax_dir), "-o", "yaml"], "-o/--output")]
    for args, flag in cases:
        done = elxpk(["checkpoint", "inspect", *args], tmp_path)
        assert done.code == 2 and done.out == "", (args, done.err)
        assert len(done.err.strip().splitlines()) == 1 and done.err.startswith(f"error: {flag}"), done.err


def test_quarantine_refuses_the_current_directory_and_its_parents(killed_orbax_dir, tmp_path):
    root = copy(killed_orbax_dir[0], tmp_path)
    before = sorted(p.name for p in root.iterdir())
    for cwd in (root, root / "4"):
        done = elxpk(["checkpoint", "inspect", str(root), "--quarantine"], cwd)
        assert done.code == 2 and "working directory" in done.err and "--quarantine" in done.err
    assert sorted(p.name for p in root.iterdir()) == before
    assert not (root / "elxpk-quarantine").exists()


def test_an_empty_checkpoint_directory_is_healthy(tmp_path):
    (tmp_path / "checkpoints").mkdir()
    done = elxpk(["checkpoint", "inspect", str(tmp_path / "checkpoints")], tmp_path)
    assert done.code == 0 and "no checkpoint saved yet" in done.out and "restore: none" in done.out



# --- the reader never fails on what it reads ----------------------------------------------------------------

JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
                    max_leaves=12)
CONTENT = st.one_of(st.binary(max_size=512), JSON.map(lambda v: json.dumps(v).encode()),
                    st.dictionaries(st.sampled_from(["item_handlers", "commit_timestamp_nsecs", "version", "step",
                                                     "files", "arrays", "fingerprint"]), JSON, max_size=5)
                    .map(lambda v: json.dumps(v).encode()))


@pytest.mark.parametrize("layout", ["orbax", "trainer"])
def test_any_content_of_a_metadata_file_is_classified_never_raised(layout, orbax_dir, finished_short_run, tmp_path):
    from elxpk.checkpoints.inspection import COMMITTED, inspect_directory
    from elxpk_storage.checkpoint_files import checkpoint_root

    source = orbax_dir if layout == "orbax" else finished_short_run / "checkpoints"
    root = copy(source, tmp_path)
    step = "6" if layout == "orbax" else "4"
    files = (["_CHECKPOINT_METADATA", "items/_METADATA", "items/manifest.ocdbt"] if layout == "orbax"
             else ["elxpk_digest.json", "_CHECKPOINT_METADATA"])
    originals = {rel: (root / step / rel).read_bytes() for rel in files}

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(rel=st.sampled_from(files), content=CONTENT)
    def check(rel, content):
        (root / step / rel).write_bytes(content)
        try:
            report = inspect_directory(checkpoint_root(str(root)), None)
            [found] = [s for s in report.steps if s.name == step]
            assert found.state in ("committed", "torn", "unreadable")
            assert (found.state == COMMITTED) == (found.reason == "")
            if layout == "trainer" and rel == "elxpk_digest.json" and content != originals[rel]:
                assert found.state != COMMITTED  # the digest is the trainer's record: any change shows
        finally:
            (root / step / rel).write_bytes(originals[rel])

    check()
