"""The flags of `checkpoint inspect`, `compare`, `report` and `job inspect` are rows (elxpk/checkpoints/flags.py,
elxpk/runs/flags.py, elxpk/cluster/verbs/verb_flags.py JOB_INSPECT): --help says each row's help, bounds and default;
each bound refuses a value beyond it in one line naming the flag (exit 2, nothing written); and the rows'
`path` is what the raw checks (elxpk/cli/arg_checks.py) compare, so an output naming an input is refused."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from elxpk.checkpoints.flags import INSPECT
from elxpk.cluster.verbs.verb_flags import JOB_INSPECT
from elxpk.flag_rows import INPUT, OUTPUT, path_flags
from elxpk.runs.flags import COMPARE, REPORT
from tests.launcher.test_flag_table import _help
from tests.support.run_writer import FakeRun, write_run

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = [(("checkpoint", "inspect"), INSPECT), (("compare",), COMPARE), (("report",), REPORT),
            (("job", "inspect"), JOB_INSPECT)]


@pytest.mark.parametrize(("path", "rows"), COMMANDS, ids=lambda v: " ".join(v) if isinstance(v[0], str) else "")
def test_help_says_each_rows_spelling_help_bounds_and_default(path, rows, capsys):
    text = _help(capsys, *path)
    flat = " ".join(text.split())
    for row in rows:
        assert re.search(rf"(^|\s|,){re.escape(row.flag)}\s", text), row.flag
        if row.short:
            assert f"{row.short}, {row.flag}" in text, row.short
        assert " ".join(row.full_help(path[-1]).split()) in flat, row.name


# Every bound of these rows: the value just beyond it, refused in one line naming the flag.
BEYOND = [(("checkpoint", "inspect", "{dir}"), "--checkpoint-period", "0"),
          (("checkpoint", "inspect", "{dir}"), "--checkpoint-period", "two"),
          (("compare", "{run}", "{run}"), "--rtol", "-1e-9"),
          (("compare", "{run}", "{run}"), "--rtol", "inf")]


@pytest.mark.parametrize(("argv", "flag", "value"), BEYOND)
def test_each_bound_refuses_beyond_it_in_one_line_naming_the_flag(argv, flag, value, cli, tmp_path):
    run = write_run(tmp_path / "run", FakeRun(steps=4))
    before = sorted(tmp_path.rglob("*"))
    done = cli(*[a.format(dir=tmp_path / "run", run=run) for a in argv], flag, value)
    assert done.code == 2 and len(done.error_lines) == 1, done.err
    assert done.error_lines[0].startswith(f"error: {flag} "), done.err
    assert sorted(tmp_path.rglob("*")) == before


def test_the_bounds_themselves_are_taken(cli, tmp_path):
    """--rtol 0 compares a run with itself (exit 0); --checkpoint-period 1 gets past the flag checks, so what is
    refused next is the DIR that holds no checkpoint."""
    run = write_run(tmp_path / "run", FakeRun(steps=4))
    assert cli("compare", str(run), str(run), "--rtol", "0").code == 0
    done = cli("checkpoint", "inspect", str(tmp_path / "run"), "--checkpoint-period", "1")
    assert done.code == 2 and done.error_lines[0].startswith("error: DIR "), done.err


def test_the_rows_say_which_flags_name_a_file():
    assert path_flags(REPORT) == {"--png": OUTPUT, "--incidents": INPUT}
    assert path_flags(COMPARE) == {"--png": OUTPUT}
    assert path_flags(JOB_INSPECT) == {"--out": OUTPUT}


@pytest.mark.parametrize("argv", [
    ("report", "{run}", "--incidents", "{shared}", "--png", "{shared}"),
    ("compare", "{run}", "{shared}", "--png", "{shared}"),
    ("job", "inspect", "run-1", "--kubeconfig", "{shared}", "--out", "{shared}"),
])
def test_an_output_row_naming_an_input_is_refused_and_the_input_kept(argv, cli, tmp_path):
    shared = tmp_path / "shared.png"
    shared.write_text("kept\n")
    done = cli(*[a.format(run=tmp_path / "run", shared=shared) for a in argv])
    assert done.code == 2 and "is also" in done.err and "which this command reads" in done.err, done.err
    assert shared.read_text() == "kept\n"


def test_no_inline_option_is_left_outside_the_tables():
    """Every flag of a command is a row; only --version and the generic builders of options.py are not."""
    found = []
    for source in sorted((ROOT / "elxpk" / "cli").rglob("*.py")):
        if source.name == "options.py":
            continue
        for number, line in enumerate(source.read_text(encoding="utf-8").splitlines(), 1):
            if "typer.Option(" in line:
                found.append(f"{source.relative_to(ROOT)}:{number}")
    assert len(found) == 1 and found[0].startswith("elxpk/cli/commands.py:"), found
    assert "--version" in (ROOT / found[0].split(":")[0]).read_text(encoding="utf-8")
