"""The command table: every `elxpk` command, where its function lives, and the groups that hold them.

`build_app(argv)` makes the Typer app for one invocation. When the command line names a command of the
table, only that command's module is imported and only it is built: Typer builds every registered
command on each call (~30 ms for the six follow-up verbs), and `workload create --dry-run` has a
start-up budget. Anything else (`--help`, a group alone, a typo) gets the whole table.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Annotated, Any, NamedTuple

import typer
from typer.core import TyperCommand, TyperGroup

APP_HELP = "Launch and follow elastic multi-slice JAX training on GKE, or run the whole loop locally."


class Command(NamedTuple):
    path: tuple[str, ...]  # ("workload", "create") or ("report",)
    module: str
    function: str
    help: str | None = None  # None: the function's docstring
    optional: bool = False  # the module may not exist yet (a command being written): skipped, not an error
    # words that look like options are its arguments (`translate`: the xpk or gcluster line, with or without
    # `--`; without it click named the line's first flag as an unknown option of translate)
    passthrough: bool = False


GROUPS: dict[str, str] = {
    "workload": "Create and follow elastic Pathways/JobSet workloads (kubectl-style verbs).",
    "local": "Run the elastic loop on this machine: simulated slices, injected faults.",
    "checkpoint": "Check a checkpoint directory (local or gs://): whole, torn and skipped saves.",
    "job": "gcluster's verbs (Cluster Toolkit's `gcluster job`), as aliases of the workload verbs.",
}

# Order is the order of `elxpk --help` and `elxpk workload --help`.
COMMANDS: tuple[Command, ...] = (
    Command(("workload", "create"), "elxpk.cli.workload_create", "create"),
    Command(("workload", "create-pathways"), "elxpk.cli.workload_create", "create",
            help="Alias of `create`, for xpk users."),
    Command(("workload", "validate"), "elxpk.cli.workload_validate", "validate", optional=True),
    Command(("workload", "status"), "elxpk.cli.workload_status", "status"),
    Command(("workload", "list"), "elxpk.cli.workload_list", "list_"),
    Command(("workload", "delete"), "elxpk.cli.workload_delete", "delete"),
    Command(("workload", "logs"), "elxpk.cli.workload_logs", "logs"),
    Command(("workload", "wait"), "elxpk.cli.workload_wait", "wait"),
    Command(("workload", "kill-slice"), "elxpk.cli.workload_kill_slice", "kill_slice"),
    Command(("workload", "events"), "elxpk.cli.workload_events", "events"),
    Command(("job", "submit"), "elxpk.cli.workload_create", "submit"),
    Command(("job", "list"), "elxpk.cli.workload_list", "list_", help="Alias of `workload list`, for gcluster users."),
    Command(("job", "logs"), "elxpk.cli.workload_logs", "logs", help="Alias of `workload logs`, for gcluster users."),
    Command(("job", "cancel"), "elxpk.cli.workload_delete", "delete",
            help="Alias of `workload delete`, for gcluster users."),
    Command(("job", "inspect"), "elxpk.cli.job_inspect", "inspect"),
    Command(("translate",), "elxpk.cli.translate", "translate", passthrough=True),
    Command(("local", "run"), "elxpk.cli.local", "run"),
    Command(("checkpoint", "inspect"), "elxpk.cli.checkpoint", "inspect"),
    Command(("report",), "elxpk.cli.report", "report"),
    Command(("compare",), "elxpk.cli.compare", "compare"),
    Command(("plan",), "elxpk.cli.plan", "plan"),
)


def wanted(argv: Sequence[str]) -> tuple[Command, ...]:
    """The commands to build for this command line: the one it names, else all of them."""
    for command in COMMANDS:
        if tuple(argv[: len(command.path)]) == command.path:
            return (command,)
    return COMMANDS


def _function(command: Command) -> Callable[..., Any] | None:
    try:
        module = importlib.import_module(command.module)
    except ModuleNotFoundError as exc:
        if command.optional and exc.name == command.module:
            return None
        raise
    return getattr(module, command.function)


def _show_version(value: bool) -> None:
    if value:
        from elxpk import __version__

        print(f"elxpk {__version__}")
        raise typer.Exit()


def _root(
    version: Annotated[bool, typer.Option("--version", help="Print the version and exit.", is_eager=True,
                                          callback=_show_version)] = False,
) -> None:
    # A callback keeps the top level a group even when only one command is built.
    pass


class PanelHelpCommand(TyperCommand):
    """Help in click's plain layout, one section per help panel ("Cluster selection", ...).

    Rich's option table crops long flag names (`--termination-grace-period-…`) at 80 columns; click's
    layout gives a long name its own line and wraps the help beneath it.
    """

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        # The raw values first (elxpk/cli/arg_checks.py): a repeated flag, an empty value, an output that is
        # also an input. click's own errors (a missing value, an unknown flag) still come from its parse.
        if args and not ctx.resilient_parsing:
            from elxpk.cli.arg_checks import check_raw

            try:
                opts, _, order = self.make_parser(ctx).parse_args(args=list(args))
            except Exception:  # noqa: BLE001 - click reports it in its own words just below
                pass
            else:
                check_raw(opts, order, getattr(self.callback, "path_flags", {}))
        return super().parse_args(ctx, args)

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        # typer 0.28 writes a required argument as {NAME} in the usage line; NAME is the convention
        pieces = super().collect_usage_pieces(ctx)
        return [p[1:-1] if p.startswith("{") and p.endswith("}") else p for p in pieces]

    def format_options(self, ctx: Any, formatter: Any) -> None:
        sections: dict[str, list[tuple[str, str]]] = {}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            default = "Arguments" if param.param_type_name == "argument" else "Options"
            sections.setdefault(getattr(param, "rich_help_panel", None) or default, []).append(record)
        for title in sorted(sections, key=lambda t: (t != "Arguments", t != "Options")):  # stable otherwise
            with formatter.section(title):
                formatter.write_dl(sections[title])


class TableOrderGroup(TyperGroup):
    """Lists its commands in the table's order (Typer would list plain commands before groups)."""

    def list_commands(self, ctx: Any) -> list[str]:
        prefix = tuple(ctx.command_path.split()[1:])  # () for elxpk, ("workload",) for elxpk workload
        order = list(dict.fromkeys(c.path[len(prefix)] for c in COMMANDS
                                   if c.path[: len(prefix)] == prefix and len(c.path) > len(prefix)))
        names = super().list_commands(ctx)
        return sorted(names, key=lambda name: order.index(name) if name in order else len(order))

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """Each command's first sentence whole, wrapped in its column: click cuts it to the width left
        ("Create and follow elastic Pathways/JobSet workloads..."), mid-sentence."""
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(limit=1_000)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def build_app(argv: Sequence[str]) -> typer.Typer:
    app = typer.Typer(name="elxpk", help=APP_HELP, no_args_is_help=True, add_completion=True,
                      pretty_exceptions_enable=False, rich_markup_mode=None, cls=TableOrderGroup)
    app.callback()(_root)
    groups: dict[str, typer.Typer] = {}
    for command in wanted(argv):
        function = _function(command)
        if function is None:
            continue
        if len(command.path) == 1:
            settings = {"ignore_unknown_options": True} if command.passthrough else None
            app.command(command.path[0], help=command.help, cls=PanelHelpCommand, context_settings=settings)(function)
            continue
        group_name, name = command.path
        if group_name not in groups:
            groups[group_name] = typer.Typer(help=GROUPS[group_name], no_args_is_help=True, rich_markup_mode=None,
                                             cls=TableOrderGroup)
            app.add_typer(groups[group_name], name=group_name)
        groups[group_name].command(name, help=command.help, cls=PanelHelpCommand)(function)
    return app
