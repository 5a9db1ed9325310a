"""xpk's flags that elxpk does not carry draw a warning each, not a refusal (#43; the README: "a script written
for xpk runs unchanged"): `workload create` as the user runs it, the manifest the same as without them."""

from __future__ import annotations

import pytest

from elxpk.cli.main import main
from elxpk.create.xpk_only import XPK_ONLY
from tests.launcher.test_flag_table import _help

LINE = ["workload", "create", "--workload", "x", "--tpu-type", "v5p-8", "--command", "python3 t.py --quiet",
        "--dry-run"]


def test_each_flag_is_a_warning_and_the_manifest_is_the_same(capsys):
    assert main(LINE) == 0
    plain = capsys.readouterr().out
    extra = []
    for flag, (takes_value, _) in XPK_ONLY.items():
        extra += [flag, "v"] if takes_value else [flag]
    assert main([*LINE, *extra, "--storage=second"]) == 0
    out, err = capsys.readouterr()
    assert out == plain  # --command's own --quiet stays in the command
    warned = [line.split(":", 2)[1].strip() for line in err.splitlines()]
    assert warned == [*XPK_ONLY, "--storage"], err
    assert all(line.endswith("; ignored") and "xpk's flag, not carried by elxpk" in line for line in err.splitlines())


def test_no_flag_elxpk_carries_is_on_the_list(capsys):
    """A flag with a row of its own is read, never dropped: none of elxpk's create options is in the list."""
    text = _help(capsys, "workload", "create")
    assert [flag for flag in XPK_ONLY if f"{flag} " in text or f"{flag}/" in text] == []


@pytest.mark.parametrize("argv", [["local", "run", "--quiet"], ["workload", "create", "--", "--quiet"]])
def test_other_commands_and_what_follows_dashes_are_untouched(argv, capsys):
    assert main(argv) == 2
    assert "xpk's flag" not in capsys.readouterr().err
