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

_COMMAND_MODULES = ["elxpk.cli.workload_create", "elxpk.cli.workload_ops"]


def register(app: typer.Typer) -> None:
    for name in _COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:
                continue
            raise
        module.register(workload_app)
    app.add_typer(workload_app, name="workload")
