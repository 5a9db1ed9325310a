"""The CLI's shell: the command table, one top-level handler, standard streams, the output file, the help
layout and the cluster flags every verb shares (issues #9 and #14). The real entry point throughout;
subprocesses where the process's own descriptors matter."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml

from elxpk.cli import commands
from elxpk.cli.main import run_guarded
from elxpk_contract.settings import LAUNCHER_FLAG, exposed, flag_name

ELXPK = Path(sys.executable).parent / "elxpk"
GOOD = ["--workload", "run-1", "--tpu-type", "v5p-8", "--command", "python3 train.py"]
CLUSTER_FLAGS = ["--project", "--zone", "--region", "--cluster", "--kubeconfig", "--context", "--namespace"]
WORKLOAD_VERBS = ["create", "create-pathways", "status", "list", "delete", "logs", "wait", "kill-slice",
                  "events"]


@pytest.fixture(autouse=True)
def no_cluster_defaults(monkeypatch, tmp_path):
    """No ELXPK_* cluster variables or config file from the machine running the tests."""
    for name in ("ELXPK_NAMESPACE", "ELXPK_PROJECT", "ELXPK_ZONE", "ELXPK_REGION", "ELXPK_CLUSTER", "ELXPK_DEBUG"):
        monkeypatch.delenv(name, raising=False)
    config = tmp_path.parent / f"{tmp_path.name}-empty-config.yaml"  # beside tmp_path: tests list tmp_path
    config.write_text("")
    monkeypatch.setenv("ELXPK_CONFIG", str(config))


def run(*argv: str, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=None, shell_redirect: str = ""):
    """The console script in its own process; `shell_redirect` (e.g. '>/dev/full') goes through bash."""
    if shell_redirect:
        line = " ".join(["exec", _quote(str(ELXPK)), *map(_quote, argv), shell_redirect])
        return subprocess.run(["bash", "-c", line], capture_output=True, text=True, timeout=120, env=env)
    return subprocess.run([str(ELXPK), *argv], stdout=stdout, stderr=stderr, text=True, timeout=120, env=env)


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


# --- the command table ------------------------------------------------------------------------------------------


def test_every_table_entry_resolves_to_a_function():
    for command in commands.COMMANDS:
        function = commands._function(command)
        assert command.optional or callable(function), command


def test_top_level_and_workload_help_list_the_table(cli):
    top = cli("--help")
    assert top.code == 0
    words = list(dict.fromkeys(c.path[0] for c in commands.COMMANDS))
    listed = [m.group(1) for m in re.finditer(r"^  ([a-z][a-z-]*)  ", top.out.split("Commands:")[1], re.M)]
    assert listed == words  # in the table's order
    group = cli("workload", "--help")
    listed = [m.group(1) for m in re.finditer(r"^  ([a-z][a-z-]*)  ", group.out.split("Commands:")[1], re.M)]
    assert [verb for verb in listed if verb != "validate"] == WORKLOAD_VERBS


def test_a_named_command_builds_only_itself():
    (create,) = commands.wanted(["workload", "create", "--dry-run"])
    assert create.path == ("workload", "create")
    assert commands.wanted(["workload"]) == commands.COMMANDS
    assert commands.wanted(["workload", "crate"]) == commands.COMMANDS


def test_a_typo_is_a_usage_error(cli):
    result = cli("workload", "crate")
    assert result.code == 2 and "No such command" in result.err


def test_version(cli):
    from elxpk import __version__

    result = cli("--version")
    assert (result.code, result.out) == (0, f"elxpk {__version__}\n")


# --- one top-level handler ----------------------------------------------------------------------------------------


def _boom() -> None:
    raise LookupError("the table had no row\nsecond line")


def test_an_unexpected_error_is_one_line_and_exit_1(capsys):
    assert run_guarded(_boom) == 1
    err = capsys.readouterr().err
    assert err == ("error: internal error: LookupError: the table had no row "
                   "(set ELXPK_DEBUG=1 for the traceback)\n")


def test_elxpk_debug_shows_the_traceback(capsys, monkeypatch):
    monkeypatch.setenv("ELXPK_DEBUG", "1")
    assert run_guarded(_boom) == 1
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "in _boom" in err
    assert err.splitlines()[-1].startswith("error: internal error: LookupError")


def test_a_typer_exit_code_from_a_command_is_kept(capsys):
    import typer

    def leave() -> None:
        raise typer.Exit(3)

    assert run_guarded(leave) == 3


# --- standard streams ---------------------------------------------------------------------------------------------


FULL_STDOUT = ("error: cannot write to stdout: no space left on device (ENOSPC); free space or raise the quota there, "
               "then run again\n")


@pytest.mark.parametrize("argv", [
    ("workload", "create", *GOOD, "--dry-run"), ("--version",), ("local", "run", "--help"),
    ("plan", "--slice-mtbf", "30d", "--num-slices", "4", "--step-time", "1s", "--checkpoint-save", "10s",
     "--restore", "60s"),
    ("plan", "--slice-mtbf", "30d", "--num-slices", "4", "--step-time", "1s", "--checkpoint-save", "10s",
     "--restore", "60s", "-o", "json"),
])
def test_a_full_stdout_is_one_clear_line_and_exit_74(argv):
    """Exit 74, as any write that ran out of space; before the fifth pass, every verb printing through click
    (all but create) exited 0 with its output lost, since click's probe of the stream swallowed the failure."""
    done = run(*argv, shell_redirect=">/dev/full")
    assert done.returncode == 74 and done.stderr == FULL_STDOUT, (done.returncode, done.stderr)


