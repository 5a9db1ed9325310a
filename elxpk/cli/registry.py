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


def register_all(app: typer.Typer) -> None:
    for name in GROUPS:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:  # the group is not written yet
                continue
            raise
        module.register(app)
