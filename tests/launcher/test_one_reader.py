"""One reader for every flag row (issue 30): a bad number, duration or size gets the same line in
`workload create`, `workload validate`, `plan` and `local run`, the one its row's `Flag.read` writes;
the rows' exclusive bounds and file paths reach --help, the docs table and the raw checks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elxpk.create import flags as create_flags
from elxpk.flag_rows import DURATION, FLOAT, INPUT, INT, OUTPUT, SIZE, Flag, docs_table, path_flags, read_all
from elxpk.local import flags as local_flags
from elxpk.output_formats import OUTPUT_FORMATS, OUTPUT_ROWS
from elxpk.plan import flags as plan_flags

ELXPK = Path(sys.executable).parent / "elxpk"
_READ = (INT, FLOAT, DURATION, SIZE)
# The other flags each command needs to get as far as reading its values (none of them a row tested here).
_CREATE = ["workload", "create", "--workload", "run-1", "--tpu-type", "v5p-8", "--command", "true", "--dry-run"]
_PLAN_NEEDS = {"--num-slices": "4", "--slice-mtbf": "30d", "--step-time": "1s", "--checkpoint-save-time": "5s",
               "--restore": "10s"}
# Spellings no row of any kind reads: letters, `_` groups, other scripts' digits, fractions (no ASCII digit,
# no sign, no space: so the raw checks before the reader have nothing to say).
_BAD = st.one_of(st.sampled_from(["abc", "nan", "inf", "soon", "1_0", "١٢", "٣s", "½"]),
                 st.text(alphabet="abcsxyz_½١٢٣", min_size=1, max_size=6))


def _rows(table: tuple[Flag, ...], command: str | None = None) -> list[Flag]:
    return [f for f in table if f.kind in _READ and not f.dialect and (command is None or command in f.commands)]


CASES = ([("create", f) for f in _rows(create_flags.FLAGS, "create")]
         + [("validate", f) for f in _rows(create_flags.FLAGS, "validate")]
         + [("plan", f) for f in _rows(plan_flags.FLAGS)] + [("local", f) for f in _rows(local_flags.FLAGS)])


def _argv(command: str, row: Flag, raw: str, tmp_path: Path) -> list[str]:
    if command == "create":
        return [*_CREATE, row.flag, raw]
    if command == "validate":
        return ["workload", "validate", str(tmp_path / "none.yaml"), row.flag, raw]
    if command == "plan":
        return ["plan", *[x for k, v in _PLAN_NEEDS.items() if k != row.flag for x in (k, v)], row.flag, raw]
    return ["local", "run", "--run-dir", str(tmp_path / "run"), row.flag, raw]


def _shape(row: Flag, raw: str) -> str:
    """What every refusal of a bad spelling starts with, by the row's kind."""
    what = {INT: "not a whole number; give a whole number", FLOAT: "not a finite number; give a finite number"}
    return f"{row.flag} {raw!r}: " + what.get(row.kind, "")


def test_every_command_has_rows_for_the_reader():
    assert {c for c, _ in CASES} == {"create", "validate", "plan", "local"}


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=st.sampled_from(CASES), raw=_BAD)
def test_a_bad_spelling_gets_its_rows_line_in_every_command(cli, tmp_path, case, raw):
    command, row = case
    expected = row.read(raw)[1]
    assert expected is not None and expected.startswith(_shape(row, raw))
    done = cli(*_argv(command, row, raw, tmp_path))
    assert done.code == 2, done.err
    assert f"error: {expected}" in done.error_lines, (command, done.err)
    assert not (tmp_path / "run").exists()  # local run refused before it made its run directory


@pytest.mark.parametrize("raw", ["abc", "1_0", "١٢"])
def test_the_same_quantity_reads_alike_in_create_and_plan(raw):
    # --step-time is a row of both tables: the same mistake, the same line.
    create = create_flags.BY_NAME["step_time"].read(raw)[1]
    plan = plan_flags.BY_NAME["step_time"].read(raw)[1]
    assert create == plan and create is not None and create.startswith(f"--step-time {raw!r}: ")