def test_a_closed_stdout_is_one_clear_line_and_exit_1():
    done = run("workload", "create", *GOOD, "--dry-run", shell_redirect=">&-")
    assert done.returncode == 1
    assert done.stderr.startswith("error: cannot write to stdout: it is closed")
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("argv", [("workload", "create", *GOOD, "--dry-run"), ("--help",)])
def test_a_reader_that_stops_reading_ends_it_quietly(argv):
    """#43: `status | head`, the README's `until ... | grep -q`: the pipe closes before the output is out. As
    other CLIs, no word on stderr, and 141 (128 + SIGPIPE); before, `error: cannot write to stdout`, exit 1."""
    done = run(*argv, shell_redirect="| true; exit ${PIPESTATUS[0]}")
    assert (done.returncode, done.stderr) == (141, ""), (done.returncode, done.stderr)


def test_piped_tables_end_each_line_at_its_last_character():
    """#43: Rich pads a table's lines to its width; in a pipe those spaces are bytes every reader sees."""
    done = run("plan", "--slice-mtbf", "30d", "--num-slices", "4", "--step-time", "1s", "--checkpoint-save", "10s",
               "--restore", "60s")
    assert done.returncode == 0 and "Recommended checkpoint_period" in done.stdout, done.stderr
    assert [line for line in done.stdout.splitlines() if line.endswith(" ")] == []


def test_a_closed_stderr_is_reported_on_stdout():
    done = run("workload", "create", *GOOD, "--dry-run", shell_redirect="2>&-")
    assert done.returncode == 1
    assert done.stdout.startswith("error: cannot write to stderr: it is closed")


def test_a_full_stderr_is_reported_on_stdout():
    # --max-slice-restarts without --elastic-slices prints a warning on stderr, which cannot take it.
    done = run("workload", "create", *GOOD, "--max-slice-restarts", "3", "--dry-run", shell_redirect="2>/dev/full")
    assert done.returncode == 74
    assert done.stdout == FULL_STDOUT.replace("stdout", "stderr")


# --- the output file ----------------------------------------------------------------------------------------------


def test_output_file_through_a_symlink_replaces_the_target_and_keeps_the_link(cli, tmp_path):
    target = tmp_path / "real.yaml"
    target.write_text("old\n", encoding="utf-8")
    link = tmp_path / "link.yaml"
    link.symlink_to(target)
    result = cli("workload", "create", *GOOD, "--dry-run", "--output-manifest-file", str(link))
    assert result.code == 0, result.err
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text(encoding="utf-8") == result.out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.yaml", "real.yaml"]


def test_output_file_that_is_a_fifo_is_written_through(cli, tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received: list[str] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_text(encoding="utf-8")), daemon=True)
    reader.start()
    result = cli("workload", "create", *GOOD, "--dry-run", "--output-manifest-file", str(fifo))
    reader.join(timeout=60)
    assert result.code == 0, result.err
    assert received == [result.out]
    assert fifo.is_fifo()


# --- cluster selection: declared once, resolved once -------------------------------------------------------------


def test_elxpk_namespace_applies_to_create(cli, monkeypatch):
    monkeypatch.setenv("ELXPK_NAMESPACE", "team-a")
    rendered = yaml.safe_load(cli("workload", "create", *GOOD, "--dry-run").out)
    assert rendered["metadata"]["namespace"] == "team-a"
    flag = yaml.safe_load(cli("workload", "create", *GOOD, "--dry-run", "-n", "team-b").out)
    assert flag["metadata"]["namespace"] == "team-b"


