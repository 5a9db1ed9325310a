"""One reader for a row that several commands take (issue 45): for each row shared by two or more commands
(`workload create`, `workload validate`, `plan`, `local run`, `checkpoint inspect` and the trainer itself) and
each bad value, every command, run as the user runs it, refuses it with the same line, exit 2.

A row is shared when it is the same quantity: one trainer setting (a `setting_row` of each command's table,
the trainer's own flag) or one launcher row of the same name and spelling (`--step-time` in create and plan).
plan's `--seed` (of --simulate) and the trainer's `--seed` are two quantities that share a spelling: not shared.
Each command runs in-process (the CLI's `main`, the trainer's `main` with --print-config), so the whole test
starts no process. Every row of one quantity carries one rule (elxpk_contract/value_rule.py), which the one
reader reads; the commands run as the user runs them show that nothing between the flag and the reader differs.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elxpk.checkpoints import flags as checkpoint_flags
from elxpk.create import flags as create_flags
from elxpk.flag_rows import DURATION, FLOAT, INT, SIZE, Flag, setting_row
from elxpk.local import flags as local_flags
from elxpk.plan import flags as plan_flags
from elxpk_contract.setting_rules import FIELDS

# Kinds of launcher row whose values can be refused alone (a text row's checks are its command's); a trainer
# setting's row of any kind is read by the contract's rule.
_READ = (INT, FLOAT, DURATION, SIZE)
_CREATE = ["workload", "create", "--workload", "run-1", "--tpu-type", "v5p-8", "--command", "true", "--dry-run"]
_PLAN_NEEDS = {"--num-slices": "4", "--slice-mtbf": "30d", "--step-time": "1s", "--checkpoint-save-time": "5s",
               "--restore": "10s"}

# Each command's rows, as its table declares them.
TABLES: dict[str, tuple[Flag, ...]] = {
    "create": tuple(f for f in create_flags.FLAGS if "create" in f.commands and not f.dialect)
    + create_flags.TRAINER_SETTINGS,
    "validate": tuple(f for f in create_flags.FLAGS if "validate" in f.commands),
    "plan": plan_flags.ROWS,
    "local": local_flags.ROWS,
    "inspect": checkpoint_flags.INSPECT,
    "trainer": tuple(setting_row(name, default=None, commands=("trainer",)) for name, row in FIELDS.items()
                     if not row.internal and not row.repeatable and row.type != "bool"),
}


def _quantity(row: Flag) -> tuple[str, ...]:
    return ("setting", row.setting) if row.setting else ("row", row.name, row.flag)


def _shared() -> list[tuple[tuple[str, ...], list[tuple[str, Flag]]]]:
    takers: dict[tuple[str, ...], list[tuple[str, Flag]]] = defaultdict(list)
    for command, rows in TABLES.items():
        for row in rows:
            if row.kind in _READ or row.setting:
                takers[_quantity(row)].append((command, row))
    return sorted((key, found) for key, found in takers.items() if len(found) >= 2)


SHARED = _shared()
# Spellings no number or duration reads, numbers out of every shared row's bounds, fractions of whole numbers,
# blank text and a word no choice has; given as `--flag=value`, so that every parser hands it to the row.
_BAD = st.one_of(st.sampled_from(["abc", "nan", "inf", "soon", "1_0", "١٢", "٣s", "½", "1.5", "0", "-1", "1e999",
                                  "99999999999999999999999", "", " ", "maybe"]),
                 st.text(alphabet="abcsxyz_½١٢٣.", min_size=1, max_size=6))


def test_the_shared_rows_are_the_ones_the_issue_names():
    names = {key[1] for key, _ in SHARED}
    assert {"num_slices", "checkpoint_period", "steps", "seed", "max_to_keep", "step_time"} <= names
    takers = {key[1]: {c for c, _ in found} for key, found in SHARED}
    assert takers["num_slices"] == {"create", "plan", "local", "trainer"}
    assert takers["checkpoint_period"] == {"create", "plan", "local", "inspect", "trainer"}
    assert ("row", "seed", "--seed") not in {key for key, _ in SHARED}  # plan's --seed is --simulate's


def _argv(command: str, row: Flag, raw: str, tmp_path: Path) -> list[str]:
    given = f"{row.flag}={raw}"
    if command == "create":
        return [*_CREATE, given]
    if command == "validate":
        return ["workload", "validate", str(tmp_path / "none.yaml"), given]
    if command == "plan":
        return ["plan", *[x for k, v in _PLAN_NEEDS.items() if k != row.flag for x in (k, v)], given]
    if command == "inspect":
        return ["checkpoint", "inspect", str(tmp_path), given]
    return ["local", "run", "--run-dir", str(tmp_path / "run"), given]


def _refusal(command: str, row: Flag, raw: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> list[str]:
    """The error lines `command` prints for `row` given as `raw`, after checking it exits 2."""
    capsys.readouterr()
    if command == "trainer":
        from trainer.__main__ import main as trainer_main

        code = trainer_main(["--print-config", f"{row.flag}={raw}"], environ={})
    else:
        from elxpk.cli.main import main

        code = main(_argv(command, row, raw, tmp_path))
    err = capsys.readouterr().err
    assert code == 2, (command, row.flag, raw, err)
    return [line.removeprefix("error: ") for line in err.splitlines()]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shared=st.sampled_from(SHARED), raw=_BAD)
def test_a_shared_row_gets_the_same_line_from_every_command(shared, raw, tmp_path, capsys):
    _, takers = shared
    assert len({row.rule for _, row in takers}) == 1  # one quantity, one rule, read by the one reader
    lines = {command: row.read(raw)[1] for command, row in takers}
    first = next(iter(lines.values()))
    if first is None:  # a value in bounds for this row: nothing to refuse (`0` for a seed)
        assert set(lines.values()) == {None}, lines
        return
    assert set(lines.values()) == {first}, lines  # the rows agree ...
    assert first.startswith(f"{takers[0][1].flag} ")  # ... naming the flag as typed
    for command, row in takers:  # ... and so does every command, as the user runs it
        assert first in _refusal(command, row, raw, tmp_path, capsys), command
    assert not (tmp_path / "run").exists()  # local run refused before it made its run directory


@pytest.mark.parametrize("raw", ["-1", "4294967296"])
def test_every_seed_has_the_one_rule_of_a_seed(raw, tmp_path, capsys):
    """Issue 53: plan's --seed (of --simulate) and kill-slice's (of --slice random) are quantities of their own,
    with the one rule of a seed, the trainer's: 0 to 2**32 - 1. `kill-slice --seed -1` used to be taken."""
    from elxpk.cluster.verbs.verb_flags import KILL_SLICE

    kill_seed = next(r for r in KILL_SLICE if r.name == "seed")
    plan_seed = next(r for r in plan_flags.ROWS if r.name == "seed")
    trainer_seed = setting_row("seed", default=None, commands=("trainer",))
    line = trainer_seed.read(raw)[1]
    assert line == f"--seed {raw}: must be from 0 to 4294967295", line
    assert {kill_seed.read(raw)[1], plan_seed.read(raw)[1]} == {line}
    assert line in _refusal("plan", plan_seed, raw, tmp_path, capsys)
    assert line in _refusal("trainer", trainer_seed, raw, tmp_path, capsys)
    from elxpk.cli.main import main

    code = main(["workload", "kill-slice", "w", "--slice", "random", f"--seed={raw}", "--yes"])
    assert code == 2 and capsys.readouterr().err.splitlines() == [f"error: {line}"]
