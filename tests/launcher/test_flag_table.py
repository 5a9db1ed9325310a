"""The launcher's flag table (elxpk/create/flags.py) and the contract's settings table are what every
command's --help says, what its checks refuse, what WorkloadSpec defaults to, and what docs/launcher.md
shows. Regenerate the docs table with `pytest tests/launcher/test_flag_table.py --update-goldens`.
"""

from __future__ import annotations

import dataclasses
import importlib
from pathlib import Path

import pytest

from elxpk.cli.commands import COMMANDS, build_app
from elxpk.cli.options import flag_parameters
from elxpk.create import flags as table
from elxpk.create.spec import CreateOptions, WorkloadSpec
from elxpk_contract.settings import LAUNCHER_FLAG, bounds_text, exposed, flag_name, setting
from elxpk_contract.settings import default as trainer_default

ROOT = Path(__file__).resolve().parents[2]
GOOD = ("--workload", "flags-1", "--tpu-type", "v5p-8", "--command", "python3 train.py", "--dry-run")
# --accelerator: a --chip-hour-price needs the chips, so each price row's value is read with them.
PLAN = ("--num-slices", "4", "--slice-mtbf", "30d", "--step-time", "2s", "--checkpoint-save-time", "20s",
        "--restore", "30s", "--accelerator", "v5p-16")


def _help(capsys: pytest.CaptureFixture[str], *path: str) -> str:
    """`elxpk PATH --help` as Typer renders it, one line per option (a wide terminal: nothing wrapped)."""
    args = [*path, "--help"]
    capsys.readouterr()
    try:
        build_app(args)(args=args, prog_name="elxpk", standalone_mode=False, terminal_width=10_000,
                        max_content_width=10_000)
    except SystemExit as exc:  # click exits 0 after help under some versions
        assert exc.code in (0, None)
    return capsys.readouterr().out


def _available():
    for command in COMMANDS:
        try:
            importlib.import_module(command.module)
        except ModuleNotFoundError:
            if command.optional:
                continue
            raise
        yield command


@pytest.mark.parametrize("command", list(_available()), ids=lambda c: " ".join(c.path))
def test_every_command_renders_its_help(command, capsys):
    text = _help(capsys, *command.path)
    assert text.startswith(f"Usage: elxpk {' '.join(command.path)}"), text[:200]
    assert "--help" in text


@pytest.mark.parametrize("command, path", [("create", ("workload", "create")),
                                           ("create", ("workload", "create-pathways")),
                                           ("validate", ("workload", "validate"))])
def test_help_says_each_rows_help_bounds_and_default(command, path, capsys):
    text = _help(capsys, *path)
    rows = table.of_command(command)
    aliases = {a.key for r in rows for a in r.aliases}
    assert rows and {p.name for p in flag_parameters(command)} == {r.name for r in rows} | aliases
    flat = " ".join(text.split())  # --help wraps lines
    for row in rows:
        assert row.flag in text, row.flag
        assert " ".join(row.full_help(command).split()) in flat, row.name
        for alias in row.aliases:  # gcluster's spellings: their own options, saying whose spelling they are
            assert alias.spelling in text and " ".join(row.alias_help(alias).split()) in flat, alias.spelling
        if row.shown_default:
            assert f"Default: {row.shown_default}." in row.full_help(command)
        if row.low is not None:
            assert (f"At least {row.low}." if row.high in (None, 2**31 - 1, 2**63 - 1) else
                    f"From {row.low} to {row.high}.") in text
    # #43: an API field's integer width is no range a person reads
    assert str(2**63 - 1) not in text and str(2**31 - 1) not in text


def test_create_help_says_each_trainer_settings_contract_default_and_bounds(capsys):
    text = _help(capsys, "workload", "create")
    for f in exposed(LAUNCHER_FLAG):
        line = text[text.index("\n  " + flag_name(f.name) + " ") + 1:]
        line = line[:line.index("\n  --") if "\n  --" in line else len(line)]
        shown = "none" if f.default is None else f.default
        assert f"trainer default {shown})" in line, f.name
        bounds = bounds_text(f.name)
        if bounds and not f.choices:
            assert bounds in line, (f.name, bounds)


@pytest.mark.parametrize("path, names", [(("local", "run"), ("steps", "num_slices", "checkpoint_period", "seed")),
                                         (("plan",), ("num_slices", "max_to_keep", "checkpoint_period"))])
