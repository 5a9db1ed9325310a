"""Where the launcher's trainer settings go, by what `--command` runs, for `workload create`'s flag checks.

- `--trainer maxtext`: `maxtext_command` turns them into MaxText overrides in the command
  (`elxpk.maxtext.overrides`), with MaxText's own refusals as errors.
- any other `--command` (not the bundled trainer): the settings still reach the container, but only as
  ELXPK_* env vars. `unread_settings_warnings` says so rather than letting them drop silently, and
  suggests `--trainer maxtext` when the command runs MaxText, which never reads them.

Pure and standard library only (the render path imports it).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from elxpk.maxtext.command import CommandError, find_invocations, is_maxtext_command
from elxpk.maxtext.data_rules import command_value
from elxpk.maxtext.keys import KEYS, render_value
from elxpk.maxtext.overrides import DIRECT, ENTRY_HINT, maxtext_overrides
from elxpk_contract.settings import env_name, flag_name

# The launcher settings that have a MaxText key (docs/maxtext.md, "The mapping").
MAPPED = ("checkpoint_dir", "compilation_cache_dir", *DIRECT)


@dataclass(frozen=True)
class Outcome:
    command: str | None
    errors: tuple[str, ...]
    warnings: tuple[str, ...]


def maxtext_command(command: str | None, settings: Sequence[tuple[str, Any]], *, pathways: bool,
                    elastic: bool, refused: Iterable[str] = (), env: Sequence[tuple[str, str]] = ()) -> Outcome:
    """The `--trainer maxtext` command: `command` with the overrides for `settings` (name, checked value)
    after its config file. `refused`: settings already reported as bad, so not reported twice. `env`: the
    container's --env pairs (MaxText refuses a key set both as `M_<KEY>` and on its command line)."""
    if command is None:
        return Outcome(None, (f"--trainer maxtext: needs --command, the MaxText command to run, e.g. "
                              f"--command '{ENTRY_HINT}'",), ())
    skip = set(refused)
    given = {name: value for name, value in settings if name in MAPPED and name not in skip}
    unmapped = [name for name, _ in settings if name not in MAPPED]
    result = maxtext_overrides(given, pathways=pathways, elastic=elastic, user_command=command,
                               container_env=dict(env))
    warnings = list(result.warnings)
    if unmapped:  # a setting the contract adds later without a MaxText key: say where it goes
        # "passes to no MaxText key": --profiler is a MaxText key's name too, with other values (docs/trainer.md)
        warnings.append(f"{_flags(unmapped)}: elxpk passes {'it' if len(unmapped) == 1 else 'them'} to no MaxText "
                        "key (give MaxText's own keys in --command), "
                        f"so {'it reaches' if len(unmapped) == 1 else 'they reach'} the container only as "
                        f"{', '.join(env_name(n) for n in unmapped)}, which MaxText does not read")
    return Outcome(result.command, tuple(result.errors), tuple(warnings))


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
    return [f"{_flags(given)}: --command is neither the bundled trainer (--trainer) nor MaxText "
            f"(--trainer maxtext), so {'this reaches' if len(given) == 1 else 'these reach'} the container "
            f"only as env {envs}, which your command must read"]


def _maxtext_values(command: str, keys: Sequence[str]) -> dict[str, tuple[object, bool]]:
    """What MaxText runs `command` with for each key: (value, whether the command writes it); the value is
    None when the shell decides it or MaxText would refuse it (MaxText says so at start-up)."""
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
    if not written:
        return f"{key} {render_value(value)}"
    return f"{key} {render_value(value)} (the command sets it)" if value is not None else \
        f"{key} as the command's shell sets it"


def _flags(names: Sequence[str]) -> str:
    return ", ".join(flag_name(n) for n in names)