def test_the_config_file_namespace_applies_to_create(cli, monkeypatch, tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text("namespace: from-file\n", encoding="utf-8")
    monkeypatch.setenv("ELXPK_CONFIG", str(config))
    rendered = yaml.safe_load(cli("workload", "create", *GOOD, "--dry-run").out)
    assert rendered["metadata"]["namespace"] == "from-file"


def test_a_bad_namespace_from_the_environment_is_refused(cli, monkeypatch):
    monkeypatch.setenv("ELXPK_NAMESPACE", "Team_A")
    result = cli("workload", "create", *GOOD, "--dry-run")
    assert result.code == 2 and result.error_lines[0].startswith("error: --namespace 'Team_A'")


def test_submit_without_a_cluster_reports_it_with_the_flag_problems(cli, monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    result = cli("workload", "create", *GOOD, "--num-slices", "0")
    assert result.code == 2
    assert [line.split()[1] for line in result.error_lines] == ["--num-slices", "KUBECONFIG"]
    monkeypatch.delenv("KUBECONFIG")
    result = cli("workload", "create", *GOOD, "--num-slices", "0")
    assert [line.split()[1] for line in result.error_lines] == ["--num-slices", "no"]


# --- help layout --------------------------------------------------------------------------------------------------


def _sections(text: str) -> dict[str, str]:
    sections, title = {}, None
    for line in text.splitlines():
        if line and not line.startswith(" ") and line.endswith(":"):
            title = line[:-1]
            sections[title] = ""
        elif title:
            sections[title] += line + "\n"
    return sections


@pytest.mark.parametrize("verb", WORKLOAD_VERBS)
def test_every_verb_has_every_cluster_flag_in_the_cluster_panel(cli, verb):
    result = cli("workload", verb, "--help")
    assert result.code == 0
    panel = _sections(result.out)["Cluster selection"]
    for flag in CLUSTER_FLAGS:
        assert re.search(rf"(^|\s){flag}\b", panel), (verb, flag)
        assert sum(text.count(f"{flag} ") for text in _sections(result.out).values()) == 1, (verb, flag)
    assert "{" not in result.out.splitlines()[0]  # the usage line names arguments, e.g. NAME


def test_create_help_at_80_columns_keeps_every_flag_name_whole(cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    result = cli("workload", "create", "--help")
    assert result.code == 0
    assert "…" not in result.out
    assert max(len(line) for line in result.out.splitlines()) <= 80
    names = set(re.findall(r"--[a-z][a-z0-9-]*[a-z0-9]", result.out))
    for flag in ("--termination-grace-period-seconds", "--custom-pathways-proxy-server-args",
                 "--ttl-seconds-after-finished", "--output-manifest-file", *CLUSTER_FLAGS):
        assert flag in names, flag


def test_trainer_setting_flags_come_from_the_contract(cli):
    result = cli("workload", "create", "--help")
    panel = _sections(result.out)["Trainer settings (env ELXPK_* on the training container)"]
    flags = set(re.findall(r"^  (--[a-z-]+)", panel, re.M))
    assert {flag_name(f.name) for f in exposed(LAUNCHER_FLAG)} <= flags
    for f in exposed(LAUNCHER_FLAG):
        assert f"trainer default {'none' if f.default is None else f.default}" in " ".join(panel.split())


# --- output formats: one check per kind --------------------------------------------------------------------------


@pytest.mark.parametrize(("argv", "words"), [
    (["workload", "create", *GOOD, "--dry-run", "-o", "table"], "yaml or json"),
    (["workload", "status", "run-1", "-o", "text", "--kubeconfig", "/nonexistent"], "table, json or yaml"),
    (["workload", "list", "-o", "csv", "--kubeconfig", "/nonexistent"], "table, json or yaml"),
    (["report", ".", "-o", "table"], "text or json"),
    (["compare", ".", ".", "-o", "yaml"], "text or json"),
    (["plan", "--slice-mtbf", "3d", "--step-time", "2s", "-o", "text"], "table or json"),
])
def test_output_is_checked_before_anything_else(cli, argv, words):
    result = cli(*argv)
    assert result.code == 2
    assert f"error: -o/--output {argv[argv.index('-o') + 1]!r}: use {words}" in result.error_lines


def test_headless_with_xpk_ignored_flags_is_a_warning_not_a_refusal(cli):
    result = cli("workload", "create", "--workload", "w", "--tpu-type", "v5p-8", "--headless",
                 "--docker-image", "gcr.io/p/i:1", "--dry-run")
    assert result.code == 0
    assert result.err.startswith("warning: --docker-image: ignored, a --headless workload has no user container")