def test_local_run_and_plan_take_shared_settings_from_the_contract(path, names, capsys):
    text = _help(capsys, *path)
    for name in names:
        help_start = setting(name).help
        assert help_start[:1].upper() + help_start[1:] in text, name
        assert bounds_text(name) in text, name


def test_spec_and_option_defaults_are_the_tables():
    spec_fields = WorkloadSpec._field_defaults  # NamedTuples: each field's default
    option_fields = CreateOptions._field_defaults
    checked = 0
    for row in table.FLAGS:
        if row.default is None or row.dialect:  # gcluster's own rows reach the spec through elxpk/create/dialect.py
            continue
        fields = option_fields if row.option else spec_fields
        if row.name in fields and row.name != "dry_run":  # CreateOptions.dry_run is the mode, with --dry-run-server
            assert fields[row.name] == row.default, row.name
            checked += 1
    assert checked >= 10
    assert spec_fields["worker_image"] == table.default("server_image")
    # Every flag of the table reaches parse_create (or is acted on by the command itself: --check-data).
    assert {r.name for r in table.FLAGS if not r.dialect} - set(table.COMMAND_CHECKS) <= table.SPEC_KEYS | table.OPTION_KEYS


TRAINER = ("--workload", "flags-1", "--tpu-type", "v5p-8", "--trainer", "--docker-image", "gcr.io/p/t:1", "--dry-run")


def _create(cli, *extra: str):
    return cli("workload", "create", *GOOD, *extra)


@pytest.mark.parametrize("row", [r for r in table.FLAGS if r.low is not None], ids=lambda r: r.name)
def test_create_refuses_below_each_rows_bound_and_takes_the_bound(row, cli):
    below = _create(cli, row.flag, str(row.low - 1))
    assert below.code == 2 and any(line.startswith(f"error: {row.flag} ") for line in below.error_lines), below.err
    at = _create(cli, row.flag, str(row.low))
    assert not any(row.flag + " " in line for line in at.error_lines), at.err


@pytest.mark.parametrize("name", [f.name for f in exposed(LAUNCHER_FLAG) if f.low is not None])
def test_create_refuses_below_each_trainer_settings_bound(name, cli):
    low = setting(name).low
    below = cli("workload", "create", *TRAINER, flag_name(name), str(int(low) - 1))
    assert below.code == 2
    assert any(line.startswith(f"error: {flag_name(name)} ") for line in below.error_lines), below.err


@pytest.mark.parametrize("value", ["0", "1"])
def test_plan_refuses_max_to_keep_below_two_in_one_line(value, cli):
    result = cli("plan", *PLAN, "--max-to-keep", value)
    assert result.code == 2
    assert result.error_lines == [f"error: --max-to-keep {value}: must be at least 2 (keep at least 2 so a corrupt "
                                  "newest checkpoint has a valid predecessor)"], result.err
    assert trainer_default("max_to_keep") >= 2
    assert cli("plan", *PLAN, "--max-to-keep", "2", "-o", "json").code == 0


def test_recovery_is_a_create_flag_rendered_into_the_trainers_env(cli):
    result = cli("workload", "create", *TRAINER, "--recovery", "checkpoint")
    assert result.code == 0, result.err
    assert '- name: "ELXPK_RECOVERY"\n' in result.out and 'value: "checkpoint"' in result.out
    refused = cli("workload", "create", *TRAINER, "--recovery", "rewind")
    assert refused.code == 2 and refused.error_lines == ["error: --recovery 'rewind': use one of live, checkpoint"]


def test_launcher_page_carries_the_generated_flag_table(update_goldens):
    page_path = ROOT / "docs" / "launcher.md"
    page = page_path.read_text(encoding="utf-8")
    if update_goldens:
        page_path.write_text(table.embed(page), encoding="utf-8")
        page = page_path.read_text(encoding="utf-8")
    assert page == table.embed(page), "docs/launcher.md: regenerate the flag table with --update-goldens"
    assert page.count(table.BEGIN) == 1 and page.count(table.END) == 1
    for row in table.FLAGS:
        assert f"| `{row.flag}" in page, row.flag
    # The trainer settings' mapping, generated from the contract (as in docs/interfaces.md).
    from elxpk_contract import settings_doc

    if update_goldens:
        page_path.write_text(settings_doc.embed(page), encoding="utf-8")
        page = page_path.read_text(encoding="utf-8")
    assert page == settings_doc.embed(page), "docs/launcher.md: regenerate the settings table with --update-goldens"


