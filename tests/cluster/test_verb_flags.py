"""The follow-up verbs' flags as rows (elxpk/cluster/verbs/verb_flags.py): every verb's refusals are one line naming
the flag, exit 2, every problem at once and nothing sent to the (fake) API server; --help keeps every
spelling; kill-slice --slice reads any text without a traceback; one real `elxpk` process as a canary."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elxpk.cli import workload_wait
from elxpk.cluster.verbs import verb_flags
from elxpk.errors import UsageError
from tests.cluster.conftest import run_cli

_DURATION_FIX = "give a duration such as 90s, 2h or 30d"


def _lines_match(err: str, lines: list[str]) -> bool:
    """`err` is `lines`, each as "error: LINE"; a `…` in a line stands for any text (where the units' own
    message may repeat the value or not)."""
    patterns = [re.compile("error: " + ".*".join(map(re.escape, line.split("…")))) for line in lines]
    found = err.splitlines()
    return len(found) == len(patterns) and all(p.fullmatch(f) for p, f in zip(patterns, found, strict=True))

# (argv without the cluster flags, the exact error lines): one refusal per rule and per row check of each verb.
REFUSALS = [
    (["workload", "status", "w", "--stuck-after", "bogus"],
     [f"--stuck-after 'bogus': …not a number with a unit; {_DURATION_FIX}"]),
    (["workload", "status", "w", "--chip-hour-price", "-1"],
     ["--chip-hour-price -1: must be 0 or more (dollars per chip-hour, e.g. 4.2)"]),
    (["workload", "status", "w", "-o", "yaml", "--watch"],
     ["-o yaml --watch: a stream of changes is -o json (one object a line) or the table view"]),
    (["workload", "status", "w", "--why", "-w"],
     ["--why --watch: the live view shows the why line already; drop --why, or run `status --why` once"]),
    (["workload", "status", "w", "-o", "xml"], ["-o/--output 'xml': use table, json or yaml"]),
    (["workload", "list", "--status", "Sleeping"],
     ["--status Sleeping: use one of Queued, Admitted, Running, Degraded, Restarting, Succeeded, Failed"]),
    (["workload", "list", "--filter", "(", "--regex"],
     ["--filter '(': not a valid regular expression (missing ), unterminated subpattern at position 0)"]),
    (["job", "list", "-o", "xml"], ["-o/--output 'xml': use table, json or yaml"]),
    (["workload", "delete"], ["give a workload NAME or --all (not both)"]),
    (["job", "cancel", "w", "--all"], ["give a workload NAME or --all (not both)"]),
    (["workload", "logs", "w", "--slice", "-1"], ["--slice -1: must be 0 or more (a slice index: 0, 1, ...)"]),
    (["workload", "logs", "w", "--vm", "x"],
     ["--vm 'x': not a whole number; give a whole number, 0 or more (a VM index within the slice: 0, 1, ...)"]),
    (["job", "logs", "w", "--tail", "-3"], ["--tail -3: must be 0 or more (a count of lines)"]),
    (["workload", "logs", "w", "--previous", "-f"],
     ["--previous and --follow: a terminated container's log does not grow; give one of them"]),
    (["workload", "logs", "w", "--head", "--slice", "0"],
     ["--head and --slice/--vm select different pods: give one of them"]),
    (["workload", "wait", "w", "--for", "ever"], ["--for 'ever': use one of completed, running"]),
    (["workload", "wait", "w", "--poll", "0s"], ["--poll '0s': must be more than 0s"]),
    (["workload", "wait", "w", "--timeout", "1x"],
     [f"--timeout '1x': …unknown duration unit 'x' (use ms, s, m, h, d or w); {_DURATION_FIX}"]),
    (["workload", "kill-slice", "w"], ["--slice: required; give a slice index (0, 1, ...) or random"]),
    (["workload", "kill-slice", "w", "--slice", "1.5"],
     ["--slice '1.5': not a whole number; give a whole number, 0 or more (a slice index, or random)"]),
    (["workload", "kill-slice", "w", "--slice", "0", "--vm", "0", "--repeat", "2"],
     ["--vm: only with --mode delete, one round and a given --slice K; drop --vm to take the whole slice down"]),
    (["workload", "kill-slice", "w", "--slice", "0", "--exit-code", "200"],
     ["--exit-code 200: must be from 129 to 159 (128 + a signal; a container can only be made to die of a "
      "signal from outside)"]),
    (["workload", "kill-slice", "w", "--slice", "0", "--timeout", "0s", "--poll", "0m"],
     ["--timeout '0s': must be more than 0s", "--poll '0m': must be more than 0s"]),
    (["workload", "events", "w", "--notify", "http://127.0.0.1:9/x"],
     ["--notify: needs --watch (notifications are sent while following)"]),
]


@pytest.mark.parametrize(("argv", "lines"), REFUSALS, ids=[" ".join(a[1:3] + a[3:5]) for a, _ in REFUSALS])
def test_each_refusal_is_one_line_naming_the_flag_and_nothing_is_sent(capsys, fake, k, argv, lines):
    before = len(fake.calls)
    code, out, err = run_cli(capsys, *argv, *k)
    assert (code, out) == (2, "")
    assert _lines_match(err, lines), err
    assert len(fake.calls) == before


def test_every_problem_of_a_command_line_at_once(capsys, fake, k):
    code, _, err = run_cli(capsys, "workload", "kill-slice", "w", "--slice", "x", "--mode", "drain", "--repeat",
                           "0", "--every", "soon", "--poll", "0s", "--vm", "-2", *k)
    assert code == 2
    flags = [line.split()[1] for line in err.splitlines()]
    assert sorted(flags) == sorted(["--vm", "--mode", "--repeat", "--every", "--poll", "--slice"])
    assert len(fake.calls) == 0


# The spellings each verb had before its flags became rows (workload_ops' inline options): kept, with shorts.
SPELLINGS = {
    "status": {"--why", "--stuck-after", "-w", "--watch", "--chip-hour-price", "-o", "--output"},
    "list": {"--filter", "--regex", "--status", "-o", "--output"},
    "delete": {"--all", "-y", "--yes"},
    "logs": {"--head", "--slice", "--vm", "-c", "--container", "-f", "--follow", "--tail", "-p", "--previous"},
    "wait": {"--for", "--timeout", "--poll", "-o", "--output"},
    "kill-slice": {"--slice", "--vm", "--mode", "--exit-code", "--repeat", "--every", "--seed", "-y", "--yes",
                   "--watch", "--timeout", "--poll"},
    "events": {"-w", "--watch", "--record", "-o", "--output", "--notify"},
}


@pytest.mark.parametrize("verb", sorted(SPELLINGS))
def test_help_keeps_every_spelling_and_default(capsys, verb):
    code, out, _ = run_cli(capsys, "workload", verb, "--help")
    assert code == 0
    words = set(out.replace(",", " ").split())
    out = " ".join(out.split())  # the help is folded at 80 columns
    assert SPELLINGS[verb] <= words
    rows = {"status": verb_flags.STATUS, "list": verb_flags.LIST, "delete": verb_flags.DELETE,
            "logs": verb_flags.LOGS, "wait": verb_flags.WAIT, "kill-slice": verb_flags.KILL_SLICE,
            "events": verb_flags.EVENTS}[verb]
    for row in rows:
        assert row.help in out
        if row.shown_default:
            assert f"Default: {row.shown_default}." in out


def test_durations_are_read_by_the_rows_in_seconds():
    values = verb_flags.read(verb_flags.KillSliceFlags, verb_flags.KILL_SLICE,
                             {"slice": "random", "every": "1h", "poll": "500ms"})
    assert (values.every, values.poll, values.timeout) == (3600.0, 0.5, 1800.0)
    assert verb_flags.read(verb_flags.WaitFlags, workload_wait.ROWS, {}).timeout is None  # no limit


@settings(deadline=None)  # a shared machine's load is no failure
@given(st.text(max_size=12))
def test_kill_slice_index_reads_any_text(text):
    try:
        index = verb_flags.kill_slice_index(text)
    except UsageError as exc:
        assert len(exc.messages) == 1 and exc.messages[0].startswith("--slice ")
        return
    assert index is None if text == "random" else (isinstance(index, int) and index >= 0)


def test_a_real_elxpk_process_refuses_a_bad_duration(tmp_path):
    exe = shutil.which("elxpk", path=str(Path(sys.executable).parent))
    assert exe is not None
    done = subprocess.run([exe, "workload", "status", "w", "--since", "bogus", "--stuck-after", "bogus",
                           "--kubeconfig", str(tmp_path / "none.yaml")], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    done = subprocess.run([exe, "workload", "status", "w", "--stuck-after", "bogus", "--kubeconfig",
                           str(tmp_path / "none.yaml")], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert (done.returncode, done.stdout) == (2, "")
    assert _lines_match(done.stderr, [f"--stuck-after 'bogus': …not a number with a unit; {_DURATION_FIX}"])


def test_job_submit_await_job_completion_waits_as_workload_wait(capsys, fake, k):
    """gcluster's --await-job-completion runs the wait verb itself (its flags as rows): past --timeout, 124."""
    code, out, err = run_cli(capsys, "job", "submit", "-n", "await-1", "--compute-type", "v5p-8", "-i", "python:3.10",
                             "-e", "true", "--await-job-completion", "--timeout", "1s", *k)
    assert code == 124, err
    assert "jobset/await-1 created" in out


def test_the_verbs_flag_tables_are_generated(update_goldens):
    from tests.support.generated_docs import check_generated

    page = check_generated(Path(__file__).resolve().parents[2] / "docs" / "cluster.md", verb_flags.embed,
                           verb_flags.BEGIN, verb_flags.END, update=update_goldens, what="the verbs' flag tables")
    assert all(f"| `{row.flag}" in page for _, rows in verb_flags.DOCS for row in rows)
