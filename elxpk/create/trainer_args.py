"""`workload create --trainer --command "..."`: the bundled trainer's extra arguments, checked as the trainer
itself will parse them (elxpk_contract.command_line), before anything is rendered.

The extra arguments follow `python -m trainer` in the container, and the trainer's flags win over the
ELXPK_* env the launcher renders from its own flags. So an argument the trainer refuses (`--steps abc`,
an unknown flag, an unclosed quote) is refused here, and one that contradicts a launcher flag
(`--checkpoint-dir gs://bkt/y --command "--checkpoint-dir gs://bkt/x"`: the manifest says y, the trainer
writes x) is refused as the MaxText path refuses it (elxpk/maxtext/overrides.py).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

from elxpk_contract.command_line import given_on_command_line
from elxpk_contract.errors import UsageError
from elxpk_contract.settings import LAUNCHER_DERIVED, TrainerConfig, check_setting, flag_name, setting


def trainer_arg_problems(extra: str, settings: Mapping[str, Any]) -> list[str]:
    """One line per problem of the extra trainer arguments `extra`; `settings` are the trainer settings the
    launcher flags gave (name -> checked value)."""

    try:
        tokens = shlex.split(extra)
    except ValueError as exc:
        return [f"--command: {exc} in {extra!r}; balance the quotes (with --trainer, --command holds extra "
                "trainer arguments, split like a shell)"]
    try:
        given, actions = given_on_command_line(TrainerConfig, tokens)
    except UsageError as exc:
        return [f"--command {extra!r}: the trainer refuses it: {m}" for m in exc.messages]
    problems = [f"--command {flag_name(a)}: makes the trainer {a.replace('_', ' ')} and exit instead of "
                "training; drop it" for a in sorted(actions)]
    for name, raw in given.items():
        flag = flag_name(name)
        value, problem = check_setting(name, raw, flag)
        if problem:
            problems.append(f"--command: {problem}")
            continue
        if setting(name).expose == LAUNCHER_DERIVED:
            problems.append(f"--command {flag}: elxpk sets it from {setting(name).derived_from}, and "
                            f"a different value here would contradict the manifest; drop it from --command")
        elif name in settings and settings[name] != value:
            problems.append(f"{flag} {settings[name]}: --command also sets {flag} {raw}, and the trainer's flag "
                            f"wins over the env elxpk renders; give it once, as {flag}")
    return problems
