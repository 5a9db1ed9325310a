"""`elxpk workload ...`: one Typer group whose commands live in two thin modules.

- workload_create.py: create / create-pathways (render, validate, dry-run or submit)
- workload_ops.py: status, list, delete, logs, wait, kill-slice (follow a submitted workload)
"""

from __future__ import annotations

import importlib

import typer

workload_app = typer.Typer(
    help="Create and follow elastic Pathways/JobSet workloads (kubectl-style verbs).",
    no_args_is_help=True,
)

_COMMAND_MODULES = ["elxpk.cli.workload_create", "elxpk.cli.workload_ops", "elxpk.cli.workload_validate"]
# `workload create --dry-run` has a start-up budget, and Typer builds every registered command on each
# call (~30 ms for the six follow-up verbs), so these two words register only the create module.
_CREATE_WORDS = {"create", "create-pathways"}


def register(app: typer.Typer, words: list[str] | tuple[str, ...] = ()) -> None:
    """`words` is the command line after `workload`, when known. Idempotent: main() runs repeatedly in
    tests, and a later call may need a module an earlier, narrower one skipped."""
    done = workload_app.__dict__.setdefault("_elxpk_modules", set())
    modules = _COMMAND_MODULES[:1] if words and words[0] in _CREATE_WORDS else _COMMAND_MODULES
    for name in modules:
        if name in done:
            continue
        done.add(name)
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:
                continue
            raise
        module.register(workload_app)
    if not any(info.typer_instance is workload_app for info in app.registered_groups):
        app.add_typer(workload_app, name="workload")
