"""Where the launcher's trainer settings go, by what `--command` runs, for `workload create`'s flag checks.

- `--trainer maxtext`: `maxtext_command` turns them into MaxText overrides in the command
  (`elxpk.maxtext.overrides`), with MaxText's own refusals as errors.
- any other `--command` (not the bundled trainer): the settings still reach the container, but only as
  ELXPK_* env vars. `unread_settings_warnings` (elxpk/maxtext/unread_settings.py) says so rather than letting
  them drop silently, and suggests `--trainer maxtext` when the command runs MaxText, which never reads them.

Pure and standard library only (the render path imports it).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from elxpk.maxtext.overrides import DIRECT, ENTRY_HINT, maxtext_overrides
from elxpk.maxtext.unread_settings import flag_list
from elxpk_contract.setting_rules import env_name

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
        warnings.append(f"{flag_list(unmapped)}: elxpk passes {'it' if len(unmapped) == 1 else 'them'} to no MaxText "
                        "key (give MaxText's own keys in --command), "
                        f"so {'it reaches' if len(unmapped) == 1 else 'they reach'} the container only as "
                        f"{', '.join(env_name(n) for n in unmapped)}, which MaxText does not read")
    return Outcome(result.command, tuple(result.errors), tuple(warnings))
