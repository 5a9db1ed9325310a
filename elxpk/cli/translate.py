"""`elxpk translate -- COMMAND...`: the elxpk command equivalent to an xpk or gcluster command line.

`gcluster job submit ...` and `xpk workload create|create-pathways ...` are read with the very options of
`elxpk job submit` and `elxpk workload create` (generated from the flag table, elxpk/create/flags.py), and
gcluster's spellings are resolved as `workload create` resolves them (elxpk/create/dialect.py): the
printed command spells every flag elxpk's way and states gcluster's defaults, so it renders the same
manifest as the original line given to `elxpk workload create` (tests/launcher/test_translate.py). A flag
elxpk has no row for is one line each, exit 2, and nothing is printed. So is every value the printed command
would refuse (`--num-slices abc`, `--spot --flex-start`: the very checks and lines of `workload create`,
elxpk/create/pipeline.py `checked`; a flag given twice, elxpk/cli/arg_checks.py) and every word no
flag takes (an unquoted command of two words).
"""

from __future__ import annotations

import shlex
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from elxpk.flag_records import Record

_SOURCES = {  # what the line starts with -> the elxpk command whose options read it
    ("gcluster", "job", "submit"): ("job", "submit"),
    ("xpk", "workload", "create"): ("workload", "create"),
    ("xpk", "workload", "create-pathways"): ("workload", "create"),
}
_USAGE = ("give `gcluster job submit ...` or `xpk workload create|create-pathways ...` after `--`, e.g. "
          "elxpk translate -- gcluster job submit --name run-1 --compute-type v6e-16 -i IMAGE -e 'python3 t.py'")


def translate(
    line: Annotated[list[str], typer.Argument(metavar="COMMAND...", help="The xpk or gcluster command line, "
                                              "after `--` (words as the shell split them).")],
) -> None:
    """Print the elxpk command equivalent to an xpk or gcluster command line (one line per flag it cannot
    carry over, exit 2)."""
    print(" && ".join(shlex.join(words) for words in translated(line)))


def translated(line: list[str]) -> list[list[str]]:
    """The elxpk command lines (words; a `workload wait` follows for --await-job-completion) equivalent to
    `line`; UsageError listing what cannot be carried."""
    from elxpk.errors import UsageError

    source = next((key for key in _SOURCES if tuple(line[:len(key)]) == key), None)
    if source is None:
        raise UsageError(f"translate {shlex.join(line[:3])!r}: not an xpk or gcluster command; {_USAGE}")
    command = _click_command(_SOURCES[source])
    known, problems = _known_words(command, line[len(source):], source[0])
    if problems:
        raise UsageError(*problems)
    context = command.make_context(" ".join(source), list(known), resilient_parsing=True)  # click consumes it
    _check_raw(command, context, known)
    params = context.params
    _check_values(params, submit=source[0] == "gcluster")
    return _elxpk_words(params, xpk_plain=source == ("xpk", "workload", "create"))


def _check_raw(command: Any, context: Any, words: list[str]) -> None:
    """The checks on the words as typed that the command itself runs first (elxpk/cli/arg_checks.py): a flag
    given twice (click would keep the last: the printed command would be neither line meant), an empty value,
    an output naming an input. A resilient parse skips them, so they are run here."""
    from elxpk.cli.arg_checks import check_raw

    opts, _, order = command.make_parser(context).parse_args(args=list(words))
    check_raw(opts, order, getattr(command.callback, "path_flags", {}))


def _check_values(params: dict[str, Any], *, submit: bool) -> None:
    """UsageError with `workload create`'s own lines for what it would refuse (no cluster needed)."""
    from elxpk.cli.options import CLUSTER_FLAGS, SUBMIT_CLUSTER_FLAGS, ClusterSelection
    from elxpk.create.pipeline import checked
    from elxpk_contract.setting_rules import LAUNCHER_FLAG, exposed

    flags = {k: v for k, v in params.items() if k in _flag_keys()}
    settings = {field.name: params.get(field.name) for field in exposed(LAUNCHER_FLAG)}
    cluster = ClusterSelection(**{row.name: params.get(row.name) for row in
                                  (SUBMIT_CLUSTER_FLAGS if submit else CLUSTER_FLAGS)})
    checked(flags, str(params.get("output") or "yaml"), settings, cluster, offline=True)


def _click_command(path: tuple[str, str]) -> Any:
    """The click command at `path` (group, command) of elxpk's app, walked group by group."""
    from elxpk.cli.commands import build_app

    command = typer.main.get_command(build_app(path))
    for name in path:
        if not isinstance(command, TyperGroup):
            raise AssertionError(f"{name}: no command group above it in elxpk's app")
        command = command.commands[name]
    return command


