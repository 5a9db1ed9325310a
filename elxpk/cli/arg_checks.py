"""Checks on the command line as typed, before any value is converted, for every command at once.

- a flag given twice (that is not repeatable): click keeps the last silently, so `--num-slices 2 ...
  --num-slices 4` would run something other than one of the two meant;
- an empty or whitespace-only value (`--kubeconfig ''`, `NAME ''`): converted, an empty path becomes the
  working directory and an empty name the collection of every object;
- an output path that is also an input of the same command (`--output-manifest-file` = `--env-file`).

They run on click's own parse of the arguments (the raw strings, before typer turns `''` into `Path('.')`),
from `PanelHelpCommand.parse_args` (elxpk/cli/commands.py); each problem is one UsageError line.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from elxpk.errors import UsageError
from elxpk.flag_rows import INPUT, OUTPUT
from elxpk_contract.setting_rules import blank_problem

# What a command reads and what it writes, by the flag's name (arguments by their metavar), so an output
# naming an input is refused whatever the command. A flag table's rows say it themselves (Flag.path, passed
# in as `paths`), every output included; these are the inputs declared outside any table (--kubeconfig, a
# cluster flag, and the arguments). --record is read and appended to: it is its own input.
INPUT_FLAGS = frozenset({"--kubeconfig", "RUN_DIR", "RUN_A", "RUN_B", "FILE..."})
# Inputs named by the environment rather than a flag.
INPUT_ENV = ("ELXPK_CONFIG", "KUBECONFIG")


def flag_of(param: Any) -> str:
    """How the user spells `param`: its long option, else its metavar (NAME, RUN_DIR, FILE...)."""
    opts = [o for o in getattr(param, "opts", ()) if o.startswith("--")] or list(getattr(param, "opts", ()))
    if getattr(param, "param_type_name", "") == "argument":
        return (getattr(param, "metavar", None) or param.name or "ARGUMENT").upper()
    return max(opts, key=len) if opts else str(param.name)


def raw_problems(opts: Mapping[str, Any], order: Sequence[Any], environ: Mapping[str, str] = os.environ,
                 paths: Mapping[str, str] | None = None) -> list[str]:
    """Every problem of the raw parse: `opts` (name -> raw value) and `order` (each param per occurrence);
    `paths`: the command's rows that name a file, by spelling (elxpk.flag_rows.path_flags)."""
    if any(getattr(p, "name", None) == "help" for p in order):
        return []  # --help answers whatever else is on the line
    return repeated(order) + empty_values(opts, order) + same_paths(opts, order, environ, paths or {})


def repeated(order: Sequence[Any]) -> list[str]:
    counts: dict[int, int] = {}
    params = {}
    for param in order:
        counts[id(param)] = counts.get(id(param), 0) + 1
        params[id(param)] = param
    problems = []
    for key, count in counts.items():
        param = params[key]
        if count > 1 and not getattr(param, "multiple", False) and getattr(param, "nargs", 1) == 1 \
                and getattr(param, "param_type_name", "") == "option":
            problems.append(f"{flag_of(param)}: given {count} times; give it once (only one value can apply)")
    return problems


def _texts(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _texts(item)


def empty_values(opts: Mapping[str, Any], order: Sequence[Any]) -> list[str]:
    problems = []
    for param in dict.fromkeys(order):
        texts = list(_texts(opts.get(param.name)))
        at = next((i for i, text in enumerate(texts) if not text.strip()), None)
        if at is not None:
            blank = texts[at]
            before = texts[at - 1] if at else ""
            if getattr(param, "param_type_name", "") == "argument" and before.startswith("-") and "=" not in before:
                # the words of a command line (translate's): the blank is the value of the flag before it
                problems.append(blank_problem(before, blank))
            elif getattr(param, "param_type_name", "") == "argument":
                problems.append(f"{flag_of(param)}: empty (or only spaces); give one")
            else:  # the words of every reader (a row's, a trainer setting's, the trainer's own)
                problems.append(blank_problem(flag_of(param), blank))
    return problems


def _real(path: str) -> str:
    return os.path.realpath(os.path.expanduser(path))


def same_paths(opts: Mapping[str, Any], order: Sequence[Any], environ: Mapping[str, str],
               paths: Mapping[str, str]) -> list[str]:
    inputs: list[tuple[str, str]] = []
    outputs: list[tuple[str, str]] = []
    for param in dict.fromkeys(order):
        flag = flag_of(param)
        for text in _texts(opts.get(param.name)):
            if not text.strip() or text == "-":
                continue
            if flag in INPUT_FLAGS or paths.get(flag) == INPUT:
                inputs.append((flag, text))
            elif paths.get(flag) == OUTPUT:
                outputs.append((flag, text))
    if not outputs:
        return []
    for name in INPUT_ENV:
        for text in (environ.get(name) or "").split(os.pathsep if name == "KUBECONFIG" else "\0"):
            if text.strip():
                inputs.append((name, text))
    problems = []
    for out_flag, out in outputs:
        real = _real(out)
        for in_flag, given in inputs:
            if real == _real(given):
                problems.append(f"{out_flag} {out}: is also {in_flag}, which this command reads; writing it "
                                f"would destroy the input, so name another file")
    return problems


def check_raw(opts: Mapping[str, Any], order: Sequence[Any], paths: Mapping[str, str] | None = None) -> None:
    problems = raw_problems(opts, order, paths=paths)
    if problems:
        raise UsageError(*problems)