def test_a_positive_duration_says_so_in_help_docs_and_refusal(cli):
    row = create_flags.BY_NAME["step_time"]
    assert row.above == 0 and "More than 0s." in row.full_help()
    assert "| `--step-time` | none | > 0s |" in docs_table(create_flags.FLAGS)
    assert row.read("0s") == (None, "--step-time '0s': must be more than 0s")
    assert row.read("0.5s") == (0.5, None)
    values, problems = read_all((row,), {"step_time": "-1s"})
    assert values == {"step_time": None} and problems == [
        "--step-time '-1s': not a number with a unit; give a duration such as 90s, 2h or 30d"]
    done = cli(*_CREATE, "--step-time", "0s")
    assert done.code == 2 and done.error_lines == ["error: --step-time '0s': must be more than 0s"]


def test_rows_say_which_files_are_read_and_written():
    assert path_flags(create_flags.FLAGS) == {"--env-file": INPUT, "--from-run": INPUT,
                                              "--output-manifest-file": OUTPUT, "--dry-run-out": OUTPUT}
    assert path_flags(plan_flags.FLAGS) == {"--from-run": INPUT, "--plot": OUTPUT}


@pytest.mark.parametrize("argv", [
    ["workload", "create", "--workload", "run-1", "--tpu-type", "v5p-8", "--command", "true",
     "--env-file", "{f}", "--dry-run-out", "{f}"],
    ["workload", "create", "--workload", "run-1", "--tpu-type", "v5p-8", "--command", "true",
     "--from-run", "{f}", "--dry-run", "--output-manifest-file", "{f}"],
    ["plan", "--from-run", "{f}", "--plot", "{f}"],
])
def test_an_output_row_naming_an_input_row_is_refused(cli, tmp_path, argv):
    shared = tmp_path / "shared"
    shared.write_text("A=1\n")
    done = cli(*[a.format(f=shared) for a in argv])
    assert done.code == 2 and any("which this command reads" in line for line in done.error_lines), done.err
    assert shared.read_text() == "A=1\n"


def test_console_script_refuses_a_bad_duration_in_one_line():
    bad = subprocess.run([str(ELXPK), *_CREATE, "--checkpoint-save-time", "soon"], capture_output=True, text=True,
                         timeout=120)
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr == ("error: --checkpoint-save-time 'soon': not a number with a unit; give a duration such as "
                          "90s, 2h or 30d\n")


@pytest.mark.parametrize(("value", "line"), [
    ("soon", "--grace-period 'soon': not a number with a unit; give a duration such as 30s, 10m or 1h"),
    ("1.5s", "--grace-period '1.5s': must be whole seconds; give e.g. 30s or 2m"),
])
def test_gclusters_duration_alias_is_read_by_its_rows_reader(cli, tmp_path, value, line):
    out = tmp_path / "m.yaml"
    done = cli("job", "submit", "--name", "w", "--compute-type", "v6e-16", "--command", "x", "--grace-period",
               value, "-o", str(out))
    assert done.code == 2 and done.error_lines == [f"error: {line}"] and not out.exists()


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(sorted(OUTPUT_ROWS)), st.text(max_size=8), st.data())
def test_output_rows_read_any_case_and_refuse_the_rest_in_one_line(kind: str, text: str, data) -> None:
    """-o/--output is a row per kind (elxpk/output_formats.py): a format in any case reads lower-cased;
    anything else is the one line every command of the kind prints, and reads as the kind's default."""
    row = OUTPUT_ROWS[kind]
    word = data.draw(st.sampled_from(OUTPUT_FORMATS[kind]))
    assert row.read("".join(c.upper() if i % 2 else c for i, c in enumerate(word))) == (word, None)
    if text.lower() not in OUTPUT_FORMATS[kind]:
        words = ", ".join(OUTPUT_FORMATS[kind][:-1]) + f" or {OUTPUT_FORMATS[kind][-1]}"
        assert row.read(text) == (OUTPUT_FORMATS[kind][0], f"-o/--output {text!r}: use {words}")
    assert row.read(None) == (OUTPUT_FORMATS[kind][0], None)