def _known_words(command: Any, words: list[str], who: str) -> tuple[list[str], list[str]]:
    """`words` less the flags `command` lacks (each with its value), and one line per such flag."""
    takes_value = {opt: not p.is_flag for p in command.params for opt in (*p.opts, *p.secondary_opts)
                   if p.param_type_name == "option"}
    known, problems = [], []
    i = 0
    while i < len(words):
        word = words[i]
        name = word.split("=", 1)[0]
        if word == "--":  # the command line's own end of options, inside the words after translate's `--`
            problems.append(f"--: a second `--` in the {who} command line; it takes none (everything after "
                            "translate's first `--` is the command); drop it")
            i += 1
            continue
        if word.startswith("-") and word != "-" and name not in takes_value:
            problems.append(f"{name}: {who}'s flag has no elxpk equivalent; drop it (elxpk translate carries "
                            f"over only what it renders the same way)")
            # its value too: the next word, unless it is `=`-joined or looks like a flag
            i += 1 if "=" in word or i + 1 >= len(words) or words[i + 1].startswith("-") else 2
            continue
        if not word.startswith("-") or word == "-":  # no flag takes it: the shell split a value in two
            problems.append(f"Got unexpected extra argument ({word}): no flag takes it; quote a value of "
                            "several words as one, e.g. --command 'python3 train.py'")
            i += 1
            continue
        known.append(word)
        if name in takes_value and takes_value[name] and "=" not in word:
            if i + 1 >= len(words):  # click's own line, as the printed command would get it
                problems.append(f"Option '{name}' requires an argument.")
            else:
                known.append(words[i + 1])
                i += 1
        i += 1
    return known, problems


class Printed(Record):
    """The values of `workload create`'s rows (elxpk/create/flags.py) that the printed lines read besides the
    table's words: the workload `workload wait` names, and whether the JobSet is plain (--no-pathways)."""

    workload: str | None
    no_pathways: bool


def _elxpk_words(params: dict[str, Any], *, xpk_plain: bool) -> list[list[str]]:
    from elxpk.cli.options import CLUSTER_FLAGS
    from elxpk.create.dialect import resolve
    from elxpk.create.flags import BY_NAME, FLAGS
    from elxpk.errors import UsageError
    from elxpk.flag_records import read_record
    from elxpk.flag_rows import BOOL, LIST
    from elxpk_contract.setting_rules import LAUNCHER_FLAG, exposed, flag_name

    cluster_keys = [row.name for row in CLUSTER_FLAGS]
    flags = {k: v for k, v in params.items() if k in _flag_keys()}
    rows, dialect, problems = resolve(flags, namespace_given=params.get("namespace") is not None)
    if problems:
        raise UsageError(*problems)
    # Read by their rows as `workload create` reads them; _check_values has refused every bad value already.
    printed, _ = read_record(Printed, tuple(BY_NAME[name] for name in Printed.fields()), rows)
    # xpk's `workload create` renders a plain JobSet, `create-pathways` a Pathways one: the printed line says so.
    if xpk_plain and not printed.no_pathways:
        rows = {**rows, "no_pathways": True}
    words = ["elxpk", "workload", "create"]
    for row in FLAGS:  # in the table's order: the name and the machine first
        value = rows.get(row.name)
        if value is None or value is False or value == [] or row.kind == BOOL and not value:
            continue
        if row.kind == BOOL:
            words.append(row.flag)
        elif row.kind == LIST:
            for item in value:
                words += [row.flag, str(item)]
        else:
            words += [row.flag, str(value)]
    namespace = params.get("namespace") or dialect.namespace
    for key in cluster_keys:
        value = namespace if key == "namespace" else params.get(key)
        if value is not None:
            words += ["--" + key, str(value)]
    for field in exposed(LAUNCHER_FLAG):
        if params.get(field.name) is not None:
            words += [flag_name(field.name), str(params[field.name])]
    if params.get("output") not in (None, "yaml"):
        words += ["--output", str(params["output"])]
    if not dialect.await_completion:
        return [words]
    wait = ["elxpk", "workload", "wait", str(printed.workload), "--for", "completed"]
    wait += ["--namespace", namespace] if namespace is not None else []
    return [words, wait + (["--timeout", dialect.timeout] if dialect.timeout is not None else [])]


def _flag_keys() -> frozenset[str]:
    """The parameters that are flag rows or their aliases (gcluster's spellings)."""
    from elxpk.create.flags import ALIASES, BY_NAME, FLAGS

    return frozenset(BY_NAME) | frozenset(ALIASES) | {f.name for f in FLAGS if f.dialect}
