"""Which command groups exist. Each entry is (module, attribute): a Typer app or a register(app) function."""

from __future__ import annotations

import importlib

import typer

# Order is the order of `elxpk --help`.
GROUPS: list[str] = [
    "elxpk.cli.workload",  # workload create|status|list|delete|logs|wait|kill-slice
    "elxpk.cli.local",  # local run
    "elxpk.cli.report",  # report RUN_DIR
    "elxpk.cli.compare",  # compare RUN_A RUN_B
    "elxpk.cli.plan",  # plan
]


def register_all(app: typer.Typer, only: str | None = None, words: list[str] | tuple[str, ...] = ()) -> None:
    """Register every group on `app`, each module once.

    With `only` (the first command-line word), register just that module when it adds a sub-group
    (a module whose register() takes a second argument gets `words`, the rest of the command line):
    Typer builds every registered command on each call, and `workload create --dry-run` has a start-up
    budget. A module that adds plain commands gets the others too, since Typer would collapse an app
    holding a single command into that command.
    """
    if only is not None:
        wanted = next((name for name in GROUPS if name.rsplit(".", 1)[1] == only), None)
        if wanted is not None:
            _register_module(app, wanted, words)
            if app.registered_groups and not app.registered_commands:
                return
    for name in GROUPS:
        _register_module(app, name)


def _register_module(app: typer.Typer, name: str, words: list[str] | tuple[str, ...] = ()) -> None:
    done = app.__dict__.setdefault("_elxpk_registered", set())
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name == name:  # the group is not written yet
            return
        raise
    if module.register.__code__.co_argcount >= 2:
        module.register(app, words)  # it takes the rest of the command line and registers idempotently
    elif name not in done:
        done.add(name)
        module.register(app)
