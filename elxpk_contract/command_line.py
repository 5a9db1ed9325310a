"""`python -m trainer`'s command line: one flag per row of the settings table, each also read from its
ELXPK_* env var (flags win), plus the ACTIONS. Kept apart from the table so that the launcher, which
reads the table on every `workload create`, never imports argparse.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import Any

from elxpk_contract.errors import UsageError
from elxpk_contract.settings import ACTIONS, FIELDS, TrainerConfig, check_setting, env_name, flag_name


def config_from_args(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None
                     ) -> TrainerConfig:
    """Flags over ELXPK_* env vars over defaults; every conversion error is reported at once."""
    return parse_command_line(argv, environ)[0]


def parse_command_line(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None
                       ) -> tuple[TrainerConfig, frozenset[str]]:
    """The config from flags over env over defaults, and the ACTIONS named (e.g. {"print_config"});
    every problem reported at once."""
    cls, environ = TrainerConfig, environ or {}
    namespace = _parser(cls).parse_args(list(argv or []))
    actions = frozenset(name for name in ACTIONS if getattr(namespace, name))
    values: dict[str, Any] = {}
    errors: list[str] = []
    for f in FIELDS.values():  # TrainerConfig's fields, as typed rows
        if f.internal:
            continue
        raw = getattr(namespace, f.name)
        source = flag_name(f.name)
        if raw is None or raw == []:
            env_key = env_name(f.name)
            if env_key not in environ:
                continue
            raw, source = environ[env_key], env_key
            if f.repeatable:
                raw = [s for s in raw.split(",") if s.strip()]
        value, problem = check_setting(f.name, raw, source)  # names the env var when the value came from it
        if problem is None:
            values[f.name] = value
        else:
            errors.append(problem)
    try:  # cross-field problems of what is valid alone, reported with the per-setting errors
        config = cls(**values)
    except UsageError as exc:
        raise UsageError(*errors, *exc.messages) from None
    if errors:
        raise UsageError(*errors)
    return config, actions


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse would print usage and exit; report like every other error
        raise UsageError(f"{message} (see python -m trainer --help)")


def _parser(cls: type[TrainerConfig]) -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m trainer", description="elxpk's deterministic elastic JAX trainer.")
    for f in FIELDS.values():  # TrainerConfig's fields, as typed rows
        if f.internal:
            continue
        help_text = f"{f.help} [env {env_name(f.name)}; default {f.default!r}]"
        if f.type == "bool":
            parser.add_argument(flag_name(f.name), dest=f.name, action=argparse.BooleanOptionalAction,
                                default=None, help=help_text)
        elif f.repeatable:
            parser.add_argument(flag_name(f.name), dest=f.name, action="append", default=None,
                                help=help_text + " (repeatable; env: comma-separated)")
        else:
            parser.add_argument(flag_name(f.name), dest=f.name, default=None, help=help_text)
    actions = parser.add_argument_group("actions (instead of a run)")
    for name, help_text in ACTIONS.items():
        actions.add_argument(flag_name(name), dest=name, action="store_true", help=help_text)
    return parser


def given_on_command_line(cls: type[TrainerConfig], argv: Sequence[str]) -> tuple[dict[str, Any], frozenset[str]]:
    """The settings `argv` gives as flags (name -> raw value, not yet checked) and the actions it names, as
    `python -m trainer` would parse them; UsageError for what it would refuse (an unknown flag, a missing
    value). `--help` is refused too: the trainer would print help and exit 0 instead of training."""
    if any(token in ("-h", "--help") for token in argv):
        raise UsageError("--help: the trainer would print its help and exit instead of training; drop it")
    namespace = _parser(cls).parse_args(list(argv))
    actions = frozenset(name for name in ACTIONS if getattr(namespace, name))
    given = {f.name: getattr(namespace, f.name) for f in FIELDS.values()
             if not f.internal and getattr(namespace, f.name) not in (None, [])}
    return given, actions
