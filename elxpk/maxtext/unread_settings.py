"""The warning for trainer settings given with a `--command` that neither the bundled trainer nor
`--trainer maxtext` runs: the settings still reach the container, but only as ELXPK_* env vars, which nothing
in the command is known to read. When the command runs MaxText (which never reads them), it suggests
`--trainer maxtext`.

Apart from elxpk/maxtext/launcher.py so that `workload create` loads MaxText's key table and overrides only
for a command that runs MaxText. Pure and standard library only (the render path imports it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from elxpk.maxtext.command import CommandError, find_invocations, is_maxtext_command
from elxpk_contract.setting_rules import env_name, flag_name


def unread_settings_warnings(command: str, settings: Sequence[tuple[str, Any]], elastic_slices: int) -> list[str]:
    """Warnings for trainer settings given with a `--command` that is not the bundled trainer and not run
    with `--trainer maxtext`: nothing in the command is known to read them."""
    given = [name for name, _ in settings]
    if is_maxtext_command(command):
        values = _maxtext_values(command, ("checkpoint_period", "elastic_enabled"))
        # A command that turns MaxText's elasticity on itself (as MaxText's elastic guide does) drops nothing.
        elastic_dropped = bool(elastic_slices) and values["elastic_enabled"][0] is not True
        flags = [flag_name(n) for n in given] + ([f"--elastic-slices {elastic_slices}"] if elastic_dropped else [])
        if not flags:
            return []
        own = ", ".join(_described(key, value, written) for key, (value, written) in values.items())
        return [f"{', '.join(flags)}: --command runs MaxText, which reads its own config and never the ELXPK_* "
                f"env vars, so MaxText keeps its own values ({own}); "
                f"add --trainer maxtext to pass them as MaxText overrides (docs/maxtext.md)"]
    if not given:
        return []
    envs = ", ".join(env_name(n) for n in given)
    return [f"{flag_list(given)}: --command is neither the bundled trainer (--trainer) nor MaxText "
            f"(--trainer maxtext), so {'this reaches' if len(given) == 1 else 'these reach'} the container "
            f"only as env {envs}, which your command must read"]


def flag_list(names: Sequence[str]) -> str:
    """The settings' flags, comma-separated: `--checkpoint-period, --steps`."""
    return ", ".join(flag_name(n) for n in names)


def _maxtext_values(command: str, keys: Sequence[str]) -> dict[str, tuple[object, bool]]:
    """What MaxText runs `command` with for each key: (value, whether the command writes it); the value is
    None when the shell decides it or MaxText would refuse it (MaxText says so at start-up)."""
    from elxpk.maxtext.data_rules import (
        command_value,  # lazy: MaxText's key table, only for a MaxText command
    )
    from elxpk.maxtext.keys import KEYS  # lazy: MaxText's key table, only for a MaxText command

    try:
        invocations = find_invocations(command)
    except CommandError:  # unclosed quotes: elxpk cannot read it, so MaxText's defaults as far as it can tell
        invocations = []
    out: dict[str, tuple[object, bool]] = {}
    for key in keys:
        inv = next((i for i in invocations if key in i.overrides), None)
        out[key] = (command_value(inv, key), True) if inv else (KEYS[key].default, False)
    return out


def _described(key: str, value: object, written: bool) -> str:
    from elxpk.maxtext.keys import render_value  # lazy: MaxText's key table, only for a MaxText command

    if not written:
        return f"{key} {render_value(value)}"
    return f"{key} {render_value(value)} (the command sets it)" if value is not None else \
        f"{key} as the command's shell sets it"