def test_minus_one_means_all_slices_in_one_place():
    """The "-1 = all slices" rule is `slices_waited_for` (and the ALL_SLICES constant): no other module
    compares elastic_min_slice_count with -1 itself."""
    import re

    pattern = re.compile(r"min_slice\w*\s*[!=]?=\s*-1\b|-1 if .*min_slice|min_slice.* else -1\b")
    found = []
    for part in ("elxpk", "elxpk_contract", "elxpk_storage", "trainer"):
        for path in (ROOT / part).rglob("*.py"):
            if path.name == "settings.py" and path.parent.name == "elxpk_contract":
                continue
            found += [f"{path.relative_to(ROOT)}:{n}" for n, line in
                      enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if pattern.search(line)]
    assert found == []


# `local run` and `plan`: their own flags are rows of elxpk/local/flags.py and elxpk/plan/flags.py.
from elxpk import flag_rows  # noqa: E402
from elxpk.local import flags as local_table  # noqa: E402
from elxpk.plan import flags as plan_table  # noqa: E402

STAGE_TABLES = [("local run", ("local", "run"), local_table), ("plan", ("plan",), plan_table)]


@pytest.mark.parametrize("command, path, stage", STAGE_TABLES, ids=["local run", "plan"])
def test_local_run_and_plan_help_say_each_rows_help_bounds_and_default(command, path, stage, capsys):
    text = _help(capsys, *path)
    rows = [r for r in stage.FLAGS if not r.hidden]
    aliases = {a.key for r in stage.FLAGS for a in r.aliases}  # plan's earlier spellings: accepted, not listed
    assert {p.name for p in flag_parameters(command, stage.FLAGS)} == {r.name for r in stage.FLAGS} | aliases
    for row in rows:
        assert (f"{row.flag} / {row.off_flag}" if row.off_flag else row.flag) in text, row.flag
        assert row.full_help(command) in text, row.name
        if row.shown_default:
            assert f"Default: {row.shown_default}." in row.full_help(command)
        if row.low is not None:
            assert row.bounds_sentence() in row.full_help(command)
    for row in stage.SHARED:  # the trainer settings it takes: the contract's help and bounds
        assert row.help[:-1] in text and bounds_text(row.name) in text, row.name
    assert not any(r.hidden and r.flag in text for r in stage.FLAGS)


def test_local_run_and_plan_defaults_are_their_rows():
    from elxpk.local.options import LocalRunOptions
    from elxpk.plan.inputs import PlanFlags, PlanInputs

    fields = {f.name: f.default for f in dataclasses.fields(LocalRunOptions)}
    assert fields["mode"] == local_table.default("mode") == "pause-resume"
    assert fields["revive_after"] == local_table.default("revive_after") == 1.0
    assert fields["steps"] == local_table.DEFAULT_STEPS and fields["checkpoint_period"] == local_table.DEFAULT_CHECKPOINT_PERIOD
    given = dict(zip([a[2:].replace("-", "_") for a in PLAN[::2]], PLAN[1::2], strict=True))
    inputs = PlanInputs.from_flags(PlanFlags(**{**given, "num_slices": int(given["num_slices"])}))
    assert inputs.price_per_gib_month == plan_table.default("price_per_gib_month")
    assert (inputs.simulate_trials, inputs.weibull_shape, inputs.seed) == (0, 1.0, 0)
    assert inputs.job_duration_s == plan_table.default("job_duration") == 30 * 86400
    costs = inputs.costs
    assert (costs.replacement_s, costs.image_pull_s, costs.compile_s, costs.reshard_s) == tuple(
        plan_table.default(n) for n in ("slice_replacement_time", "image_pull", "compile", "reshard"))
    assert inputs.periods == plan_table.DEFAULT_PERIODS


def _bad_values(row):
    """Values each row refuses on its own: below and above its bounds, not a number, not a duration."""
    if row.low is not None:
        yield str(row.low - 1 if row.kind == flag_rows.INT else row.low / 2 - 1)
    if row.high is not None:
        yield str(row.high + 1)
    if row.kind in (flag_rows.INT, flag_rows.FLOAT, flag_rows.DURATION, flag_rows.SIZE):
        yield "abc"
    if row.kind == flag_rows.INT:
        yield "1.5"
    if row.kind == flag_rows.FLOAT:
        yield "nan"
    if row.choices:
        yield "no-such-choice"


