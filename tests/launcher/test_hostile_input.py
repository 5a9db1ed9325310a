"""Hostile input through the console script, one process each (issue #21): special files, inputs over
their cap, a stdin that never ends, malformed kubeconfigs and config files, broken incident records, and
what used to be silently wrong. Each is exit 2 with one line, no traceback, nothing written, and a peak
RSS of at most 200 MB, measured for the process itself (`resource.getrusage` of the child)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from elxpk.bounded_read import MANIFEST_BYTES, RUN_RECORD_BYTES, ReadRefused, read_fd, read_limited
from tests.support.processes import HANG_GUARD_S, run_measured
from tests.support.run_writer import FakeRun, write_run

ELXPK = Path(sys.executable).parent / "elxpk"
CORPUS = Path(__file__).parent / "hostile_corpus"
GOOD = ["--workload", "run-1", "--tpu-type", "v5p-8", "--command", "python3 train.py"]
PEAK_MB = 200


def elxpk(*argv: str, stdin=subprocess.DEVNULL, env: dict | None = None, cwd: Path | None = None) -> dict:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("ELXPK_")}
    environ.update(env or {})
    return run_measured([str(ELXPK), *argv], stdin=stdin, env=environ, cwd=cwd)


def refused(result: dict, *words: str) -> str:
    """The one error line of a refusal (exit 2) within the memory bound; `words` must be in it."""
    err = result["err"]
    assert result["code"] == 2, err
    assert len(err.splitlines()) == 1 and err.startswith("error: "), err
    assert "Traceback" not in err and "internal error" not in err and "ERROR:root" not in err, err
    assert result["rss_kib"] <= PEAK_MB * 1024, f"{result['rss_kib'] // 1024} MB: {err}"
    for word in words:
        assert word in err, err
    return err


@pytest.fixture()
def config(tmp_path) -> dict:
    """No config file of the machine: an empty one."""
    path = tmp_path / "config.yaml"
    path.write_text("")
    return {"ELXPK_CONFIG": str(path)}


@pytest.fixture()
def fifo(tmp_path) -> Path:
    path = tmp_path / "fifo"
    os.mkfifo(path)  # nobody writes: opening it for reading would block
    return path


@pytest.fixture()
def huge(tmp_path) -> Path:
    path = tmp_path / "huge.yaml"
    with open(path, "wb") as handle:
        handle.truncate(50 * 1024 * 1024)  # 50 MB, sparse: size is what the reader sees first
    return path


# --- special files and sizes, for every reader ---------------------------------------------------------------


def test_validate_refuses_special_files_and_big_files_quickly_for_the_real_reason(tmp_path, fifo, huge, config):
    refused(elxpk("workload", "validate", "/dev/zero", env=config), "character device")
    refused(elxpk("workload", "validate", "/dev/full", env=config), "character device")
    refused(elxpk("workload", "validate", str(fifo), env=config), "FIFO")
    refused(elxpk("workload", "validate", str(tmp_path), env=config), "directory")
    refused(elxpk("workload", "validate", str(huge), env=config), "50.0 MiB, over the 4.0 MiB")
    with open("/dev/zero", "rb") as zero:
        refused(elxpk("workload", "validate", "-", stdin=zero, env=config), "-: ", "over the 4.0 MiB")


def test_every_file_flag_refuses_special_and_oversized_files(tmp_path, fifo, huge, config):
    run = write_run(tmp_path / "run", FakeRun(steps=4))
    for path in ("/dev/zero", str(fifo), str(huge)):
        refused(elxpk("workload", "create", *GOOD, "--env-file", path, "--dry-run", env=config), "--env-file")
        refused(elxpk("workload", "status", "x", "--kubeconfig", path, env=config), "--kubeconfig")
        refused(elxpk("workload", "create", *GOOD, "--dry-run", env={"ELXPK_CONFIG": path}), "ELXPK_CONFIG")
        refused(elxpk("report", str(run), "--incidents", path, "--no-png", env=config), "--incidents")
    refused(elxpk("workload", "events", "x", "--record", "/dev/full", env=config), "--record", "not a regular")
    refused(elxpk("workload", "events", "x", "--record", str(fifo), env=config), "--record", "not a regular")
    assert not (run / "report.png").exists()


@pytest.mark.parametrize("name", ["metrics.jsonl", "events.jsonl", "run.json"])
def test_run_records_that_are_special_or_huge_are_refused(tmp_path, name, config):
    run = write_run(tmp_path / "run", FakeRun(steps=4))
    good = write_run(tmp_path / "good", FakeRun(steps=4))
    for target in ("/dev/zero", "fifo", "huge"):
        (run / name).unlink(missing_ok=True)
        if target == "fifo":
            os.mkfifo(run / name)
        elif target == "huge":  # sparse: over the cap of a run record (1 GiB) and of run.json
            with open(run / name, "wb") as handle:
                handle.truncate(RUN_RECORD_BYTES + 1)
        else:
            (run / name).symlink_to(target)
        refused(elxpk("report", str(run), "--no-png", env=config), name)
        refused(elxpk("compare", str(good), str(run), env=config), name)
        refused(elxpk("plan", "--from-run", str(run), "--slice-mtbf", "30d", "--num-slices", "4", "--step-time",
                      "1s", "--checkpoint-save", "5s", "--restore", "10s", env=config), name)
        refused(elxpk("workload", "validate", str(CORPUS / "dup_keys.yaml"), "--from-run", str(run), env=config),
                name)


@pytest.mark.slow
@pytest.mark.timeout(HANG_GUARD_S)  # its children are bounded by CPU seconds (run_measured); at a load of 20 the
def test_the_largest_inputs_within_the_caps_stay_under_200_mb(tmp_path, config):  # wall time is many times that
    """Just under each cap, the most memory-hungry readers: validate (values to parse), compare (two runs in
    memory; at the run-record caps, projected: under RUN_RECORDS_PEAK_MB), report with an incident record."""
    import yaml

    from elxpk.bounded_read import (
        INCIDENT_BYTES,
        KUBECONFIG_BYTES,
        KUBECONFIG_VALUES,
        RUN_RECORDS,
        RUN_RECORDS_PEAK_MB,
        YAML_VALUES,
    )

    flow = tmp_path / "flow.yaml"
    flow.write_text("[" + "1," * (YAML_VALUES - 10) + "1]")
    done = elxpk("workload", "validate", str(flow), env=config)
    # Parsed whole within the cap, then refused as holding no JobSet (exit 2), not as a value too many.
    assert done["code"] == 2 and "no JobSet" in done["err"] and done["rss_kib"] <= PEAK_MB * 1024, \
        (done["rss_kib"], done["err"])
    many = 1900  # clusters, users and contexts: ~6 values each, under KUBECONFIG_VALUES and KUBECONFIG_BYTES
    kubeconfig = tmp_path / "kubeconfig.yaml"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c0",
        "clusters": [{"name": f"c{i}", "cluster": {"server": "https://127.0.0.1:1"}} for i in range(many)],
        "users": [{"name": f"u{i}", "user": {"token": "t" * 100}} for i in range(many)],
        "contexts": [{"name": f"c{i}", "context": {"cluster": f"c{i}", "user": f"u{i}"}} for i in range(many)]}))
    assert kubeconfig.stat().st_size <= KUBECONFIG_BYTES
    assert sum(kubeconfig.read_text().count(c) for c in ",:-[{?\n") <= KUBECONFIG_VALUES
    done = elxpk("workload", "status", "x", "--kubeconfig", str(kubeconfig), "--context", "nope", env=config)
    refused(done, "--context 'nope': not found in --kubeconfig")
    # Run records: a run at the caps is millions of lines, too long to write and read here. Runs of records
    # all different (the most a step can cost), at two lengths, give compare's bytes per record (both runs'
    # events at their cap in each): the peak at the caps follows, and must stay under RUN_RECORDS_PEAK_MB.
    peaks = {}
    for count in (20_000, 220_000):
        distinct = [str(write_distinct_records(tmp_path / f"distinct-{name}-{count}", count)) for name in ("a", "b")]
        done = elxpk("compare", *distinct, env=config)
        assert done["code"] == 1 and done["rss_kib"] <= PEAK_MB * 1024, (done["rss_kib"], done["err"])
        peaks[count] = done["rss_kib"] / 1024
    per_record = (peaks[220_000] - peaks[20_000]) / 200_000
    at_caps = peaks[20_000] + per_record * (RUN_RECORDS - 20_000)
    assert at_caps <= RUN_RECORDS_PEAK_MB, (at_caps, peaks)
    runs = [str(write_run(tmp_path / name, FakeRun(steps=20_000))) for name in ("a", "b")]
    done = elxpk("compare", *runs, env=config)
    assert done["code"] == 0 and done["rss_kib"] <= PEAK_MB * 1024, (done["rss_kib"], done["err"])
    line = json.dumps({"id": "", "time": "2026-01-01T00:00:00Z", "kind": "exit", "cause": "infra", "reason": "Error",
                       "message": "m" * 150, "slice": 1, "pod": "train-worker-1-0-abcde", "node": "gke-node-1",
                       "container": "jax-tpu", "exit_code": 137, "workload": "train"})
    record = tmp_path / "incidents.jsonl"
    count = INCIDENT_BYTES // (len(line) + 20)
    record.write_text("".join(line.replace('"id": ""', f'"id": "{i:016x}"') + "\n" for i in range(count)))
    done = elxpk("report", runs[0], "--incidents", str(record), "-o", "json", env=config)
    assert done["code"] == 0 and done["rss_kib"] <= PEAK_MB * 1024, (done["rss_kib"], done["err"])


def write_distinct_records(run: Path, count: int) -> Path:
    """A run of `count` steps whose every value is its own (no small ints, no repeated float, as many slice
    sets as a run may name) and events at their cap: the most memory its records can take."""
    from elxpk.bounded_read import EVENT_RECORDS
    from elxpk.runs.step_columns import SLICE_SETS

    run.mkdir()
    with open(run / "metrics.jsonl", "w") as out:
        for i in range(count):
            out.write(f'{{"step":{i + 1000},"loss":"0x1.{i:x}p+1","lr":{i}.5,"step_time_s":{i}.25,'
                      f'"examples":[{i * 7919 + 1000},{i * 7919 + 1003}],'
                      f'"slices":[{i % SLICE_SETS + 1000},{i % SLICE_SETS + 9000}],"time":{i}.125}}\n')
    with open(run / "events.jsonl", "w") as out:
        for i in range(EVENT_RECORDS):
            out.write(f'{{"event":"scale_up","time":{i}.5,"step":{i + 1000},"slices":[{i + 1000}],'
                      f'"returning":[{i + 3000}]}}\n')
    return run


def write_lines(path: Path, line: str, count: int) -> Path:
    """`count` copies of `line`, written a block at a time (a file of millions of lines, not a string of it)."""
    block = line * 10_000
    with open(path, "w") as out:
        for _ in range(count // 10_000):
            out.write(block)
        out.write(line * (count % 10_000))
    return path


@pytest.mark.slow
def test_a_run_record_over_its_line_count_is_refused_before_a_line_is_parsed(tmp_path, config):
    """Short lines fit more records in the bytes than report and compare may hold: one past the count cap is
    refused by count, counted while the bytes are checked (within the memory bound: nothing parsed)."""
    from elxpk.bounded_read import EVENT_RECORDS, RUN_RECORDS

    run = write_run(tmp_path / "run", FakeRun(steps=4))
    good = write_run(tmp_path / "good", FakeRun(steps=4))
    line = '{"step":1,"loss":"nan","lr":0,"step_time_s":0,"examples":[0,0],"slices":[],"time":0}\n'
    for name, count in (("metrics.jsonl", RUN_RECORDS), ("events.jsonl", EVENT_RECORDS)):
        saved = (run / name).read_bytes()
        write_lines(run / name, line if name == "metrics.jsonl" else '{"event":"checkpoint_skipped","time":0,"step":1}\n',
                    count + 1)
        assert (run / name).stat().st_size <= RUN_RECORD_BYTES
        for done in (elxpk("report", str(run), "--no-png", env=config), elxpk("compare", str(good), str(run), env=config)):
            refused(done, name)
            assert f"holds more than {count:,} lines" in done["err"], done["err"]
        (run / name).write_bytes(saved)
    maxtext = write_lines(tmp_path / "maxtext.txt", '{"step": 1, "run_name": "r", "learning/loss": 1.0}\n', RUN_RECORDS + 1)
    done = elxpk("report", str(maxtext), "--no-png", env=config)
    refused(done, "maxtext.txt")
    assert f"holds more than {RUN_RECORDS:,} lines" in done["err"], done["err"]


def test_a_stdin_that_never_ends_is_cut_by_the_clock():
    """read_fd against a pipe whose writer stays open, on an injected clock: refused, not waited on."""
    read_end, write_end = os.pipe()
    ticks = iter(range(0, 10_000, 30))
    try:
        os.write(write_end, b"kind: Job\n")
        with pytest.raises(ReadRefused, match="still not at its end after 60 s"):
            read_fd(read_end, limit=MANIFEST_BYTES, timeout_s=60, clock=lambda: float(next(ticks)))
    finally:
        os.close(read_end)
        os.close(write_end)


def test_a_file_growing_past_its_cap_while_read_is_refused(tmp_path):
    path = tmp_path / "grows"
    path.write_bytes(b"x" * 100)
    with pytest.raises(ReadRefused, match="is 100 bytes, over the 10 bytes"):
        read_limited(path, limit=10)
    read_end, write_end = os.pipe()
    os.write(write_end, b"y" * 64)
    os.close(write_end)
    with pytest.raises(ReadRefused, match="over the 10 bytes"):
        read_fd(read_end, limit=10)
    os.close(read_end)


# --- internal errors that were input errors ------------------------------------------------------------------


@pytest.mark.parametrize(("name", "says"), [
    ("kubeconfig_bad_base64.yaml", "Invalid base64"),
    ("kubeconfig_types.yaml", "cluster 'c': its cluster must be a mapping"),
    ("kubeconfig_clusters_scalar.yaml", "clusters must be a list"),
    ("kubeconfig_exec_fails.yaml", "user 'u': exec plugin /bin/false: exited 1"),
    ("latin1.yaml", "not UTF-8"),
    ("binary.bin", "binary"),
    ("deep_nest.yaml", "--kubeconfig"),
    ("scalar.yaml", "not a kubeconfig"),
])
def test_a_malformed_kubeconfig_is_one_line_and_no_stray_log(name, says, config):
    refused(elxpk("workload", "status", "x", "--kubeconfig", str(CORPUS / name), env=config), says)


@pytest.mark.parametrize(("name", "says"), [
    ("binary.bin", "binary"), ("latin1.yaml", "not UTF-8"), ("config_list_value.yaml", "project must be"),
    ("config_unknown_key.yaml", "unknown key"), ("deep_nest.yaml", "over the 64.0 KiB"), ("scalar.yaml", "mapping"),
])
def test_a_bad_elxpk_config_is_one_line(name, says):
    refused(elxpk("workload", "create", *GOOD, "--dry-run", env={"ELXPK_CONFIG": str(CORPUS / name)}), says)


@pytest.mark.parametrize(("name", "says"), [
    ("incident_cause_null.jsonl", "cause is null"), ("incident_cause_int.jsonl", "cause is 3"),
    ("incident_cause_list.jsonl", 'cause is ["infra"]'), ("binary.bin", "binary"),
    ("incident_not_a_record.jsonl", "not a JSON object"), ("dup_keys.yaml", "not JSON"),
])
def test_a_bad_incident_record_is_one_line(tmp_path, name, says, config):
    run = write_run(tmp_path / "run", FakeRun(steps=4))
    refused(elxpk("report", str(run), "--incidents", str(CORPUS / name), env=config), says)
    assert not (run / "report.png").exists()  # refused before the plot is written


def test_duplicate_incident_ids_count_once(tmp_path, config):
    run = write_run(tmp_path / "run", FakeRun(steps=4))
    done = elxpk("report", str(run), "--incidents", str(CORPUS / "incident_dup_ids.jsonl"), "--no-png", "-o", "json",
                 env=config)
    assert done["code"] == 0, done["err"]
    incidents = [e for e in json.loads(done["out"])["incidents"] if e["source"] == "cluster"]
    assert len(incidents) == 1


def test_compare_png_with_another_suffix_is_refused_before_anything_is_printed(tmp_path, config):
    run = write_run(tmp_path / "run", FakeRun(steps=4))
    done = elxpk("compare", str(run), str(run), "--png", str(tmp_path / "x.txt"), env=config)
    refused(done, "--png", "must end in .png")
    assert done["out"] == "" and not (tmp_path / "x.txt").exists()


# --- silently wrong ------------------------------------------------------------------------------------------


def test_elxpk_config_naming_a_missing_file_does_not_fall_back(tmp_path):
    home = tmp_path / "home"
    (home / ".kube").mkdir(parents=True)
    (home / ".kube" / "config").write_text("apiVersion: v1\nclusters: []\n")
    done = elxpk("workload", "status", "x", env={"ELXPK_CONFIG": str(tmp_path / "missing.yaml"), "HOME": str(home)})
    refused(done, "ELXPK_CONFIG", "no such file")


@pytest.mark.parametrize("name", ["ELXPK_PROJECT", "ELXPK_ZONE", "ELXPK_REGION", "ELXPK_CLUSTER", "ELXPK_NAMESPACE",
                                  "ELXPK_CONFIG", "ELXPK_CONTAINER_API_ENDPOINT"])
@pytest.mark.parametrize("value", ["", "  "])
def test_an_elxpk_variable_set_to_nothing_is_refused(name, value, tmp_path, config):
    env = {**config, name: value}
    refused(elxpk("workload", "list", env=env), name, "set but empty")


def test_validate_refuses_duplicate_keys_and_checks_the_items_of_a_list(tmp_path, config):
    refused(elxpk("workload", "validate", str(CORPUS / "dup_keys.yaml"), env=config), "duplicate key 'name'")
    golden = (Path(__file__).parent / "goldens" / "pathways-v5p-8.yaml").read_text()
    for corpus, expected in (("list_kind.yaml", "item 0): metadata.name: Invalid value: 'Bad_Name'"),
                             ("list_no_items.yaml", "items: Required value")):
        alone = elxpk("workload", "validate", str(CORPUS / corpus), env=config)  # no JobSet in it: exit 2
        assert alone["code"] == 2 and "no JobSet (or PathwaysJob) in it" in alone["err"], alone
        with_jobset = tmp_path / corpus
        with_jobset.write_text((CORPUS / corpus).read_text() + "\n---\n" + golden)
        done = elxpk("workload", "validate", str(with_jobset), env=config)
        assert done["code"] == 1 and expected in done["out"], done


@pytest.mark.parametrize("argv", [
    ["compare", "{run}", "{run}", "--png", "{dir}"],
    ["report", "{run}", "--png", "{dir}"],
    ["plan", "--num-slices", "4", "--slice-mtbf", "30d", "--step-time", "1s", "--checkpoint-save", "5s",
     "--restore", "10s", "--plot", "{dir}"],
    ["workload", "create", *GOOD, "--dry-run", "--output-manifest-file", "{dir}"],
])
def test_no_writer_puts_a_file_beside_a_directory_it_was_given(argv, tmp_path, config):
    run = write_run(tmp_path / "run", FakeRun(steps=4))
    target = tmp_path / "out"
    target.mkdir()
    before = sorted(p.name for p in tmp_path.iterdir())
    done = elxpk(*[a.format(run=run, dir=target) for a in argv], env=config)
    refused(done, "is a directory")
    assert sorted(p.name for p in tmp_path.iterdir()) == before and list(target.iterdir()) == []


@pytest.mark.parametrize(("out_flag", "in_flag"), [
    ("--output-manifest-file", "--env-file"), ("--output-manifest-file", "--kubeconfig"),
    ("--output-manifest-file", "ELXPK_CONFIG"),
])
def test_an_output_that_is_also_an_input_is_refused_and_the_input_kept(out_flag, in_flag, tmp_path, config):
    shared = tmp_path / "shared.yaml"
    shared.write_text("A=1\n" if in_flag == "--env-file" else "")
    env = {"ELXPK_CONFIG": str(shared)} if in_flag == "ELXPK_CONFIG" else config
    given = [] if in_flag == "ELXPK_CONFIG" else [in_flag, str(shared)]
    done = elxpk("workload", "create", *GOOD, *given, "--dry-run", out_flag, str(tmp_path / "." / "shared.yaml"),
                 env=env)
    refused(done, out_flag, f"is also {in_flag}")
    assert shared.read_text() == ("A=1\n" if in_flag == "--env-file" else "")


def test_plot_and_png_that_are_inputs_are_refused(tmp_path, config):
    metrics = tmp_path / "metrics.png"  # a MaxText metrics_file may have any name
    metrics.write_text((CORPUS / "maxtext_like.jsonl").read_text())
    refused(elxpk("report", str(metrics), "--png", str(metrics), env=config), "is also RUN_DIR")
    other = tmp_path / "other.jsonl"
    other.write_text(metrics.read_text())
    refused(elxpk("compare", str(metrics), str(other), "--png", str(metrics), env=config), "is also RUN_A")


def test_the_rows_of_checkpoint_inspect_report_and_job_inspect_refuse_as_the_user_runs_them(tmp_path, config):
    """Their flags are rows (elxpk/checkpoints/flags.py, elxpk/runs/flags.py, verb_flags.JOB_INSPECT): a bound
    and an output naming an input, each one line, exit 2, the input kept."""
    refused(elxpk("checkpoint", "inspect", str(tmp_path), "--checkpoint-period", "0", env=config),
            "--checkpoint-period 0: must be at least 1")
    shared = tmp_path / "shared.txt"
    shared.write_text("kept\n")
    refused(elxpk("job", "inspect", "run-1", "--kubeconfig", str(shared), "--out", str(shared), env=config),
            "--out", "is also --kubeconfig")
    refused(elxpk("report", str(tmp_path), "--incidents", str(shared), "--png", str(shared), env=config),
            "--png", "is also --incidents")
    assert shared.read_text() == "kept\n"


def test_plan_job_mtbf_is_bounded_like_slice_mtbf_and_never_prints_a_negative_saving(config):
    base = ["plan", "--num-slices", "32", "--slice-mtbf", "30d", "--step-time", "2.5s", "--checkpoint-save", "20s",
            "--restore", "90s"]
    refused(elxpk(*base, "--job-mtbf", "1ms", env=config), "--job-mtbf 1ms")
    done = elxpk(*base, "--job-mtbf", "2h", env=config)
    assert done["code"] == 0 and "more saves/day" in done["out"] and "-" not in done["out"].split(
        "live-replica saves:")[1].split("\n")[0].split("):")[1].split("saves/day")[0]


# --- empty values on every verb --------------------------------------------------------------------------------


def _commands_and_options() -> list[tuple[list[str], str]]:
    """(command path, option) for every option taking a value, of every command."""
    import typer.main

    from elxpk.cli.commands import COMMANDS, build_app

    found = []
    for command in COMMANDS:
        root = typer.main.get_command(build_app(list(command.path)))
        node = root
        for part in command.path:
            node = node.commands[part]  # type: ignore[attr-defined]
        for param in node.params:
            if param.param_type_name == "option" and not getattr(param, "is_flag", False) and param.name != "help":
                found.append((list(command.path), max(param.opts, key=len)))
    return found


def test_an_empty_value_is_refused_on_every_option_of_every_command(capsys):
    from elxpk.cli.main import main

    pairs = _commands_and_options()
    assert len(pairs) > 100
    for path, option in pairs:
        for value in ("", "   "):
            code = main([*path, option, value])
            err = capsys.readouterr().err
            assert code == 2 and f"error: {option} {value!r}: empty" in err, (path, option, err)