def _plan_with(flag: str, value: str) -> list[str]:
    """PLAN with `flag` given `value` (in its place, if PLAN gives it: a flag given twice is refused)."""
    pairs = dict(zip(PLAN[::2], PLAN[1::2], strict=True))
    pairs[flag] = value
    return [item for pair in pairs.items() for item in pair]


def _cases(stage):
    return [(row, value) for row in stage.FLAGS for value in _bad_values(row)]


@pytest.mark.parametrize("row, value", _cases(plan_table), ids=lambda x: getattr(x, "name", x))
def test_plan_refuses_each_rows_bad_value_in_one_line_and_writes_nothing(row, value, cli, tmp_path):
    plot = tmp_path / "p.png"
    result = cli("plan", *_plan_with(row.flag, value), "--plot", str(plot))
    assert result.code == 2 and result.out == "" and not plot.exists()
    assert len(result.error_lines) == 1 and result.error_lines[0].startswith(f"error: {row.flag}"), result.err
    expected = row.read(value)[1]
    assert result.error_lines == [f"error: {expected}"]


@pytest.mark.parametrize("row", [r for r in plan_table.FLAGS if r.low is not None], ids=lambda r: r.name)
def test_plan_takes_each_rows_bounds(row, cli):
    for value in (row.low, row.high):
        if value is not None:
            result = cli("plan", *_plan_with(row.flag, str(value)), "-o", "json")
            assert result.code == 0, result.err


@pytest.mark.parametrize("row, value", _cases(local_table), ids=lambda x: getattr(x, "name", x))
def test_local_run_refuses_each_rows_bad_value_in_one_line_and_writes_nothing(row, value, cli, tmp_path):
    run_dir = tmp_path / "run"
    result = cli("local", "run", "--run-dir", str(run_dir), "--plain", row.flag, value)
    assert result.code == 2 and result.out == "" and not run_dir.exists()
    assert result.error_lines == [f"error: {row.read(value)[1]}"], result.err
    assert result.error_lines[0].startswith(f"error: {row.flag}")


@pytest.mark.parametrize("page, stage", [("local.md", local_table), ("planner.md", plan_table)])
def test_local_and_planner_pages_carry_their_generated_flag_tables(page, stage, update_goldens):
    path = ROOT / "docs" / page
    text = path.read_text(encoding="utf-8")
    if update_goldens:
        path.write_text(stage.embed(text), encoding="utf-8")
        text = path.read_text(encoding="utf-8")
    assert text == stage.embed(text), f"docs/{page}: regenerate the flag table with --update-goldens"
    assert text.count(stage.BEGIN) == 1 and text.count(stage.END) == 1
    for row in stage.SHARED + stage.FLAGS:
        assert (f"| `{row.flag}" in text) != row.hidden, row.flag


def test_help_names_the_choices_and_the_top_level_says_whole_sentences(capsys):
    """#43: a flag with a closed set shows it ([delete|evict|exit], not <str>); the command lists give each
    command's first sentence whole, wrapped, never cut with "..."."""
    assert "--mode [delete|evict|exit]" in _help(capsys, "workload", "kill-slice")
    assert "--for [completed|running]" in _help(capsys, "workload", "wait")
    for path in ((), ("workload",), ("job",)):
        args = [*path, "--help"]
        capsys.readouterr()
        try:  # an 80-column terminal, where click cut them
            build_app(args)(args=args, prog_name="elxpk", standalone_mode=False, terminal_width=80)
        except SystemExit as exc:
            assert exc.code in (0, None)
        listed = capsys.readouterr().out.split("Commands:", 1)[1]
        assert "..." not in listed and all(len(line) <= 80 for line in listed.splitlines()), listed
        if not path:
            assert "workload    Create and follow elastic Pathways/JobSet workloads (kubectl-style\n" in listed


@pytest.mark.parametrize("command", list(_available()), ids=lambda c: " ".join(c.path))
def test_click_converts_no_number_the_rows_read_every_one(command):
    """Every option and argument reaches its command as text (or a flag's bool): the rows read numbers with the
    contract's one rule (ASCII digits, no `_` groups), so click's int()/float(), which take other scripts'
    digits and `_`, never see one (the launcher's check for that, arg_checks.odd_numbers, is gone with it)."""
    import typer.main

    group = typer.main.get_command(build_app(list(command.path)))
    for word in command.path:
        group = group.commands[word]  # type: ignore[attr-defined]
    kinds = {type(p.type).__name__ for p in group.params}
    assert kinds <= {"StringParamType", "BoolParamType", "Choice", "Path", "File", "UnprocessedParamType"}, (
        command.path, kinds)
